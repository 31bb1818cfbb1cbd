"""Sequence parallelism: a sequence-parallel stage computes what the plain TP layer does.

Two gloo ranks, TP 2 with --sequence-parallel, one stage of the 4-layer tiny model, fp32. The
reference is the plain layer without sequence parallelism over the whole sequence on the TP
group, so it cannot share a mistake with the SP code. TP rank t holds the t-th half of the
sequence: its output and input gradient must equal the reference's at its positions, its weight
gradients the reference's, and its norm weights' gradients summed over TP the reference's, within
1e-5 relative: for the plain SP layer, and nanobatched for every slot of every SP key plus none,
with and without full recompute, with a launch trace matching the plan. A plan made with the
other --sequence-parallel setting is refused naming the flag.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import helpers  # noqa: E402

TP, SEQ, MBS, TOLERANCE = 2, 16, 2, 1e-5


def _worker(rank, world, port, out_dir):
    from kareus import torch as kt
    from kareus._runtime import Workload

    helpers.init_gloo(rank, world, port)
    groups = kt.CommGroups([[0, 1]], rank, "gloo")
    rope = kt.Rope(Workload(helpers.TINY_MODEL).model, SEQ, torch.device("cpu"), torch.float32)
    x, grad = helpers.seeded_inputs(MBS, SEQ)
    mine = slice(rank * SEQ // TP, (rank + 1) * SEQ // TP)
    results = {"cases": []}
    for recompute in (True, False):
        kind = "full" if recompute else "none"
        workload = Workload(helpers.TINY_MODEL, tp=TP, pp=1, mbs=MBS, seq=SEQ, microbatches=1, recompute=kind,
                            sequence_parallel=True)
        # Without CP the whole sequence's RoPE table is the rank's too.
        sharded = helpers.ShardedStage(kt, workload, rank, groups, rope, rope, x, grad, mine, sequence_parallel=True)
        if recompute:
            results["plain"] = sharded.plain()
        results["cases"] += sharded.cases(f"{out_dir}/plan_{rank}.json")
        # The other setting's plan is refused naming the flag, both ways.
        if recompute:
            plain = Workload(helpers.TINY_MODEL, tp=TP, pp=1, mbs=MBS, seq=SEQ, microbatches=1, recompute=kind)
            refusals = []
            for job, made in ((plain, True), (workload, False)):
                path = helpers.write_plan(f"{out_dir}/other_{rank}.json", 1, 1, {}, recompute,
                                          {"sequence_parallel": made})
                try:
                    kt.ExecutionPlan(path, job, 108, 16)
                    refusals.append(None)
                except ValueError as error:
                    refusals.append(str(error).replace(path, "P"))
            results["refusals"] = refusals
    helpers.finish_worker(rank, out_dir, results)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return helpers.run_workers(_worker, TP, tmp_path_factory.mktemp("sp"))


def test_plain_sp_layer_matches_the_tp_layer(results):
    errors = results["plain"]
    worst = max(errors, key=errors.get)
    assert errors[worst] < TOLERANCE, (worst, errors[worst])
    assert len(errors) == 2 + 4 * 6


SP_COLLECTIVES = {"attn_all_gather", "attn_reduce_scatter", "mlp_all_gather", "mlp_reduce_scatter",
                  "mlp_grad_all_gather", "fc1_input_all_gather", "fc1_grad_reduce_scatter", "attn_grad_all_gather",
                  "qkv_input_all_gather", "qkv_grad_reduce_scatter"}


def test_every_sp_slot_matches_the_tp_layer(results):
    cases = results["cases"]
    # 18 SP keys, each slot + none: 8 forward keys (norms 1 slot, attn 4, mlp 3: 18 + 8 = 26) and
    # 10 backward (bwd_attn_norm_* norm_0 and the last layer's elementwise_0, mlp norms 1, bwd_fc2
    # 2, fc1 1 + 1, bwd_ao 3, qkv 1 + 1: 14 + 10 = 24), per recompute setting.
    assert len(cases) == 2 * 50
    helpers.check_sharded_cases(cases, TOLERANCE, SP_COLLECTIVES)


def test_worst_errors(results):
    worst = max(max(c["errors"].values()) for c in results["cases"])
    print(f"worst relative error over {len(results['cases'])} cases: {worst:.3g}; plain: "
          f"{max(results['plain'].values()):.3g}")


def test_a_plan_for_the_other_setting_names_the_flag(results):
    assert results["refusals"] == [
        "P: made with --sequence-parallel, this run is without --sequence-parallel (made for sequence_parallel "
        "true, this run has sequence_parallel false)",
        "P: made without --sequence-parallel, this run has --sequence-parallel (made for sequence_parallel "
        "false, this run has sequence_parallel true)"]

"""Sequence and context parallelism together: an SP + CP stage computes what the plain TP layer
does over the whole sequence.

Four gloo ranks, TP 2 x CP 2 with --sequence-parallel, one stage of the 4-layer tiny model, fp32.
The reference is the plain TP layer over the whole sequence (neither SP nor CP), so it cannot
share a mistake with either. As in Megatron, CP shards the sequence first (rank r holds chunks r
and 3-r of four) and SP splits that CP-local sequence over TP: TP rank t holds the t-th half of
its CP rank's positions. Its output and input gradient must equal the reference's at those
positions, its parameter gradients summed over CP (and the norms' over TP too) the reference's,
within 1e-5 relative: for the plain SP + CP layer, and nanobatched for every slot of every key
(SP and CP collectives alike) plus none, with full recompute; a launch trace matching the plan.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import helpers  # noqa: E402

TP, CP = 2, 2
SEQ = 16
MBS = 2
TOLERANCE = 1e-5
NORMS = ("input_norm", "mlp_norm")


def _worker(rank, world, port, out_dir):
    import torch.distributed as dist

    from kareus import torch as kt
    from kareus._runtime import Workload, load_model, map_rank

    helpers.init_gloo(rank, world, port)
    where = map_rank(rank, tp=TP, cp=CP)
    tp_rank, cp_rank = where["tp_rank"], where["cp_rank"]
    groups = kt.CommGroups(kt.tp_groups(TP, 1, 1, CP), rank, "gloo", kt.cp_groups(TP, 1, 1, CP))
    cpu = torch.device("cpu")
    model = load_model(helpers.TINY_MODEL)
    full_rope = kt.Rope(model, SEQ, cpu, torch.float32)
    rope = kt.Rope(model, SEQ, cpu, torch.float32, CP, cp_rank)
    x = torch.randn(MBS, SEQ, 64, generator=torch.Generator().manual_seed(5))
    grad = torch.randn(MBS, SEQ, 64, generator=torch.Generator().manual_seed(6))
    local = SEQ // CP // TP
    positions = kt.layer.cp_positions(SEQ, CP, cp_rank)[tp_rank * local:(tp_rank + 1) * local]
    results = {"positions": positions.tolist(), "cases": []}

    def compare(stage, reference, x_run, y, x_ref, y_ref):
        errors = {"output": helpers.relative(y, y_ref[:, positions]),
                  "input_grad": helpers.relative(x_run.grad, x_ref.grad[:, positions])}
        for (name, mine), (_, theirs) in zip(stage.layers.named_parameters(), reference.layers.named_parameters()):
            summed = mine.grad.clone()
            dist.all_reduce(summed, group=groups.plain_cp)
            if name.split(".")[-1] in NORMS:
                dist.all_reduce(summed, group=groups.plain)
            errors[name] = helpers.relative(summed, theirs.grad)
        return errors

    workload = Workload(helpers.TINY_MODEL, tp=TP, cp=CP, pp=1, mbs=MBS, seq=SEQ, microbatches=1,
                        recompute="full", sequence_parallel=True)
    layers = list(workload.stage_layers)
    reference = kt.LlamaStage(workload.model, layers, 0, TP, tp_rank, 3)
    x_ref = x.clone().requires_grad_()
    y_ref = kt.reference_stack(reference.layers, full_rope, x_ref, groups.plain, TP)
    y_ref.backward(grad)

    stage = kt.LlamaStage(workload.model, layers, 0, TP, tp_rank, 3, sequence_parallel=True)
    x_run = x[:, positions].clone().requires_grad_()
    y = kt.reference_stack(stage.layers, rope, x_run, groups.plain, TP, groups.plain_cp, sequence_parallel=True)
    y.backward(grad[:, positions])
    results["plain"] = compare(stage, reference, x_run, y, x_ref, y_ref)

    for key, slot, configs in helpers.case_configs(workload, ctas_cycle=2):
        path = helpers.write_plan(f"{out_dir}/plan_{rank}.json", 1, 1, configs, True, {"sequence_parallel": True})
        plan = kt.ExecutionPlan(path, workload, 108, 16)
        groups.ensure(plan.distinct_ctas())
        stage = kt.LlamaStage(workload.model, layers, 0, TP, tp_rank, 3, sequence_parallel=True)
        trace = kt.LaunchTrace()
        runner = kt.StageRunner(stage.layers, rope, groups, TP, True, trace, sequence_parallel=True)
        runner.set_instruction(plan.stages[0][0])
        x_run = x[:, positions].clone().requires_grad_()
        y = runner(x_run, 0)
        runner.set_instruction(plan.stages[0][1])
        y.backward(grad[:, positions])
        ok, problems = kt.check_trace(trace.events, plan, 0, True)
        collectives = sorted({e[2] for e in trace.events if e[0] == "enqueue"})
        results["cases"].append({"key": key, "slot": slot, "trace_ok": ok, "problems": problems,
                                 "collectives": collectives, "errors": compare(stage, reference, x_run, y, x_ref, y_ref)})
    helpers.finish_worker(rank, out_dir, results)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return helpers.run_workers(_worker, TP * CP, tmp_path_factory.mktemp("sp_cp"))


def test_rank_zero_holds_the_first_half_of_its_chunks(results):
    # Rank 0 is tp 0, cp 0: CP chunks 0 and 3 of four (positions 0-3, 12-15), its TP half the first.
    assert results["positions"] == [0, 1, 2, 3]


def test_plain_sp_cp_layer_matches_the_whole_sequence(results):
    errors = results["plain"]
    worst = max(errors, key=errors.get)
    assert errors[worst] < TOLERANCE, (worst, errors[worst])
    assert len(errors) == 2 + 4 * 6


CP_COLLECTIVES = {"kv_all_gather", "kv_regather", "dkv_reduce_scatter"}
SP_COLLECTIVES = {"attn_all_gather", "attn_reduce_scatter", "mlp_all_gather", "mlp_reduce_scatter",
                  "mlp_grad_all_gather", "fc1_input_all_gather", "fc1_grad_reduce_scatter", "attn_grad_all_gather",
                  "qkv_input_all_gather", "qkv_grad_reduce_scatter"}


def test_every_slot_matches_the_whole_sequence(results):
    cases = results["cases"]
    keys = {case["key"] for case in cases}
    assert len(keys) == 23 and len(cases) > len(keys), sorted(keys)
    for case in cases:
        worst = max(case["errors"], key=case["errors"].get)
        assert case["errors"][worst] < TOLERANCE, (case["key"], case["slot"], worst, case["errors"][worst])
        assert case["trace_ok"], case["problems"]
        # No all-reduce is left on TP: SP replaces every one; CP's collectives run beside them.
        assert set(case["collectives"]) == SP_COLLECTIVES | CP_COLLECTIVES, case["collectives"]
    print(f"worst relative error over {len(cases)} cases: "
          f"{max(max(c['errors'].values()) for c in cases):.3g}; plain {max(results['plain'].values()):.3g}")

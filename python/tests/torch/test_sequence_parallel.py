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

import json

import pytest

torch = pytest.importorskip("torch")

import helpers  # noqa: E402

TP = 2
SEQ = 16
MBS = 2
TOLERANCE = 1e-5
NORMS = ("input_norm", "mlp_norm")


def _worker(rank, world, port, out_dir):
    import torch.distributed as dist

    from kareus import torch as kt
    from kareus._runtime import Workload

    helpers.init_gloo(rank, world, port)
    groups = kt.CommGroups([[0, 1]], rank, "gloo")
    rope = kt.Rope(Workload(helpers.TINY_MODEL).model, SEQ, torch.device("cpu"), torch.float32)
    x = torch.randn(MBS, SEQ, 64, generator=torch.Generator().manual_seed(5))
    grad = torch.randn(MBS, SEQ, 64, generator=torch.Generator().manual_seed(6))
    mine = slice(rank * SEQ // TP, (rank + 1) * SEQ // TP)
    results = {"cases": []}

    def compare(stage, reference, x_run, y, x_ref, y_ref):
        errors = {"output": helpers.relative(y, y_ref[:, mine]),
                  "input_grad": helpers.relative(x_run.grad, x_ref.grad[:, mine])}
        for (name, param), (_, theirs) in zip(stage.layers.named_parameters(), reference.layers.named_parameters()):
            summed = param.grad.clone()
            if name.split(".")[-1] in NORMS:
                dist.all_reduce(summed, group=groups.plain)
            errors[name] = helpers.relative(summed, theirs.grad)
        return errors

    for recompute in (True, False):
        kind = "full" if recompute else "none"
        workload = Workload(helpers.TINY_MODEL, tp=TP, pp=1, mbs=MBS, seq=SEQ, microbatches=1, recompute=kind,
                            sequence_parallel=True)
        layers = list(workload.stage_layers)
        reference = kt.LlamaStage(workload.model, layers, 0, TP, rank, 3)
        x_ref = x.clone().requires_grad_()
        y_ref = kt.reference_stack(reference.layers, rope, x_ref, groups.plain, TP)
        y_ref.backward(grad)
        if recompute:
            stage = kt.LlamaStage(workload.model, layers, 0, TP, rank, 3, sequence_parallel=True)
            x_run = x[:, mine].clone().requires_grad_()
            y = kt.reference_stack(stage.layers, rope, x_run, groups.plain, TP, sequence_parallel=True)
            y.backward(grad[:, mine])
            results["plain"] = compare(stage, reference, x_run, y, x_ref, y_ref)
        for key, slot, configs in helpers.case_configs(workload, ctas_cycle=2):
            path = helpers.write_plan(f"{out_dir}/plan_{rank}.json", 1, 1, configs, recompute,
                                      {"sequence_parallel": True})
            plan = kt.ExecutionPlan(path, workload, 108, 16)
            groups.ensure(plan.distinct_ctas())
            stage = kt.LlamaStage(workload.model, layers, 0, TP, rank, 3, sequence_parallel=True)
            trace = kt.LaunchTrace()
            runner = kt.StageRunner(stage.layers, rope, groups, TP, recompute, trace, sequence_parallel=True)
            runner.set_instruction(plan.stages[0][0])
            x_run = x[:, mine].clone().requires_grad_()
            y = runner(x_run, 0)
            runner.set_instruction(plan.stages[0][1])
            y.backward(grad[:, mine])
            ok, problems = kt.check_trace(trace.events, plan, 0, recompute)
            collectives = sorted({e[2] for e in trace.events if e[0] == "enqueue"})
            results["cases"].append({"key": key, "slot": slot, "recompute": recompute, "trace_ok": ok,
                                     "problems": problems, "collectives": collectives,
                                     "errors": compare(stage, reference, x_run, y, x_ref, y_ref)})
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
    for case in cases:
        worst = max(case["errors"], key=case["errors"].get)
        assert case["errors"][worst] < TOLERANCE, (case["key"], case["slot"], case["recompute"], worst)
        assert case["trace_ok"], case["problems"]
        assert set(case["collectives"]) == SP_COLLECTIVES


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

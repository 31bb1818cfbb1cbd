"""The nanobatched stage equals the unsplit reference layer, for every launch slot of every key.

Two gloo ranks (TP 2, one stage of the 4-layer tiny model), fp32. For each partition key and each
of its slots plus ``none``, with and without full recompute, one forward and one backward run
through StageRunner under a hand-written plan; output, input gradient and every parameter
gradient must match ordinary autograd through the plain layer within 1e-5 relative. The launch
trace of one case is checked against hand-counted numbers.
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


def _worker(rank, world, port, out_dir):
    from kareus import torch as kt
    from kareus._runtime import Workload

    helpers.init_gloo(rank, world, port)
    results = {"cases": [], "trace": {}, "plain": []}
    for recompute in (True, False):
        workload = Workload(helpers.TINY_MODEL, tp=TP, pp=1, mbs=MBS, seq=SEQ, microbatches=1,
                            recompute="full" if recompute else "none")
        groups = kt.CommGroups([[0, 1]], rank, "gloo")
        rope = kt.Rope(workload.model, SEQ, torch.device("cpu"), torch.float32)
        x = torch.randn(MBS, SEQ, 64, generator=torch.Generator().manual_seed(5))
        grad = torch.randn(MBS, SEQ, 64, generator=torch.Generator().manual_seed(6))
        reference = kt.LlamaStage(workload.model, list(workload.stage_layers), 0, TP, rank, 3)
        x_ref = x.clone().requires_grad_()
        y_ref = kt.reference_stack(reference.layers, rope, x_ref, groups.plain, TP)
        y_ref.backward(grad)

        def run_plan(plan):
            stage = kt.LlamaStage(workload.model, list(workload.stage_layers), 0, TP, rank, 3)
            return helpers.run_against_reference(kt, stage, reference, rope, groups, TP, recompute, plan, x, grad,
                                                 y_ref, x_ref)

        for key, slot, configs in helpers.case_configs(workload):
            path = helpers.write_plan(f"{out_dir}/plan_{rank}.json", 1, 1, configs, recompute)
            plan = kt.ExecutionPlan(path, workload, 108, 16)
            groups.ensure(plan.distinct_ctas())
            trace, errors = run_plan(plan)
            ok, problems = kt.check_trace(trace.events, plan, 0, recompute)
            results["cases"].append({"key": key, "slot": slot, "recompute": recompute, "errors": errors,
                                     "trace_ok": ok, "problems": problems})
            if recompute and key == "fwd_attn" and slot == "rope_0":
                results["trace"]["fwd_attn_rope_0"] = trace.events
            if not recompute and key == "bwd_mlp" and slot == "none":
                results["trace"]["bwd_mlp_none"] = trace.events
        # An instruction with overlap "none" runs the plain layer; its partner may be nanobatched.
        for plain in ("forward", "backward"):
            configs = helpers.plan_configs({key: (slot, 3) for key, slot in helpers.first_slots(workload).items()})
            path = helpers.write_plan(f"{out_dir}/plan_{rank}.json", 1, 1, configs, recompute)
            document = json.loads(open(path).read())
            document["stages"][0]["instructions"][0 if plain == "forward" else 1].update(overlap="none", partitions={})
            open(path, "w").write(json.dumps(document))
            plan = kt.ExecutionPlan(path, workload, 108, 16)
            trace, errors = run_plan(plan)
            markers = [e for e in trace.events if e[0] == "pass"]
            results["plain"].append({"plain": plain, "recompute": recompute, "errors": errors, "markers": markers})
    helpers.finish_worker(rank, out_dir, results)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return helpers.run_workers(_worker, 2, tmp_path_factory.mktemp("layer"))


def test_every_slot_of_every_key_matches_the_reference(results):
    # fwd_attn: norm_0 linear_0 rope_0 attn_0 linear_1; fwd_mlp: norm_0 linear_0 activation_0 linear_1;
    # bwd_mlp: elementwise_0 (last layer) linear_0 activation_0 linear_1 norm_0; bwd_attn: norm_0
    # linear_0 attn_0 rope_0 linear_1. Compared: output, input gradient, 6 weights x 4 layers.
    helpers.check_slot_cases(results["cases"], TOLERANCE, 2 + 4 * 6)


def test_trace_launches_at_the_slot_and_waits_at_the_partition_end(results):
    events = [tuple(e) for e in results["trace"]["fwd_attn_rope_0"]]
    markers = [e for e in events if e[0] == "pass"]
    assert markers == [("pass", "forward", 0, "forward"), ("pass", "backward", 0, "recompute"),
                       ("pass", "backward", 0, "backward")]
    forward = events[1 : events.index(markers[1])]
    # 4 layers x 2 collectives x 2 nanobatches; 11 compute ops per layer per nanobatch.
    assert sum(e[0] == "enqueue" for e in forward) == 16
    assert sum(e[0] == "wait" for e in forward) == 16
    assert sum(e[0] == "op" for e in forward) == 88
    for index, event in enumerate(forward):
        if event[0] == "enqueue" and event[1] == "fwd_attn":
            assert event[5] == "rope_0"
            assert forward[index + 1][:2] == ("op", "rope")
            # fwd_attn's collective is the other nanobatch's attention (first layer: NB0's, at NB1's
            # partition) or MLP all-reduce; it is joined right after this partition's out_proj.
            end = next(i for i in range(index + 1, len(forward)) if forward[i][0] != "op" or forward[i][1] == "out_proj")
            assert forward[end][1] == "out_proj" and forward[end + 1][0] == "wait"
            assert forward[end + 1][1:3] == event[1:3]
    # The very first partition (NB0's first attention) has no collective: 5 ops, then NB1's run.
    assert [e[1] for e in forward[:5]] == ["input_norm", "qkv", "rope", "attention", "out_proj"]
    assert forward[5:7] == [("op", "input_norm", 0, 1), ("op", "qkv", 0, 1)]
    assert forward[7][:6] == ("enqueue", "fwd_attn", "attn_all_reduce", 0, 0, "rope_0")


def test_slot_none_launches_after_the_compute(results):
    events = [tuple(e) for e in results["trace"]["bwd_mlp_none"]]
    backward = events[events.index(("pass", "backward", 0, "backward")) + 1 :]
    launches = [i for i, e in enumerate(backward) if e[0] == "enqueue" and e[1] == "bwd_mlp"]
    # bwd_mlp carries a collective in 4 layers x 2 partitions, minus the stage's first (NB0, none).
    assert len(launches) == 7
    for index in launches:
        assert backward[index - 1][:2] == ("op", "fc1_bwd")
        assert backward[index + 1][0] == "wait" and backward[index + 1][1] == "bwd_mlp"


def test_an_instruction_without_overlap_runs_the_plain_layer(results):
    assert len(results["plain"]) == 4
    for case in results["plain"]:
        worst = max(case["errors"], key=case["errors"].get)
        assert case["errors"][worst] < TOLERANCE, (case, worst)
        kinds = [tuple(m[1:]) for m in case["markers"]]
        if case["plain"] == "forward":
            # Only the backward is nanobatched: it recomputes the forward partitions from the input.
            assert kinds == [("backward", 0, "recompute"), ("backward", 0, "backward")]
        else:
            assert kinds == [("forward", 0, "forward")]

"""Context parallelism: a CP-sharded stage computes what the whole sequence does on one rank.

Four gloo ranks, TP 2 x CP 2, one stage of the 4-layer tiny model, fp32. The reference is the
plain layer over the whole sequence (no CP) on each TP group, so it cannot share a mistake with
the CP code. Each CP rank holds chunks r and 3-r of four (load-balanced causal sharding); its
output and input gradient must equal the reference's at its positions, and its parameter
gradients summed over the CP group must equal the reference's, within 1e-5 relative: for the
plain CP layer, and nanobatched for every slot of every key that carries a CP collective
(kv_all_gather, kv_regather, dkv_reduce_scatter) plus none, with and without full recompute.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import helpers  # noqa: E402

TP, CP = 2, 2
SEQ = 16
MBS = 2
TOLERANCE = 1e-5
CP_COLLECTIVES = {"kv_all_gather", "kv_regather", "dkv_reduce_scatter"}


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
    positions = kt.layer.cp_positions(SEQ, CP, cp_rank)
    results = {"positions": positions.tolist(), "cases": []}

    def compare(stage, reference, x_run, y, x_ref, y_ref):
        errors = {"output": helpers.relative(y, y_ref[:, positions]),
                  "input_grad": helpers.relative(x_run.grad, x_ref.grad[:, positions])}
        for (name, mine), (_, theirs) in zip(stage.layers.named_parameters(), reference.layers.named_parameters()):
            summed = mine.grad.clone()
            dist.all_reduce(summed, group=groups.plain_cp)
            errors[name] = helpers.relative(summed, theirs.grad)
        return errors

    for recompute in (True, False):
        workload = Workload(helpers.TINY_MODEL, tp=TP, cp=CP, pp=1, mbs=MBS, seq=SEQ, microbatches=1,
                            recompute="full" if recompute else "none")
        layers = list(workload.stage_layers)
        reference = kt.LlamaStage(workload.model, layers, 0, TP, tp_rank, 3)
        x_ref = x.clone().requires_grad_()
        y_ref = kt.reference_stack(reference.layers, full_rope, x_ref, groups.plain, TP)
        y_ref.backward(grad)
        if recompute:
            stage = kt.LlamaStage(workload.model, layers, 0, TP, tp_rank, 3)
            x_run = kt.shard_sequence(x, CP, cp_rank).requires_grad_()
            y = kt.reference_stack(stage.layers, rope, x_run, groups.plain, TP, groups.plain_cp)
            y.backward(kt.shard_sequence(grad, CP, cp_rank))
            results["plain"] = compare(stage, reference, x_run, y, x_ref, y_ref)
        for key, slot, configs in helpers.case_configs(workload, CP_COLLECTIVES, ctas_cycle=2):
            path = helpers.write_plan(f"{out_dir}/plan_{rank}.json", 1, 1, configs, recompute)
            plan = kt.ExecutionPlan(path, workload, 108, 16)
            groups.ensure(plan.distinct_ctas())
            stage = kt.LlamaStage(workload.model, layers, 0, TP, tp_rank, 3)
            trace = kt.LaunchTrace()
            runner = kt.StageRunner(stage.layers, rope, groups, TP, recompute, trace)
            runner.set_instruction(plan.stages[0][0])
            x_run = kt.shard_sequence(x, CP, cp_rank).requires_grad_()
            y = runner(x_run, 0)
            runner.set_instruction(plan.stages[0][1])
            y.backward(kt.shard_sequence(grad, CP, cp_rank))
            ok, problems = kt.check_trace(trace.events, plan, 0, recompute)
            collectives = sorted({e[2] for e in trace.events if e[0] == "enqueue"})
            results["cases"].append({"key": key, "slot": slot, "recompute": recompute, "trace_ok": ok,
                                     "problems": problems, "collectives": collectives,
                                     "errors": compare(stage, reference, x_run, y, x_ref, y_ref)})
    results["groups"] = kt.describe_groups(groups)
    helpers.finish_worker(rank, out_dir, results)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return helpers.run_workers(_worker, TP * CP, tmp_path_factory.mktemp("cp"))


def test_rank_zero_holds_the_first_and_last_chunk(results):
    # Rank 0 is tp 0, cp 0: chunks 0 and 3 of 4 chunks of 4 tokens.
    assert results["positions"] == [0, 1, 2, 3, 12, 13, 14, 15]


def test_plain_cp_layer_matches_the_whole_sequence(results):
    errors = results["plain"]
    worst = max(errors, key=errors.get)
    assert errors[worst] < TOLERANCE, worst
    assert len(errors) == 2 + 4 * 6


def test_every_cp_slot_matches_the_whole_sequence(results):
    cases = results["cases"]
    # Keys with a CP collective: fwd_qkv_ag (norm_0 linear_0 rope_0), fwd_ao_ag (attn_0
    # linear_0), bwd_o_ag (norm_0 linear_0), bwd_a_ag (attn_0), bwd_a_rs (attn_0), bwd_qkv_rs
    # (rope_0 linear_0), each + none: 4 + 3 + 3 + 2 + 2 + 3 = 17 per recompute setting.
    assert len(cases) == 2 * 17
    for case in cases:
        worst = max(case["errors"], key=case["errors"].get)
        assert case["errors"][worst] < TOLERANCE, (case["key"], case["slot"], case["recompute"], worst)
        assert case["trace_ok"], case["problems"]
        assert set(case["collectives"]) >= CP_COLLECTIVES | {"attn_all_reduce", "qkv_grad_all_reduce"}


def test_tp_and_cp_groups_are_made_for_every_cta_count(results):
    # The first plan uses 3 CTAs and the trails' default 16 (made ascending); a later one adds 6.
    made = [(g["group"], g["ctas"]) for g in results["groups"]]
    assert made == [("tp", None), ("cp", None), ("tp", 3), ("cp", 3), ("tp", 16), ("cp", 16), ("tp", 6), ("cp", 6)]

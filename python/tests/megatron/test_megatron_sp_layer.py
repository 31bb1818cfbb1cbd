"""The kareus-run Megatron block with sequence parallelism equals Megatron's own block without it,
for every launch slot of every SP partition key, with and without full recompute.

Two gloo ranks (TP 2), one stage of the 4-layer tiny GPT (local spec, RMSNorm, fp32). Megatron's
local spec takes no SP (its torch norms refuse it; the CPU shim builds them under SP, marked
``sequence_parallel``), so the reference is Megatron's TransformerBlock without SP at the same TP
over the whole sequence: the same mathematics. Both blocks come from one seed (norm weights drawn
off their init of ones). For each SP key and each of its slots plus ``none`` (on 3, 6, 9 or 12
CTAs), one forward and one backward of this rank's half of the sequence run through the kareus
block under a hand-written plan: its output and input gradient must equal the reference's at the
rank's positions, each linear's weight gradient the reference's, and each norm weight's gradient
summed over TP (Megatron's finalize step for ``sequence_parallel`` parameters) the reference's,
within 1e-5 relative; its launch trace must be the plan's.
"""

from __future__ import annotations

import pytest

import mhelpers
from mhelpers import helpers

TP = 2
SEQ = 16
MBS = 2
TOLERANCE = 1e-5


def _worker(rank, world, port, out_dir):
    import torch.distributed as dist
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec

    from kareus import torch as kt
    from kareus._runtime import Workload
    from kareus.megatron.block import adopt_block

    mine = slice(rank * SEQ // TP, (rank + 1) * SEQ // TP)  # this TP rank's slice of the sequence
    freqs, x, grad, groups = mhelpers.start_block_test(rank, world, port, TP, SEQ, MBS)
    spec = get_gpt_layer_local_spec(normalization="RMSNorm")

    def build(sequence_parallel):
        return mhelpers.seeded_block(mhelpers.tiny_config(tp=TP, sequence_parallel=sequence_parallel), spec)

    reference = build(False)
    x_ref = x.clone().requires_grad_()
    y_ref = reference(x_ref, None, rotary_pos_emb=freqs)
    y_ref.backward(grad)
    results = {"cases": [], "marked": sorted(n for n, p in build(True).named_parameters()
                                             if getattr(p, "sequence_parallel", False))}
    for recompute in (True, False):
        workload = Workload(helpers.TINY_MODEL, tp=TP, pp=1, mbs=MBS, seq=SEQ, microbatches=1,
                            recompute="full" if recompute else "none", sequence_parallel=True)
        for key, slot, configs in helpers.case_configs(workload):
            path = helpers.write_plan(f"{out_dir}/plan_{rank}.json", 1, 1, configs, recompute,
                                      workload={"sequence_parallel": True})
            plan = kt.ExecutionPlan(path, workload, 108, 16)
            groups.ensure(plan.distinct_ctas())
            trace = kt.LaunchTrace()
            holder = mhelpers.holding(build(True))
            follower = adopt_block(holder, lambda layers, ops, plain, dim: kt.StageRunner(
                layers, None, groups, TP, recompute, trace, ops=ops, plain=plain, batch_dim=dim,
                sequence_parallel=True))
            follower.follow(plan.stages[0][0])
            x_run = x[mine].clone().requires_grad_()
            y = holder.decoder(x_run, None, rotary_pos_emb=freqs)
            follower.follow(plan.stages[0][1])
            y.backward(grad[mine].contiguous())
            errors = {"output": helpers.relative(y, y_ref[mine]),
                      "input_grad": helpers.relative(x_run.grad, x_ref.grad[mine])}
            for (name, param), (_, theirs) in zip(holder.decoder.named_parameters(), reference.named_parameters()):
                summed = param.grad.clone()
                if getattr(param, "sequence_parallel", False):  # Megatron's finalize step
                    dist.all_reduce(summed)
                errors[name] = helpers.relative(summed, theirs.grad)
            ok, problems = kt.check_trace(trace.events, plan, 0, recompute)
            enqueued = [e for e in trace.events if e[0] == "enqueue"]
            results["cases"].append({"key": key, "slot": slot, "recompute": recompute, "errors": errors,
                                     "trace_ok": ok, "problems": problems,
                                     "collectives": sorted({e[2] for e in enqueued})})
    helpers.finish_worker(rank, out_dir, results)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return mhelpers.run_megatron_workers(_worker, 2, tmp_path_factory.mktemp("megatron_sp_layer"))


def test_every_slot_of_every_sp_key_matches_megatrons_block_without_sp(results):
    cases = results["cases"]
    assert {c["recompute"] for c in cases} == {True, False}
    assert len({(c["key"], c["slot"]) for c in cases}) >= 40, len(cases)
    for case in cases:
        # output + input gradient + 6 weights per layer (2 norms, qkv, proj, fc1, fc2) x 4 layers
        assert len(case["errors"]) == 2 + 6 * 4
        worst = max(case["errors"], key=case["errors"].get)
        assert case["errors"][worst] < TOLERANCE, (case["key"], case["slot"], case["recompute"], worst,
                                                   case["errors"][worst])
        assert case["trace_ok"], case["problems"]


def test_the_sp_collectives_run_and_the_norms_are_marked_for_the_tp_sum(results):
    collectives = set().union(*(c["collectives"] for c in results["cases"]))
    assert {"attn_all_gather", "attn_reduce_scatter", "mlp_all_gather", "mlp_reduce_scatter",
            "qkv_input_all_gather", "fc1_input_all_gather", "qkv_grad_reduce_scatter",
            "fc1_grad_reduce_scatter"} <= collectives, sorted(collectives)
    assert not any("all_reduce" in name for name in collectives)
    assert results["marked"] == sorted(f"layers.{i}.{norm}.weight" for i in range(4)
                                       for norm in ("input_layernorm", "pre_mlp_layernorm"))

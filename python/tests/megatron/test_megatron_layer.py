"""The kareus-run Megatron block equals Megatron's own TransformerBlock, for every launch slot of
every partition key, with and without full recompute.

Two gloo ranks (TP 2), one stage of the 4-layer tiny GPT (local spec, fp32). Two
TransformerBlocks are built from one seed (the same weights, norm weights drawn off their init of
ones so that each norm matters); one is adopted by kareus. For each
partition key and each of its slots plus ``none`` (on 3, 6, 9 or 12 CTAs), one forward and one
backward run through the kareus block under a hand-written plan; its output, input gradient and
every parameter gradient must equal stock autograd through Megatron's block within 1e-5
relative, and its launch trace must be the plan's. All of it again with qk_layernorm on (Qwen3's
q/k RMSNorm: Megatron's q_layernorm and k_layernorm, run by the qkv_post op), and with
normalization="LayerNorm" (GPT-3's norm: each norm's bias gets its gradient too). (Context
parallelism is not tested: the local spec's DotProductAttention refuses it; docs/megatron.md.)
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
    import json

    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.transformer_block import TransformerBlock

    from kareus import InputError
    from kareus import torch as kt
    from kareus._runtime import Workload
    from kareus.megatron.block import adopt_block

    freqs, x, grad, groups = mhelpers.start_block_test(rank, world, port, TP, SEQ, MBS)
    results = {"cases": []}
    for qk_layernorm, normalization in ((False, "RMSNorm"), (True, "RMSNorm"), (False, "LayerNorm")):
        config = mhelpers.tiny_config(tp=TP, qk_layernorm=qk_layernorm, normalization=normalization)
        spec = get_gpt_layer_local_spec(normalization=normalization, qk_layernorm=qk_layernorm)
        # The tiny model with Qwen3's q/k norm: the plan's op graph gains the qkv_post op; or with
        # LayerNorm (GPT-3's norm: a bias beside each weight).
        model_path = f"{out_dir}/model_{rank}.json"
        with open(helpers.TINY_MODEL, encoding="utf-8") as handle:
            model = dict(json.load(handle), qk_norm=qk_layernorm, norm=normalization.lower())
        with open(model_path, "w", encoding="utf-8") as handle:
            json.dump(model, handle)

        def build():
            return mhelpers.seeded_block(config, spec)  # q and k norms differ

        if qk_layernorm:  # the config asks for q/k norms the spec did not build: refused by name
            plain_spec = get_gpt_layer_local_spec(normalization="RMSNorm")
            plain_block = TransformerBlock(config, plain_spec, pre_process=True, post_process=False)
            try:
                adopt_block(mhelpers.holding(plain_block), lambda *_: None)
            except InputError as error:
                results["spec_without_qk_norms"] = str(error)
        reference = build()
        x_ref = x.clone().requires_grad_()
        y_ref = reference(x_ref, None, rotary_pos_emb=freqs)
        y_ref.backward(grad)
        for recompute in (True, False):
            workload = Workload(model_path, tp=TP, pp=1, mbs=MBS, seq=SEQ, microbatches=1,
                                recompute="full" if recompute else "none")
            for key, slot, configs in helpers.case_configs(workload):
                path = helpers.write_plan(f"{out_dir}/plan_{rank}.json", 1, 1, configs, recompute)
                plan = kt.ExecutionPlan(path, workload, 108, 16)
                groups.ensure(plan.distinct_ctas())
                trace = kt.LaunchTrace()
                holder = mhelpers.holding(build())
                follower = adopt_block(holder, lambda layers, ops, plain, dim: kt.StageRunner(
                    layers, None, groups, TP, recompute, trace, ops=ops, plain=plain, batch_dim=dim))
                follower.follow(plan.stages[0][0])
                x_run = x.clone().requires_grad_()
                y = holder.decoder(x_run, None, rotary_pos_emb=freqs)
                follower.follow(plan.stages[0][1])
                y.backward(grad)
                errors = {"output": helpers.relative(y, y_ref),
                          "input_grad": helpers.relative(x_run.grad, x_ref.grad)}
                for (name, mine), (_, theirs) in zip(holder.decoder.named_parameters(), reference.named_parameters()):
                    errors[name] = helpers.relative(mine.grad, theirs.grad)
                ok, problems = kt.check_trace(trace.events, plan, 0, recompute)
                enqueued = [e for e in trace.events if e[0] == "enqueue"]
                results["cases"].append({"key": key, "slot": slot, "recompute": recompute,
                                         "qk_layernorm": qk_layernorm, "normalization": normalization,
                                         "errors": errors, "trace_ok": ok,
                                         "problems": problems, "enqueued": len(enqueued),
                                         "ctas": sorted({e[6] for e in enqueued if e[1] == key}),
                                         "planned_ctas": {**configs["forward"], **configs["backward"]}[key]["ctas"]})
    helpers.finish_worker(rank, out_dir, results)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return mhelpers.run_megatron_workers(_worker, 2, tmp_path_factory.mktemp("megatron_layer"))


def test_every_slot_of_every_key_matches_megatrons_block(results):
    # output + input gradient + 6 weights per layer (2 norms, qkv, proj, fc1, fc2) x 4 layers
    helpers.check_slot_cases([c for c in results["cases"] if not c["qk_layernorm"] and c["normalization"] == "RMSNorm"],
                             TOLERANCE, 2 + 6 * 4)


def test_with_layernorm_every_slot_matches_megatrons_block_and_the_norm_biases_get_gradients(results):
    # ... + the bias of each layer's two norms: 8 per layer.
    cases = [c for c in results["cases"] if c["normalization"] == "LayerNorm"]
    helpers.check_slot_cases(cases, TOLERANCE, 2 + 8 * 4)
    assert sum(name.endswith("input_layernorm.bias") for name in cases[0]["errors"]) == 4


def test_with_qk_layernorm_every_slot_matches_megatrons_block_and_the_qk_norms_get_gradients(results):
    # ... + the q and k norm weights of each layer: 8 per layer.
    cases = [c for c in results["cases"] if c["qk_layernorm"]]
    helpers.check_slot_cases(cases, TOLERANCE, 2 + 8 * 4)
    assert sum(name.endswith("self_attention.q_layernorm.weight") for name in cases[0]["errors"]) == 4


def test_qk_layernorm_without_the_specs_qk_norms_is_refused_by_name(results):
    assert results["spec_without_qk_norms"] == (
        "kareus.megatron: layer 1: qk_layernorm=True but self_attention.q_layernorm is IdentityOp (build the "
        "GPTModel with get_gpt_layer_local_spec(qk_layernorm=True))")


def test_every_collective_runs_at_its_planned_cta_count(results):
    for case in results["cases"]:
        # 4 layers x 2 nanobatches x 2 collectives per pass, less the stage's first partition (no
        # collective yet), plus the trail: 16 per pass; forward + backward (+ recompute forward).
        assert case["enqueued"] == 16 * (3 if case["recompute"] else 2), case
        assert case["ctas"] == [case["planned_ctas"]], case
    assert {c["planned_ctas"] for c in results["cases"]} == {3, 6, 9, 12}

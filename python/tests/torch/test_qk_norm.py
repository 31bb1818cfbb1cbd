"""q/k RMSNorm (models with qk_norm, e.g. Qwen3): the C++ op graph adds qkv_post after qkv, and
the nanobatched stage must still equal the unsplit reference.

Two gloo ranks (TP 2, one stage of the tiny model with qk_norm on), fp32, full recompute. For
every slot of every key plus ``none``: output, input gradient and every parameter gradient
(q_norm and k_norm included) within 1e-5 relative of ordinary autograd through the plain layer.
Then the q/k norm gradients, partial on each rank (its heads only), are summed over TP.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

import helpers  # noqa: E402
from test_layer import MBS, SEQ, TOLERANCE, TP  # noqa: E402


def _worker(rank, world, port, out_dir, model_path):
    import torch.distributed as dist

    from kareus import torch as kt
    from kareus._runtime import Workload

    helpers.init_gloo(rank, world, port)
    workload = Workload(model_path, tp=TP, pp=1, mbs=MBS, seq=SEQ, microbatches=1, recompute="full")
    groups = kt.CommGroups([[0, 1]], rank, "gloo")
    rope = kt.Rope(workload.model, SEQ, torch.device("cpu"), torch.float32)
    x = torch.randn(MBS, SEQ, 64, generator=torch.Generator().manual_seed(5))
    grad = torch.randn(MBS, SEQ, 64, generator=torch.Generator().manual_seed(6))
    reference = kt.LlamaStage(workload.model, list(workload.stage_layers), 0, TP, rank, 3)
    # Norm weights of ones would hide a wrong broadcast over heads: make them distinct per element.
    for layer in reference.layers:
        with torch.no_grad():
            layer.q_norm.copy_(torch.linspace(0.5, 1.5, 16))
            layer.k_norm.copy_(torch.linspace(1.5, 0.5, 16))
    x_ref = x.clone().requires_grad_()
    y_ref = kt.reference_stack(reference.layers, rope, x_ref, groups.plain, TP)
    y_ref.backward(grad)
    results = {"ops": [op["name"] for op in workload.partitions(0, "forward")[1]["ops"]], "cases": []}

    for key, slot, configs in helpers.case_configs(workload):
        plan = kt.ExecutionPlan(helpers.write_plan(f"{out_dir}/plan_{rank}.json", 1, 1, configs, True), workload, 108,
                                16)
        groups.ensure(plan.distinct_ctas())
        stage = kt.LlamaStage(workload.model, list(workload.stage_layers), 0, TP, rank, 3)
        stage.load_state_dict(reference.state_dict())
        _, errors = helpers.run_against_reference(kt, stage, reference, rope, groups, TP, True, plan, x, grad, y_ref,
                                                  x_ref)
        results["cases"].append({"key": key, "slot": slot, "errors": errors})

    # Partial q/k norm gradients differ by rank; after the TP sum both ranks hold the same total.
    partial = reference.layers[0].q_norm.grad.clone()
    everyone = [torch.empty_like(partial) for _ in range(world)]
    dist.all_gather(everyone, partial)
    kt.tp_reduce_norm_grads(reference.layers, groups.plain, TP)
    results["partials_differ"] = bool((everyone[0] - everyone[1]).abs().max() > 1e-6)
    results["sum_error"] = helpers.relative(reference.layers[0].q_norm.grad, everyone[0] + everyone[1])
    helpers.finish_worker(rank, out_dir, results)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("qk_norm")
    model = json.loads(open(helpers.TINY_MODEL).read())
    model.update(name="tiny-qk-norm", qk_norm=True)
    (out / "model.json").write_text(json.dumps(model))
    return helpers.run_workers(_worker, 2, out, str(out / "model.json"))


def test_the_op_graph_norms_q_and_k_after_qkv(results):
    assert results["ops"][:4] == ["input_norm", "qkv", "qkv_post", "rope"]


def test_every_slot_of_every_key_matches_the_reference(results):
    assert len(results["cases"]) == 23  # the same keys and slots as without q/k norm
    for case in results["cases"]:
        # 2 + 4 layers x (6 parameters + q_norm + k_norm)
        assert len(case["errors"]) == 2 + 4 * 8
        assert "0.q_norm" in case["errors"] and "3.k_norm" in case["errors"]
        worst = max(case["errors"], key=case["errors"].get)
        assert case["errors"][worst] < TOLERANCE, (case["key"], case["slot"], worst)


def test_q_and_k_norm_gradients_are_summed_over_tensor_parallel_ranks(results):
    assert results["partials_differ"]
    assert results["sum_error"] < 1e-6

"""kareus._runtime.Workload: the C++ partition builder as kareus.torch sees it (no torch needed)."""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent / "torch"))  # the torch tests' helpers (no torch)
import helpers  # noqa: E402
from kareus._runtime import Workload, load_gpu, load_model  # noqa: E402


def _summary(partition):
    collective = partition["collective"]
    return (partition["key"], partition["nanobatch"], partition["layer"],
            None if collective is None else (collective["name"], collective["nanobatch"], collective["layer"]))


def test_forward_partitions_of_a_two_layer_stage():
    workload = Workload(helpers.TINY_MODEL, tp=2, pp=2, mbs=2, seq=256, microbatches=4)
    assert workload.stage_layers == [2, 2]
    partitions = workload.partitions(1, "forward")
    # Segments split at each all-reduce: (attn, mlp) per layer, then the trailing bias-dropout-add.
    # NB0's partition runs NB1's collective of the previous segment, NB1's runs NB0's of this one.
    assert [_summary(p) for p in partitions] == [
        ("fwd_attn", 0, 0, None),
        ("fwd_attn", 1, 0, ("attn_all_reduce", 0, 0)),
        ("fwd_mlp", 0, 0, ("attn_all_reduce", 1, 0)),
        ("fwd_mlp", 1, 0, ("mlp_all_reduce", 0, 0)),
        ("fwd_attn", 0, 1, ("mlp_all_reduce", 1, 0)),
        ("fwd_attn", 1, 1, ("attn_all_reduce", 0, 1)),
        ("fwd_mlp", 0, 1, ("attn_all_reduce", 1, 1)),
        ("fwd_mlp", 1, 1, ("mlp_all_reduce", 0, 1)),
        ("fwd_trail", 0, 1, ("mlp_all_reduce", 1, 1)),
        ("fwd_trail", 1, 1, None),
    ]
    # The second attention segment starts with layer 0's MLP bias-dropout-add: ops carry their layer.
    assert [(o["name"], o["layer"]) for o in partitions[4]["ops"]] == [
        ("mlp_bda", 0), ("input_norm", 1), ("qkv", 1), ("rope", 1), ("attention", 1), ("out_proj", 1)]
    # One slot per memory-bound run, each linear / attention its own.
    assert [(s["name"], s["first_op"]) for s in partitions[4]["slots"]] == [
        ("norm_0", 0), ("linear_0", 2), ("rope_0", 3), ("attn_0", 4), ("linear_1", 5)]
    assert [o["kind"] for o in partitions[4]["ops"]] == [
        "elementwise", "norm", "gemm", "rope", "attention", "gemm"]
    collective = partitions[1]["collective"]
    # TP 2 all-reduce of one nanobatch's [1 x 256 x 64] bf16 activations.
    assert (collective["kind"], collective["group"], collective["group_size"], collective["bytes"]) == (
        "all_reduce", "tp", 2, 1 * 256 * 64 * 2)
    assert [p["searchable"] for p in partitions] == [False] + [True] * 7 + [False, False]


def test_backward_partitions_run_the_layers_in_reverse():
    workload = Workload(helpers.TINY_MODEL, tp=2, pp=2, mbs=2, seq=256, microbatches=4)
    partitions = workload.partitions(0, "backward")
    assert [_summary(p) for p in partitions[:6]] == [
        ("bwd_mlp", 0, 1, None),
        ("bwd_mlp", 1, 1, ("fc1_grad_all_reduce", 0, 1)),
        ("bwd_attn", 0, 1, ("fc1_grad_all_reduce", 1, 1)),
        ("bwd_attn", 1, 1, ("qkv_grad_all_reduce", 0, 1)),
        ("bwd_mlp", 0, 0, ("qkv_grad_all_reduce", 1, 1)),
        ("bwd_mlp", 1, 0, ("fc1_grad_all_reduce", 0, 0)),
    ]
    assert [(o["name"], o["layer"]) for o in partitions[4]["ops"]] == [
        ("input_norm_bwd", 1), ("mlp_bda_bwd", 0), ("fc2_bwd", 0), ("swiglu_bwd", 0), ("fc1_bwd", 0)]
    assert _summary(partitions[-2]) == ("bwd_trail", 0, 0, ("qkv_grad_all_reduce", 1, 0))
    assert workload.searchable_keys() == ["fwd_attn", "fwd_mlp", "bwd_mlp", "bwd_attn"]


def test_shapes_and_presets():
    import pytest

    from kareus import InputError

    assert load_model(helpers.TINY_MODEL) == {
        "name": "tiny-llama", "hidden": 64, "heads": 4, "kv_groups": 2, "head_dim": 16, "ffn": 128, "layers": 4,
        "vocab": 256, "qk_norm": False, "tied_embeddings": False, "mlp": "swiglu", "position_embedding": "rope",
        "max_positions": None, "norm": "rmsnorm", "norm_eps": 1e-5, "rotary_base": 10000.0, "rotary_scaling": None}
    # GPT-3: LayerNorm, and a learned table that bounds the sequence (its default 2048, not 4096).
    gpt3 = Workload("gpt3-175b", tp=8, pp=16)
    assert gpt3.model["norm"] == "layernorm" and gpt3.model["max_positions"] == 2048
    assert gpt3.parallel["seq"] == 2048 and Workload("llama3.3-70b", tp=8).parallel["seq"] == 4096
    with pytest.raises(InputError, match=r"^--seq 4096 exceeds gpt3-175b's max_positions 2048 \(learned position "
                                         r"embeddings\)$"):
        Workload("gpt3-175b", tp=8, pp=16, seq=4096)
    gpu = load_gpu("a100-40gb")
    assert gpu["sm_count"] == 108 and 1 <= gpu["default_comm_ctas"] <= 108
    workload = Workload(helpers.TINY_MODEL, tp=2, pp=2, layers_per_stage=[3, 1], recompute="none")
    assert workload.stage_layers == [3, 1] and workload.recompute == "none"
    assert workload.parallel["tp"] == 2 and workload.parallel["nanobatches"] == 2
    # Without TP there is no collective: one trail pair holds the whole stage.
    single = Workload(helpers.TINY_MODEL, tp=1, pp=1)
    assert [_summary(p) for p in single.partitions(0, "forward")] == [("fwd_trail", 0, 3, None),
                                                                       ("fwd_trail", 1, 3, None)]


def test_representative_slots_name_unknown_keys():
    import pytest

    from kareus import InputError

    workload = Workload(helpers.TINY_MODEL, tp=2, pp=2)
    assert workload.representative_slots("fwd_attn") == ["norm_0", "linear_0", "rope_0", "attn_0", "linear_1"]
    with pytest.raises(InputError, match="--partition fwd_trail: not a searchable partition"):
        workload.representative_slots("fwd_trail")

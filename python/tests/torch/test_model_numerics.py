"""A model's norm epsilon, RoPE base and Llama 3 frequency scaling reach kareus.torch's layer.

The frequencies are checked against a hand-computed case and against Megatron-Core's own Llama 3
scaling (when installed); the layer against an independent plain implementation written here
(explicit per-pair rotation, softmax attention, SwiGLU) in float64, for a model file whose values
all differ from the defaults, so each value changes the output. A plan made for other numerics is
refused by the one workload check. Single process, no collectives.
"""

from __future__ import annotations

import json
import math

import pytest

torch = pytest.importorskip("torch")

import helpers  # noqa: E402

SEQ = 16
MBS = 2
# Every value off its default; original_max_position_embeddings 16 puts the tiny model's 8
# frequencies (head_dim 16) in all three bands of the scaling.
NUMERICS = {"norm_eps": 0.25, "rotary_base": 500000.0,
            "rotary_scaling": {"type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                               "original_max_position_embeddings": 16}}


def _model_file(tmp_path, name: str, **fields) -> str:
    document = json.loads(open(helpers.TINY_MODEL).read())
    document.update(fields)
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(document))
    return str(path)


def _workload(path: str, **flags):
    from kareus._runtime import Workload

    return Workload(path, tp=1, pp=1, mbs=MBS, seq=SEQ, microbatches=1, recompute="none", **flags)


def test_llama3_scaling_matches_a_hand_computed_case():
    from kareus.torch import rope_frequencies

    # head_dim 6, base 100: f = 1, 100^(-1/3) = 0.2154435, 100^(-2/3) = 0.0464159; wavelengths
    # 2 pi / f = 6.283, 29.164, 135.37. original 64, low 1, high 4: kept below 64 / 4 = 16,
    # divided by 8 above 64 / 1 = 64, between: s = (64 / 29.16396 - 1) / (4 - 1) = 0.3981631,
    # f = (1 - s) f / 8 + s f = (0.6018369 / 8 + 0.3981631) x 0.2154435 = 0.1019894.
    scaling = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
    found = rope_frequencies(6, 100.0, scaling).tolist()
    assert found == pytest.approx([1.0, 0.1019894, 0.0464159 / 8], rel=1e-6)
    assert rope_frequencies(6, 100.0).tolist() == pytest.approx([1.0, 0.2154435, 0.0464159], rel=1e-6)


@pytest.mark.parametrize("factor", [8.0, 32.0])
def test_llama3_scaling_matches_megatron(factor):
    pytest.importorskip("megatron.core")
    from megatron.core.models.common.embeddings.rotary_pos_embedding import RotaryEmbedding

    from kareus.torch import rope_frequencies

    # Llama 3.2 3B (factor 32) and 3.3 70B (factor 8): head_dim 128, base 500000, low 1, high 4,
    # original 8192. Megatron's method reads nothing of its instance.
    plain = rope_frequencies(128, 500000.0)
    theirs = RotaryEmbedding._apply_scaling(None, plain.clone(), factor=factor, low_freq_factor=1,
                                            high_freq_factor=4, original_max_position_embeddings=8192)
    scaling = {"factor": factor, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192}
    mine = rope_frequencies(128, 500000.0, scaling)
    assert torch.allclose(mine, theirs, rtol=1e-12, atol=0)
    assert (mine < plain).sum() > 0 and (mine == plain).sum() > 0  # both bands present


def _independent_frequencies(head_dim: int, base: float, scaling):
    """RoPE's frequencies and Llama 3's scaling as its three bands, one frequency at a time."""
    result = []
    for pair in range(head_dim // 2):
        frequency = base ** (-2 * pair / head_dim)
        if scaling is None:
            result.append(frequency)
            continue
        original = scaling["original_max_position_embeddings"]
        low, high, factor = scaling["low_freq_factor"], scaling["high_freq_factor"], scaling["factor"]
        wavelength = 2 * math.pi / frequency
        if wavelength < original / high:
            result.append(frequency)
        elif wavelength > original / low:
            result.append(frequency / factor)
        else:
            smooth = (original / wavelength - low) / (high - low)
            result.append((1 - smooth) * frequency / factor + smooth * frequency)
    return torch.tensor(result, dtype=torch.float64)


def _independent_layer(layer, h, eps: float, frequencies) -> torch.Tensor:
    """One Llama layer from the shard's weights (tp 1): RMSNorm, GQA attention with each rotated
    pair (i, i + head_dim/2) turned by position x frequency, causal softmax, SwiGLU."""
    s = layer.shape
    batch, seq, _ = h.shape

    def norm(x, weight):
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * weight

    q_width, kv_width = s.heads * s.head_dim, s.kv_groups * s.head_dim
    qkv = norm(h, layer.input_norm) @ layer.w_qkv.T
    q = qkv[..., :q_width].reshape(batch, seq, s.heads, s.head_dim)
    k = qkv[..., q_width:q_width + kv_width].reshape(batch, seq, s.kv_groups, s.head_dim)
    v = qkv[..., q_width + kv_width:].reshape(batch, seq, s.kv_groups, s.head_dim)
    angle = torch.arange(seq, dtype=torch.float64)[:, None] * frequencies[None, :]  # [seq, pairs]
    turn = torch.polar(torch.ones_like(angle), angle)[None, :, None, :]

    def rotate(x):
        half = s.head_dim // 2
        z = torch.complex(x[..., :half], x[..., half:]) * turn
        return torch.cat([z.real, z.imag], dim=-1)

    q, k = rotate(q), rotate(k)
    group = s.heads // s.kv_groups
    k, v = k.repeat_interleave(group, dim=2), v.repeat_interleave(group, dim=2)
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(s.head_dim)
    scores = scores.masked_fill(torch.ones(seq, seq, dtype=torch.bool).triu(1), float("-inf"))
    context = torch.einsum("bhqk,bkhd->bqhd", scores.softmax(-1), v).reshape(batch, seq, q_width)
    h_mid = h + context @ layer.w_out.T
    gate, up = (norm(h_mid, layer.mlp_norm) @ layer.w_fc1.T).chunk(2, dim=-1)
    return h_mid + (gate * torch.sigmoid(gate) * up) @ layer.w_fc2.T


def test_the_models_numerics_reach_the_layer(tmp_path):
    from kareus import torch as kt

    set_model = _workload(_model_file(tmp_path, "set", **NUMERICS)).model
    default_model = _workload(helpers.TINY_MODEL).model
    assert set_model["norm_eps"] == 0.25 and set_model["rotary_base"] == 500000.0
    assert set_model["rotary_scaling"] == NUMERICS["rotary_scaling"] and default_model["rotary_scaling"] is None
    x = torch.randn(MBS, SEQ, 64, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    outputs = {}
    for name, model in (("set", set_model), ("default", default_model)):
        stage = kt.LlamaStage(model, [model["layers"]], 0, 1, 0, 3).double()
        layer = stage.layers[0]
        with torch.no_grad():  # norm weights of ones would hide a misplaced weight
            layer.input_norm.copy_(torch.linspace(0.5, 1.5, 64))
            layer.mlp_norm.copy_(torch.linspace(1.5, 0.5, 64))
        rope = kt.Rope(model, SEQ, torch.device("cpu"), torch.float64)
        with torch.no_grad():
            outputs[name] = kt.reference_layer(layer, rope, x, None, 1)
            frequencies = _independent_frequencies(16, model["rotary_base"], model["rotary_scaling"])
            expected = _independent_layer(layer, x, model["norm_eps"], frequencies)
        assert helpers.relative(outputs[name], expected) < 1e-12, name
    # The values change the layer's update (the same weights under the defaults differ clearly).
    assert helpers.relative(outputs["set"] - x, outputs["default"] - x) > 1e-2
    # Each value alone reaches the layer.
    for field, value in NUMERICS.items():
        one = _workload(_model_file(tmp_path, field, **{field: value})).model
        stage = kt.LlamaStage(one, [one["layers"]], 0, 1, 0, 3).double()
        with torch.no_grad():
            out = kt.reference_layer(stage.layers[0], kt.Rope(one, SEQ, torch.device("cpu"), torch.float64), x, None, 1)
        reference = kt.LlamaStage(default_model, [4], 0, 1, 0, 3).double()
        with torch.no_grad():
            plain = kt.reference_layer(reference.layers[0], kt.Rope(default_model, SEQ, torch.device("cpu"),
                                                                    torch.float64), x, None, 1)
        assert helpers.relative(out - x, plain - x) > 1e-3, field


@pytest.mark.parametrize("made_for, runs, message", [
    ({"rotary_base": 500000.0}, {"rotary_base": 1000000.0},
     "made for shape.rotary_base 500000.0, this run has shape.rotary_base 1000000.0"),
    ({}, {"rotary_base": 500000.0}, "made for shape.rotary_base 10000.0, this run has shape.rotary_base 500000.0"),
    ({"norm_eps": 1e-6}, {}, "made for shape.norm_eps 1e-06, this run has shape.norm_eps 1e-05"),
    ({"norm": "layernorm"}, {}, 'made for shape.norm "layernorm", this run has shape.norm "rmsnorm"'),
    (NUMERICS, {**NUMERICS, "rotary_scaling": {**NUMERICS["rotary_scaling"], "factor": 8.0}},
     "made for shape.rotary_scaling.factor 4.0, this run has shape.rotary_scaling.factor 8.0"),
    ({}, {"rotary_scaling": NUMERICS["rotary_scaling"]},
     'made for shape.rotary_scaling null, this run has shape.rotary_scaling {"factor": 4.0'),
    ({}, {"position_embedding": "learned", "max_positions": 64},
     'made for shape.max_positions null, this run has shape.max_positions 64'),
    ({"position_embedding": "learned", "max_positions": 64}, {"position_embedding": "learned", "max_positions": 32},
     "made for shape.max_positions 64, this run has shape.max_positions 32"),
])
def test_a_plan_for_other_numerics_is_refused_by_the_workload_check(tmp_path, made_for, runs, message):
    from kareus import InputError
    from kareus import torch as kt

    planned = _workload(_model_file(tmp_path, "planned", **made_for))
    path = helpers.write_plan(tmp_path / "plan.json", 1, 1, {}, False, json.loads(planned.to_json()))
    kt.ExecutionPlan(path, planned, 108, 16)  # its own workload passes
    job = _workload(_model_file(tmp_path, "job", **runs))
    with pytest.raises(InputError) as error:
        kt.ExecutionPlan(path, job, 108, 16)
    assert str(error.value).startswith(f"{path}: {message}")


def test_a_learned_position_model_is_refused_by_name(tmp_path):
    from kareus import torch as kt

    model = _workload(_model_file(tmp_path, "learned", position_embedding="learned", max_positions=64)).model
    assert model["position_embedding"] == "learned" and model["max_positions"] == 64
    assert kt.check_supported(model) == ("model tiny-llama: kareus.torch runs RoPE models only, found "
                                         "position_embedding learned")
    assert kt.check_supported(_workload(helpers.TINY_MODEL).model) is None


def test_a_layernorm_model_is_refused_by_name(tmp_path):
    from kareus import torch as kt

    model = _workload(_model_file(tmp_path, "layernorm", norm="layernorm")).model
    assert model["norm"] == "layernorm"
    assert kt.check_supported(model) == "model tiny-llama: kareus.torch implements RMSNorm, found norm layernorm"

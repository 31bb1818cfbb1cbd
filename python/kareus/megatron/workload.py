"""The kareus workload of a Megatron-Core GPT job, from its TransformerConfig and training sizes.

``workload(config, ...)`` reads the model shape (hidden size, heads, query groups, head size,
FFN size, layers, MLP kind, q/k norm) and the parallel settings (TP, CP, PP, the layer split,
sequence parallelism, virtual pipeline stages, activation recompute) from Megatron's
``TransformerConfig``, takes what the config does not hold
(vocabulary, tied embeddings, rotary base and scaling, sequence, microbatch size, microbatches, DP)
as arguments, and refuses what kareus does not model with a message naming the setting.
``gpt_model_rope_args(model)`` goes the other way: GPTModel's RoPE arguments for a kareus model.
``MegatronWorkload.write_model(path)`` writes the model .json that ``kareus plan --model`` takes;
``plan_flags()`` gives the rest of that command line. No torch import here.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from typing import Dict, List

from kareus import InputError

# The kareus model format's default RoPE base (GPTModel's too).
DEFAULT_ROTARY_BASE = 10000
# GPTModel(rope_scaling=True) applies Llama 3's scaling with only the factor as an argument; the
# other three are fixed in RotaryEmbedding._apply_scaling (megatron-core 0.16.1).
MEGATRON_LLAMA3_SCALING = {"low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
# Megatron's TransformerConfig.normalization -> the model JSON's "norm".
NORMS = {"RMSNorm": "rmsnorm", "LayerNorm": "layernorm"}

# Why a learned position embedding (GPT-3; Megatron's "learned_absolute") is refused.
LEARNED_POSITIONS_REFUSED = ("kareus.megatron runs RoPE models only: its op table splits Q, K and V in the rope op, "
                             "which a learned position embedding model has not")


@dataclass
class MegatronWorkload:
    """A Megatron job as kareus plans it: the model .json document and the workload flags."""

    model: Dict[str, object]
    tp: int
    cp: int
    pp: int
    dp: int
    mbs: int
    seq: int
    microbatches: int
    recompute: str  # "full" | "none"
    layers_per_stage: List[int] = field(default_factory=list)
    sequence_parallel: bool = False
    vpp: int = 1  # model chunks (virtual pipeline stages) per pipeline rank

    def write_model(self, path: str) -> str:
        """Writes the model .json (``kareus plan --model PATH``) atomically; returns the path."""
        path = str(path)
        temporary = path + ".tmp"
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump(self.model, handle, indent=2)
            handle.write("\n")
        os.replace(temporary, path)
        return path

    def plan_flags(self) -> List[str]:
        """The workload flags of ``kareus plan`` (and of examples/megatron/train_gpt.py)."""
        flags = ["--tp", self.tp, "--cp", self.cp, "--pp", self.pp, "--dp", self.dp, "--mbs", self.mbs, "--seq",
                 self.seq, "--microbatches", self.microbatches, "--recompute", self.recompute]
        if self.layers_per_stage:
            flags += ["--layers-per-stage", ",".join(map(str, self.layers_per_stage))]
        if self.sequence_parallel:
            flags.append("--sequence-parallel")
        if self.vpp > 1:
            flags += ["--vpp", self.vpp]
        return [str(flag) for flag in flags]

    def runtime_workload(self):
        """The ``kareus._runtime.Workload`` (two nanobatches) the plan must have been made for."""
        from kareus._runtime import Workload

        handle, path = tempfile.mkstemp(prefix="kareus-megatron-model-", suffix=".json")
        os.close(handle)
        try:
            self.write_model(path)
            return Workload(path, tp=self.tp, cp=self.cp, pp=self.pp, dp=self.dp, mbs=self.mbs, seq=self.seq,
                            microbatches=self.microbatches, nanobatches=2, recompute=self.recompute,
                            layers_per_stage=self.layers_per_stage, sequence_parallel=self.sequence_parallel,
                            vpp=self.vpp)
        finally:
            os.unlink(path)


def _refuse(setting: str, value, why: str) -> None:
    raise InputError(f"kareus.megatron: {setting}={value!r}: {why}")


def _mlp_kind(config) -> str:
    import torch.nn.functional as F

    activation = getattr(config, "activation_func", None)
    if config.gated_linear_unit and activation is F.silu:
        return "swiglu"
    if not config.gated_linear_unit and activation is F.gelu:
        return "gelu"
    name = getattr(activation, "__name__", activation)
    _refuse("activation_func", name, "kareus models SwiGLU (gated_linear_unit=True, F.silu) or GELU "
            "(gated_linear_unit=False, F.gelu) MLPs")
    return ""


def _recompute(config) -> str:
    granularity = config.recompute_granularity
    if granularity is None:
        return "none"
    if granularity != "full":
        _refuse("recompute_granularity", granularity, "kareus plans no activation recompute or full recompute "
                "(recompute_granularity='full')")
    return "full"


def _layer_split(config, pp: int) -> List[int]:
    """Megatron's split of the layers over the pipeline stages (first and last stage may be set,
    the rest share the remainder evenly)."""
    layers = config.num_layers
    first = getattr(config, "num_layers_in_first_pipeline_stage", None)
    last = getattr(config, "num_layers_in_last_pipeline_stage", None)
    if getattr(config, "pipeline_model_parallel_layout", None) is not None:
        _refuse("pipeline_model_parallel_layout", "set", "kareus reads the split from num_layers and "
                "num_layers_in_first/last_pipeline_stage")
    if pp == 1:
        return [layers]
    middle_stages = pp - (first is not None) - (last is not None)
    middle_layers = layers - (first or 0) - (last or 0)
    if middle_stages == 0:
        split = [first, last]
    elif middle_layers % middle_stages != 0:
        _refuse("num_layers", layers, f"does not split evenly over the {middle_stages} pipeline stages left")
    else:
        split = [middle_layers // middle_stages] * middle_stages
        if first is not None:
            split.insert(0, first)
        if last is not None:
            split.append(last)
    return split


def _virtual_stages(config) -> int:
    """Model chunks per pipeline rank: Megatron's virtual_pipeline_model_parallel_size (None: 1).
    The rules Megatron enforces on it (PP > 1, layers per stage divisible by it, microbatches
    divisible by PP) are the workload's: the C++ check names the flag."""
    vpp = getattr(config, "virtual_pipeline_model_parallel_size", None)
    return 1 if vpp is None else int(vpp)


def workload(config, *, vocab_size: int, seq_length: int, micro_batch_size: int, num_microbatches: int,
             data_parallel_size: int = 1, share_embeddings_and_output_weights: bool = False,
             rotary_base: float = DEFAULT_ROTARY_BASE, rope_scaling: bool = False, rope_scaling_factor: float = 8.0,
             name: str = "megatron-gpt", position_embedding_type: str = "rope") -> MegatronWorkload:
    """The kareus workload of a GPTModel built from ``config`` (a TransformerConfig; its norm
    epsilon goes into the model .json) with these GPTModel arguments (``vocab_size``,
    ``share_embeddings_and_output_weights``, ``rotary_base``, ``rope_scaling`` and
    ``rope_scaling_factor``: Llama 3's scaling with Megatron's fixed ``MEGATRON_LLAMA3_SCALING``,
    ``position_embedding_type``), trained on ``num_microbatches`` microbatches of
    ``micro_batch_size`` sequences of ``seq_length`` tokens per step on ``data_parallel_size``
    replicas. Raises InputError naming the first setting kareus does not model."""
    if position_embedding_type != "rope":
        _refuse("position_embedding_type", position_embedding_type, LEARNED_POSITIONS_REFUSED)
    if config.normalization not in NORMS:
        _refuse("normalization", config.normalization, "kareus models RMSNorm and LayerNorm layers")
    if getattr(config, "num_moe_experts", None):
        _refuse("num_moe_experts", config.num_moe_experts, "kareus models dense MLPs")
    if getattr(config, "multi_latent_attention", False):
        _refuse("multi_latent_attention", True, "kareus models grouped-query attention")
    if getattr(config, "expert_model_parallel_size", 1) != 1:
        _refuse("expert_model_parallel_size", config.expert_model_parallel_size, "kareus models no expert parallelism")
    for setting, value in (("vocab_size", vocab_size), ("seq_length", seq_length),
                           ("micro_batch_size", micro_batch_size), ("num_microbatches", num_microbatches),
                           ("data_parallel_size", data_parallel_size)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InputError(f"kareus.megatron: {setting} must be a positive integer, found {value!r}")
    heads = config.num_attention_heads
    kv_groups = config.num_query_groups or heads
    model = {
        "name": name,
        "hidden": config.hidden_size,
        "heads": heads,
        "kv_groups": kv_groups,
        "head_dim": config.kv_channels or config.hidden_size // heads,
        "ffn": config.ffn_hidden_size,
        "layers": config.num_layers,
        "vocab": vocab_size,
        "qk_norm": bool(config.qk_layernorm),
        "mlp": _mlp_kind(config),
        "tied_embeddings": bool(share_embeddings_and_output_weights),
        "norm": NORMS[config.normalization],
        "norm_eps": float(config.layernorm_epsilon),
        "rotary_base": float(rotary_base),
        "rotary_scaling": ({"type": "llama3", "factor": float(rope_scaling_factor), **MEGATRON_LLAMA3_SCALING}
                           if rope_scaling else None),
        "source": "kareus.megatron.workload from a Megatron-Core TransformerConfig",
    }
    pp = config.pipeline_model_parallel_size
    return MegatronWorkload(
        model=model, tp=config.tensor_model_parallel_size, cp=config.context_parallel_size, pp=pp,
        dp=data_parallel_size, mbs=micro_batch_size, seq=seq_length, microbatches=num_microbatches,
        recompute=_recompute(config), layers_per_stage=_layer_split(config, pp),
        sequence_parallel=bool(config.sequence_parallel), vpp=_virtual_stages(config))


def gpt_model_rope_args(model: dict) -> Dict[str, object]:
    """GPTModel's ``rotary_base``, ``rope_scaling`` and ``rope_scaling_factor`` for ``model`` (a
    ``kareus._runtime`` model dict); raises InputError naming the scaling field Megatron cannot
    take (only the factor of Llama 3's scaling is an argument of GPTModel), or a learned position
    embedding."""
    if model.get("position_embedding", "rope") != "rope":
        _refuse("position_embedding", model["position_embedding"], LEARNED_POSITIONS_REFUSED)
    scaling = model.get("rotary_scaling")
    args: Dict[str, object] = {"rotary_base": model["rotary_base"], "rope_scaling": scaling is not None}
    if scaling is not None:
        for field, fixed in MEGATRON_LLAMA3_SCALING.items():
            if scaling[field] != fixed:
                _refuse(f"rotary_scaling.{field}", scaling[field], f"Megatron-Core's GPTModel scales RoPE with "
                        f"{field} {fixed:g} only")
        args["rope_scaling_factor"] = scaling["factor"]
    return args

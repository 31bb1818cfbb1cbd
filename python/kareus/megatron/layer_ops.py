"""The compute ops of a Megatron-Core TransformerLayer (local spec), by the C++ op graph's names.

kareus.torch's ``StageRunner`` executes a stage as partitions of named ops (input_norm, qkv,
qkv_post: the q/k norm when qk_layernorm is on, rope, attention, out_proj, attn_bda, mlp_norm, fc1,
swiglu | gelu, fc2, mlp_bda), each reading and writing named tensors, with the TP collectives of
the op graph between them. ``MEGATRON_OPS`` gives each op over the modules and parameters of
Megatron's own layer: the norms (q/k norms included) and the core attention are Megatron's
modules, the linears are ``F.linear`` over the Column/RowParallelLinear weights (their forward
would run the blocking TP collective the plan moves to its slot), and RoPE is Megatron's
``apply_rotary_pos_emb`` with the frequencies GPTModel computed. Tensors are Megatron's
[sequence, batch, ...]; the nanobatches split the batch dimension (1).

``refuse_unsupported_layers(config)`` names the first setting these ops do not reproduce.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

import torch
import torch.nn.functional as F

from kareus import InputError
from kareus.torch.layer import OPS, OpSpec

# Megatron's activations are [sequence, batch, hidden]: nanobatches split dimension 1.
BATCH_DIM = 1


@dataclass
class LayerContext:
    """What every op of one microbatch shares: the rotary frequencies GPTModel computed, the
    attention mask it was given, the config. ``cp`` is 1 (the local spec has no context
    parallelism); StageRunner reads it."""

    config: object
    rotary_pos_emb: Optional[torch.Tensor]
    attention_mask: Optional[torch.Tensor]
    cp: int = 1


def _split_qkv(layer, qkv: torch.Tensor):
    """Splits the fused QKV output as SelfAttention does ([s, b, groups, (heads/groups + 2) x
    head_dim] per rank): queries [s, b, heads, head_dim], keys and values [s, b, groups, head_dim]."""
    attention = layer.self_attention
    groups = attention.num_query_groups_per_partition
    per_group = attention.num_attention_heads_per_partition // groups
    head_dim = attention.hidden_size_per_attention_head
    mixed = qkv.view(*qkv.shape[:-1], groups, (per_group + 2) * head_dim)
    query, key, value = torch.split(mixed, [per_group * head_dim, head_dim, head_dim], dim=3)
    return query.reshape(query.size(0), query.size(1), -1, head_dim), key, value


def _qk_norm(layer, context: LayerContext, qkv: torch.Tensor):
    """SelfAttention's q_layernorm and k_layernorm (qk_layernorm=True), where Megatron applies
    them: on the split heads, before RoPE. The result is fused again in the QKV layout, so the
    rope op reads the same tensor with or without this op (as in kareus.torch)."""
    attention = layer.self_attention
    query, key, value = _split_qkv(layer, qkv)
    query, key = attention.q_layernorm(query), attention.k_layernorm(key)
    query = query.reshape(*key.shape[:3], -1)
    return (torch.cat([query, key, value], dim=3).flatten(2),)


def _rope(layer, context: LayerContext, qkv: torch.Tensor):
    """Splits the fused QKV output and rotates the queries and keys."""
    query, key, value = _split_qkv(layer, qkv)
    if context.rotary_pos_emb is not None:
        from megatron.core.models.common.embeddings.rope_utils import apply_rotary_pos_emb

        query = apply_rotary_pos_emb(query, context.rotary_pos_emb, config=context.config)
        key = apply_rotary_pos_emb(key, context.rotary_pos_emb, config=context.config)
    return query, key, value


def _attention(layer, context: LayerContext, query, key, value):
    attention = layer.self_attention
    return (attention.core_attention(query, key, value, context.attention_mask,
                                     attn_mask_type=attention.attn_mask_type),)


def _activation(layer, context: LayerContext, fc1: torch.Tensor):
    """Megatron's MLP activation: gated (act(first half) x second half) or plain."""
    activation = layer.config.activation_func
    if layer.config.gated_linear_unit:
        gate, up = torch.chunk(fc1, 2, dim=-1)
        return (activation(gate) * up,)
    return (activation(fc1),)


def _linear(weight_path: str):
    def run(layer, context, x):
        return (F.linear(x, layer.get_parameter(weight_path)),)

    return run


def _spec(name: str, fn, params=()) -> OpSpec:
    """``name``'s op with kareus.torch's tensor names (the collectives read them) over ``fn``."""
    base = OPS["swiglu" if name == "gelu" else name]
    return replace(base, params=tuple(params), fn=fn)


MEGATRON_OPS = {
    "input_norm": _spec("input_norm", lambda layer, c, h: (layer.input_layernorm(h),), ("input_layernorm.weight",)),
    "qkv": _spec("qkv", _linear("self_attention.linear_qkv.weight"), ("self_attention.linear_qkv.weight",)),
    "qkv_post": _spec("qkv_post", _qk_norm, ("self_attention.q_layernorm.weight",
                                             "self_attention.k_layernorm.weight")),
    "rope": _spec("rope", _rope),
    "attention": _spec("attention", _attention),
    "out_proj": _spec("out_proj", _linear("self_attention.linear_proj.weight"), ("self_attention.linear_proj.weight",)),
    "attn_bda": _spec("attn_bda", lambda layer, c, h, a: (h + a,)),
    "mlp_norm": _spec("mlp_norm", lambda layer, c, h: (layer.pre_mlp_layernorm(h),), ("pre_mlp_layernorm.weight",)),
    "fc1": _spec("fc1", _linear("mlp.linear_fc1.weight"), ("mlp.linear_fc1.weight",)),
    "swiglu": _spec("swiglu", _activation),
    "gelu": _spec("gelu", _activation),
    "fc2": _spec("fc2", _linear("mlp.linear_fc2.weight"), ("mlp.linear_fc2.weight",)),
    "mlp_bda": _spec("mlp_bda", lambda layer, c, h, m: (h + m,)),
}


# The ops whose modules are norms, by their parameters' module paths.
_NORM_MODULES = {"input_norm": ("input_layernorm",), "mlp_norm": ("pre_mlp_layernorm",),
                 "qkv_post": ("self_attention.q_layernorm", "self_attention.k_layernorm")}


def megatron_ops(config) -> dict:
    """``MEGATRON_OPS`` for layers built from ``config``: with ``normalization="LayerNorm"`` each
    norm op also takes its module's bias, so that the bias gets its gradient per nanobatch."""
    if config.normalization != "LayerNorm":
        return MEGATRON_OPS
    ops = dict(MEGATRON_OPS)
    for name, modules in _NORM_MODULES.items():
        ops[name] = replace(ops[name], params=tuple(f"{m}.{p}" for m in modules for p in ("weight", "bias")))
    return ops


def refuse_unsupported_layers(config) -> None:
    """Raises InputError naming the first TransformerConfig setting under which ``MEGATRON_OPS``
    would not compute what Megatron's local-spec layer computes, or whose collectives the plan
    does not describe."""
    checks = [
        ("tp_comm_overlap", False, "Megatron's own TP comm overlap must be off: kareus launches the layers' TP "
         "collectives at the plan's slots"),
        ("context_parallel_size", 1, "Megatron-Core runs context parallelism only in TransformerEngine's attention "
         "(the local spec's DotProductAttention refuses it)"),
        ("add_bias_linear", False, "kareus models linear layers without bias"),
        ("add_qkv_bias", False, "kareus models linear layers without bias"),
        ("hidden_dropout", 0.0, "dropout draws per nanobatch would differ from the stock model's draws"),
        ("attention_dropout", 0.0, "dropout draws per nanobatch would differ from the stock model's draws"),
        ("rotary_interleaved", False, "kareus models rotate-half RoPE"),
        ("apply_rope_fusion", False, "the fused RoPE kernel needs TransformerEngine"),
        ("attention_output_gate", False, "gated attention output is not in the kareus op graph"),
        ("fp8", None, "kareus.megatron runs the local spec's bf16/fp16/fp32 layers"),
        ("fp4", None, "kareus.megatron runs the local spec's bf16/fp16/fp32 layers"),
    ]
    for name, wanted, why in checks:
        value = getattr(config, name, wanted)
        if value != wanted and not (wanted is None and not value):
            raise InputError(f"kareus.megatron: {name}={value!r} is not supported: {why}")
    if getattr(config, "recompute_granularity", None) == "full" and config.recompute_method not in ("uniform", "block"):
        raise InputError(f"kareus.megatron: recompute_method={config.recompute_method!r}: expected uniform or block")


def wrapper_chain(model):
    """``model``, then each module Megatron's wrappers (DistributedDataParallel, Float16Module)
    hold in ``.module``, outermost first; a cycle of ``.module`` ends after 8 levels (Megatron
    nests two)."""
    module = model
    for _ in range(8):
        yield module
        module = getattr(module, "module", None)
        if module is None:
            return


def unwrap(model, attribute: str):
    """The outermost module of ``wrapper_chain(model)`` that has ``attribute``, else the innermost."""
    for module in wrapper_chain(model):
        if hasattr(module, attribute):
            return module
    return module


def refuse_unsupported_wrapping(chunk) -> None:
    """Raises InputError where ``chunk``'s Megatron wrappers need a forward kareus does not run:
    the distributed optimizer's ``overlap_param_gather`` waits for each bucket's parameter
    all-gather in forward pre-hooks of the modules that own the weights, and kareus's partitions
    read the weights through ``F.linear`` without calling those modules, so a layer could read
    weights before their gather completes."""
    for module in wrapper_chain(chunk):
        ddp = getattr(module, "ddp_config", None)
        if ddp is not None and getattr(ddp, "use_distributed_optimizer", False) \
                and getattr(ddp, "overlap_param_gather", False):
            raise InputError("kareus.megatron: overlap_param_gather=True with use_distributed_optimizer=True is not "
                             "supported: its forward pre-hooks, which wait for each bucket's parameter all-gather, "
                             "belong to modules kareus's partitions do not call, so a layer could read weights "
                             "before their gather completes; set DistributedDataParallelConfig("
                             "overlap_param_gather=False)")

"""A tensor-parallel Llama layer: parameters, its compute ops by the C++ op names, and the plain
(unsplit) reference.

The numerics come from the model (its JSON, through ``kareus._runtime``): the RMSNorm epsilon
``norm_eps`` (also the q/k norms'), the RoPE base ``rotary_base`` and Llama 3's frequency scaling
``rotary_scaling`` (``rope_frequencies``), so a plan's model and the layers it runs agree.

The C++ op graph (src/workload/op_graph.cpp) names a layer's forward compute ops input_norm, qkv,
(qkv_post: q/k RMSNorm, for models with qk_norm) rope, attention, out_proj, attn_bda, mlp_norm, fc1, swiglu, fc2, mlp_bda (backward: the same
with "_bwd", in reverse) and its collectives attn_all_reduce, mlp_all_reduce (forward,
row-parallel outputs) and fc1_grad_all_reduce, qkv_grad_all_reduce (backward, input gradients of
the column-parallel linears). ``OPS`` maps each forward op name to the named tensors it reads and
writes, so the engine can run any contiguous run of ops of one nanobatch, and the backward of
each op through a small per-op autograd graph. Shapes: [batch, seq, features]; fp32 on CPU.

Context parallelism (cp > 1) shards the sequence as Megatron does for causal attention: split
into 2 x cp chunks, rank r holds chunks r and 2cp-1-r (so every rank has the same attention
work). Each rank's keys and values are all-gathered over the CP group (kv_all_gather) before
attention, and their gradients reduce-scattered back (dkv_reduce_scatter); the backward
re-gathers them (kv_regather) instead of keeping the gathered copy, as the C++ op graph models.

Sequence parallelism (Megatron's, ``sequence_parallel``) keeps the residual stream, the norms and
the residual adds on 1/tp of the tokens: TP rank t holds the t-th contiguous slice of the
sequence (of its CP shard). Each column-parallel linear's input is all-gathered over TP first
(attn_all_gather, mlp_all_gather) and each row-parallel output reduce-scattered after
(attn_reduce_scatter, mlp_reduce_scatter); in backward the output gradients are all-gathered
(attn_grad_all_gather, mlp_grad_all_gather), the linear's input is re-gathered for its weight
gradient (qkv_input_all_gather, fc1_input_all_gather: the forward keeps only this rank's slice)
and its input gradient reduce-scattered (qkv_grad_reduce_scatter, fc1_grad_reduce_scatter).
``sequence_parallel_ops`` renames the tensors of an op table so that these collectives sit between
the ops; the norm weights then see only this rank's tokens, and ``tp_reduce_norm_grads`` sums
their gradients over TP (Megatron's finalize step for sequence-parallel norms).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.distributed as dist
import torch.nn.functional as F


@dataclass(frozen=True)
class LayerShape:
    """One layer's shape on one TP rank."""

    hidden: int
    heads: int
    kv_groups: int
    head_dim: int
    ffn: int
    tp: int
    norm_eps: float  # RMSNorm epsilon (the model's norm_eps)
    qk_norm: bool = False

    @classmethod
    def of_model(cls, model: dict, tp: int) -> "LayerShape":
        """The shape of ``model`` (a ``kareus._runtime`` model dict) on one of ``tp`` ranks."""
        return cls(model["hidden"], model["heads"], model["kv_groups"], model["head_dim"], model["ffn"], tp,
                   float(model["norm_eps"]), bool(model.get("qk_norm")))

    @property
    def heads_local(self) -> int:
        return self.heads // self.tp

    @property
    def kv_local(self) -> int:
        return self.kv_groups // self.tp

    @property
    def ffn_local(self) -> int:
        return self.ffn // self.tp


class LayerShard(torch.nn.Module):
    """The parameters of one layer on one TP rank: QKV and FC1 column-parallel (rows of this
    rank's heads / MLP columns), out-proj and FC2 row-parallel, norms replicated. The q/k norms
    (per head_dim, shared by all heads) see only this rank's heads, so their gradients are partial
    sums: ``tp_reduce_norm_grads`` adds them up across the TP group before the optimizer steps.

    The full weights are drawn from ``generator`` (the same on every rank) and sliced, so every
    TP degree and stage split starts from the same model.
    """

    def __init__(self, shape: LayerShape, tp_rank: int, generator: torch.Generator, std: float = 0.02) -> None:
        super().__init__()
        self.shape = shape
        s = shape

        def full(rows: int, cols: int) -> torch.Tensor:
            return torch.randn(rows, cols, generator=generator) * std

        wq, wk, wv = full(s.heads * s.head_dim, s.hidden), full(s.kv_groups * s.head_dim, s.hidden), full(
            s.kv_groups * s.head_dim, s.hidden
        )
        wo = full(s.hidden, s.heads * s.head_dim)
        gate, up, down = full(s.ffn, s.hidden), full(s.ffn, s.hidden), full(s.hidden, s.ffn)
        q_rows = slice(tp_rank * s.heads_local * s.head_dim, (tp_rank + 1) * s.heads_local * s.head_dim)
        kv_rows = slice(tp_rank * s.kv_local * s.head_dim, (tp_rank + 1) * s.kv_local * s.head_dim)
        ffn_rows = slice(tp_rank * s.ffn_local, (tp_rank + 1) * s.ffn_local)
        self.input_norm = torch.nn.Parameter(torch.ones(s.hidden))
        self.w_qkv = torch.nn.Parameter(torch.cat([wq[q_rows], wk[kv_rows], wv[kv_rows]]).contiguous())
        self.w_out = torch.nn.Parameter(wo[:, q_rows].contiguous())
        self.mlp_norm = torch.nn.Parameter(torch.ones(s.hidden))
        self.w_fc1 = torch.nn.Parameter(torch.cat([gate[ffn_rows], up[ffn_rows]]).contiguous())
        self.w_fc2 = torch.nn.Parameter(down[:, ffn_rows].contiguous())
        if s.qk_norm:
            self.q_norm = torch.nn.Parameter(torch.ones(s.head_dim))
            self.k_norm = torch.nn.Parameter(torch.ones(s.head_dim))


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rope_frequencies(head_dim: int, base: float, scaling: Optional[dict] = None) -> torch.Tensor:
    """RoPE's inverse frequencies (radians per token) of the head_dim / 2 rotated pairs, float64:
    base^(-2i / head_dim), then, with ``scaling`` (the model's ``rotary_scaling``: Llama 3's), each
    frequency whose wavelength 2 pi / f exceeds original_max_position_embeddings / low_freq_factor
    divided by ``factor``, each below original_max_position_embeddings / high_freq_factor kept,
    and those between blended: (1 - s) f / factor + s f with s = (original / wavelength -
    low_freq_factor) / (high_freq_factor - low_freq_factor), which is 0 and 1 at the two bounds."""
    inverse = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    if scaling is None:
        return inverse
    low, high = scaling["low_freq_factor"], scaling["high_freq_factor"]
    wavelength = 2 * math.pi / inverse
    # s clamped to [0, 1] is the three bands at once: 0 scales fully, 1 keeps, between blends.
    kept = ((scaling["original_max_position_embeddings"] / wavelength - low) / (high - low)).clamp(0.0, 1.0)
    return (1 - kept) * inverse / scaling["factor"] + kept * inverse


def cp_positions(seq: int, cp: int, cp_rank: int) -> torch.Tensor:
    """The sequence positions CP rank ``cp_rank`` holds, in its local order: chunks cp_rank and
    2cp-1-cp_rank of 2 x cp (all of them when cp is 1)."""
    if cp == 1:
        return torch.arange(seq)
    chunk = seq // (2 * cp)
    first, second = cp_rank * chunk, (2 * cp - 1 - cp_rank) * chunk
    return torch.cat([torch.arange(first, first + chunk), torch.arange(second, second + chunk)])


def shard_sequence(x: torch.Tensor, cp: int, cp_rank: int) -> torch.Tensor:
    """This CP rank's part of ``x`` [batch, seq, ...] (``x`` itself when cp is 1)."""
    return x if cp == 1 else x[:, cp_positions(x.shape[1], cp, cp_rank)].contiguous()


class Rope:
    """Rotary tables (rotate-half form) of ``model`` (a ``kareus._runtime`` model dict: head_dim,
    rotary_base, rotary_scaling) and the causal mask of one CP rank's sequence shard, per device.
    With cp > 1 ``mask`` [local, seq] says which of the gathered keys (CP ranks' shards in rank
    order) each local query sees; None when cp is 1 (plain causal attention)."""

    def __init__(self, model: dict, seq: int, device: torch.device, dtype: torch.dtype, cp: int = 1,
                 cp_rank: int = 0) -> None:
        inv = rope_frequencies(model["head_dim"], model["rotary_base"], model.get("rotary_scaling"))
        positions = cp_positions(seq, cp, cp_rank)
        angles = torch.outer(positions.to(torch.float64), inv)
        angles = torch.cat([angles, angles], dim=-1)
        self.cp = cp
        self.cos = angles.cos().to(device=device, dtype=dtype)[None, :, None, :]
        self.sin = angles.sin().to(device=device, dtype=dtype)[None, :, None, :]
        self.mask = None
        if cp > 1:
            keys = torch.cat([cp_positions(seq, cp, r) for r in range(cp)])
            self.mask = (positions[:, None] >= keys[None, :]).to(device)

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * self.cos + rotated * self.sin


# Compute ops: name -> (inputs, outputs, parameter names, function(layer, rope, *inputs) -> outputs).
# Tensor names are per layer; ("h", 1) in outputs means the next layer's "h" (mlp_bda's result
# is the next layer's input).
OpFn = Callable[..., Tuple[torch.Tensor, ...]]


@dataclass(frozen=True)
class OpSpec:
    inputs: Tuple[str, ...]
    outputs: Tuple[Tuple[str, int], ...]
    params: Tuple[str, ...]
    fn: OpFn
    # A bias-free linear of its one input by its one parameter (F.linear(x, weight)): with its
    # input re-gathered in backward (sequence parallelism) the engine computes its two gradients
    # directly (grad @ weight, grad^T @ input) instead of rebuilding its graph.
    linear: bool = False


def _heads(layer: LayerShard, qkv: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Q, K and V of this rank's heads, [batch, seq, heads, head_dim] each."""
    s = layer.shape
    batch, seq, _ = qkv.shape
    q_width, kv_width = s.heads_local * s.head_dim, s.kv_local * s.head_dim
    q, k, v = qkv.split([q_width, kv_width, kv_width], dim=-1)
    return (q.reshape(batch, seq, s.heads_local, s.head_dim), k.reshape(batch, seq, s.kv_local, s.head_dim),
            v.reshape(batch, seq, s.kv_local, s.head_dim))


def _rope_op(layer: LayerShard, rope: Rope, qkv: torch.Tensor) -> Tuple[torch.Tensor, ...]:
    q, k, v = _heads(layer, qkv)
    return rope.apply(q), rope.apply(k), v


def _qk_norm_op(layer: LayerShard, rope: Rope, qkv: torch.Tensor) -> Tuple[torch.Tensor, ...]:
    """RMSNorm of each query and key head over head_dim (Qwen3's q_norm / k_norm); V untouched."""
    q, k, v = _heads(layer, qkv)
    eps = layer.shape.norm_eps
    q, k = rms_norm(q, layer.q_norm, eps), rms_norm(k, layer.k_norm, eps)
    return (torch.cat([q.flatten(2), k.flatten(2), v.flatten(2)], dim=-1),)


def _attention_op(layer: LayerShard, rope: Rope, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    s = layer.shape
    batch, seq = q.shape[0], q.shape[1]
    group = s.heads_local // s.kv_local
    q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    if group > 1:
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
    if rope.mask is None:
        context = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    else:
        context = F.scaled_dot_product_attention(q, k, v, attn_mask=rope.mask)
    return (context.transpose(1, 2).reshape(batch, seq, s.heads_local * s.head_dim),)


def _rms_norm_op(weight: str) -> OpFn:
    """The op of the layer's RMSNorm whose weight is ``weight``, at the model's epsilon."""
    return lambda layer, rope, h: (rms_norm(h, getattr(layer, weight), layer.shape.norm_eps),)


def _swiglu_op(layer: LayerShard, rope: Rope, fc1: torch.Tensor):
    gate, up = fc1.chunk(2, dim=-1)
    return (F.silu(gate) * up,)


OPS: Dict[str, OpSpec] = {
    "input_norm": OpSpec(("h",), (("normed", 0),), ("input_norm",), _rms_norm_op("input_norm")),
    "qkv": OpSpec(("normed",), (("qkv", 0),), ("w_qkv",), lambda l, r, x: (F.linear(x, l.w_qkv),), linear=True),
    # Reads and rewrites "qkv", so rope reads the same name with or without it. The engine runs
    # backwards in reverse order, so the gradient of the normed qkv (rope's) is consumed here and
    # replaced by that of the raw one before qkv's backward reads it.
    "qkv_post": OpSpec(("qkv",), (("qkv", 0),), ("q_norm", "k_norm"), _qk_norm_op),
    "rope": OpSpec(("qkv",), (("q", 0), ("k", 0), ("v", 0)), (), _rope_op),
    "attention": OpSpec(("q", "k", "v"), (("context", 0),), (), _attention_op),
    "out_proj": OpSpec(("context",), (("attn_out", 0),), ("w_out",), lambda l, r, x: (F.linear(x, l.w_out),),
                       linear=True),
    "attn_bda": OpSpec(("h", "attn_out"), (("h_mid", 0),), (), lambda l, r, h, a: (h + a,)),
    "mlp_norm": OpSpec(("h_mid",), (("normed2", 0),), ("mlp_norm",), _rms_norm_op("mlp_norm")),
    "fc1": OpSpec(("normed2",), (("fc1", 0),), ("w_fc1",), lambda l, r, x: (F.linear(x, l.w_fc1),), linear=True),
    "swiglu": OpSpec(("fc1",), (("act", 0),), (), _swiglu_op),
    "fc2": OpSpec(("act",), (("mlp_out", 0),), ("w_fc2",), lambda l, r, x: (F.linear(x, l.w_fc2),), linear=True),
    "mlp_bda": OpSpec(("h_mid", "mlp_out"), (("h", 1),), (), lambda l, r, h, m: (h + m,)),
}


def _rope_cp_op(layer: LayerShard, rope: Rope, qkv: torch.Tensor) -> Tuple[torch.Tensor, ...]:
    q, k, v = _rope_op(layer, rope, qkv)
    return q, torch.stack([k, v])


# With cp > 1 rope stacks this rank's K and V ("kv", [2, batch, seq, kv heads, head_dim]) for
# kv_all_gather, and attention reads every rank's ("kv_all").
CP_OPS: Dict[str, OpSpec] = dict(
    OPS,
    rope=OpSpec(("qkv",), (("q", 0), ("kv", 0)), (), _rope_cp_op),
    attention=OpSpec(("q", "kv_all"), (("context", 0),), (), lambda l, r, q, kv: _attention_op(l, r, q, *kv)),
)


def sequence_parallel_ops(ops: Dict[str, OpSpec]) -> Dict[str, OpSpec]:
    """``ops`` (OPS, CP_OPS or another model's table under the same names) with sequence
    parallelism's tensors: QKV and FC1 read the all-gathered inputs (normed_all, normed2_all),
    out-proj and FC2 write partial sums over the whole sequence (attn_partial, mlp_partial) that
    the reduce-scatters turn into this rank's slice (attn_out, mlp_out)."""
    renamed = dict(ops)
    renamed["qkv"] = replace(ops["qkv"], inputs=("normed_all",))
    renamed["fc1"] = replace(ops["fc1"], inputs=("normed2_all",))
    renamed["out_proj"] = replace(ops["out_proj"], outputs=(("attn_partial", 0),))
    renamed["fc2"] = replace(ops["fc2"], outputs=(("mlp_partial", 0),))
    return renamed


@dataclass(frozen=True)
class CollectiveSpec:
    """What a collective of the op graph does: kind ("all_reduce" in place, "all_gather" or
    "reduce_scatter" along the sequence, or "regather": an all-gather in the backward of a tensor
    the forward produced, ``source`` of the forward's graphs, into the graph of the op that reads
    ``target``), its group ("tp" or "cp"), the tensor it reads and the one it writes (activations
    in a forward pass, gradients in a backward one), and ``stacked`` when the tensor has a leading
    dimension before [batch, seq, ...] (K and V stacked)."""

    kind: str
    group: str
    source: str
    target: str
    stacked: bool = False


COLLECTIVES: Dict[str, CollectiveSpec] = {
    "attn_all_reduce": CollectiveSpec("all_reduce", "tp", "attn_out", "attn_out"),
    "mlp_all_reduce": CollectiveSpec("all_reduce", "tp", "mlp_out", "mlp_out"),
    "fc1_grad_all_reduce": CollectiveSpec("all_reduce", "tp", "normed2", "normed2"),
    "qkv_grad_all_reduce": CollectiveSpec("all_reduce", "tp", "normed", "normed"),
    # K and V of this rank ("kv": rope's k and v stacked) -> every rank's, and their gradients back.
    "kv_all_gather": CollectiveSpec("all_gather", "cp", "kv", "kv_all", stacked=True),
    "kv_regather": CollectiveSpec("regather", "cp", "kv", "kv_all", stacked=True),
    "dkv_reduce_scatter": CollectiveSpec("reduce_scatter", "cp", "kv_all", "kv", stacked=True),
    # Sequence parallelism (sequence_parallel_ops' names), forward: this rank's slice of the
    # normed sequence -> the whole sequence; the row-parallel partial sums -> this rank's slice.
    "attn_all_gather": CollectiveSpec("all_gather", "tp", "normed", "normed_all"),
    "attn_reduce_scatter": CollectiveSpec("reduce_scatter", "tp", "attn_partial", "attn_out"),
    "mlp_all_gather": CollectiveSpec("all_gather", "tp", "normed2", "normed2_all"),
    "mlp_reduce_scatter": CollectiveSpec("reduce_scatter", "tp", "mlp_partial", "mlp_out"),
    # ... backward: the output gradients gathered, the inputs re-gathered for the weight
    # gradients, the input gradients scattered back to their slices.
    "mlp_grad_all_gather": CollectiveSpec("all_gather", "tp", "mlp_out", "mlp_partial"),
    "fc1_input_all_gather": CollectiveSpec("regather", "tp", "normed2", "normed2_all"),
    "fc1_grad_reduce_scatter": CollectiveSpec("reduce_scatter", "tp", "normed2_all", "normed2"),
    "attn_grad_all_gather": CollectiveSpec("all_gather", "tp", "attn_out", "attn_partial"),
    "qkv_input_all_gather": CollectiveSpec("regather", "tp", "normed", "normed_all"),
    "qkv_grad_reduce_scatter": CollectiveSpec("reduce_scatter", "tp", "normed_all", "normed"),
}

# The tensors a "regather" collective brings back in the backward: the forward keeps no graph of
# the ops that read them (their backward takes the re-gathered copy).
REGATHERED = frozenset(spec.target for spec in COLLECTIVES.values() if spec.kind == "regather")

# Dimension of the sequence in the stacked K and V [2, batch, seq, heads, head_dim].
KV_SEQ_DIM = 2
# ... and in the layer's activations [batch, seq, features].
SEQ_DIM = 1


class _ReduceForward(torch.autograd.Function):
    """Row-parallel output: all-reduce in forward, identity in backward."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group) -> torch.Tensor:
        x = x.clone()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return grad, None


class _ReduceBackward(torch.autograd.Function):
    """Column-parallel input: identity in forward, all-reduce of the gradient in backward."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group) -> torch.Tensor:
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        grad = grad.clone()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


def tp_reduce_forward(x: torch.Tensor, group) -> torch.Tensor:
    """A row-parallel output summed over the TP group (the gradient passes through)."""
    return _ReduceForward.apply(x, group)


def tp_reduce_backward(x: torch.Tensor, group) -> torch.Tensor:
    """A column-parallel input: unchanged forward, its gradient summed over the TP group."""
    return _ReduceBackward.apply(x, group)


def all_gather_along(x: torch.Tensor, group, dim: int) -> torch.Tensor:
    """Every rank's ``x`` of ``group``, concatenated along ``dim`` in rank order (blocking)."""
    parts = [torch.empty_like(x) for _ in range(dist.get_world_size(group))]
    dist.all_gather(parts, x.contiguous(), group=group)
    return torch.cat(parts, dim=dim)


def reduce_scatter_along(x: torch.Tensor, group, dim: int) -> torch.Tensor:
    """This rank's slice along ``dim`` of the sum of every rank's ``x`` (blocking). NCCL runs a
    reduce-scatter; gloo has none, so there (CPU only) it is an all-reduce and a slice, the same
    numbers."""
    size, rank = dist.get_world_size(group), dist.get_rank(group)
    part = x.shape[dim] // size
    if dist.get_backend(group) == "nccl":
        inputs = [chunk.contiguous() for chunk in x.split(part, dim=dim)]
        output = torch.empty_like(inputs[rank])
        dist.reduce_scatter(output, inputs, group=group)
        return output
    total = x.contiguous().clone()
    dist.all_reduce(total, group=group)
    return total.narrow(dim, rank * part, part).contiguous()


class _SequenceCollective(torch.autograd.Function):
    """All-gather (``gather`` true) or reduce-scatter along ``dim`` over ``group`` in forward; in
    backward the other one, its adjoint: the gradient of a gather is this rank's part of every
    rank's gradient summed, and that of a reduce-scatter (a row-parallel output under sequence
    parallelism) the gathered gradient."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group, dim: int, gather: bool) -> torch.Tensor:
        ctx.group, ctx.dim, ctx.gather = group, dim, gather
        return (all_gather_along if gather else reduce_scatter_along)(x, group, dim)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        adjoint = reduce_scatter_along if ctx.gather else all_gather_along
        return adjoint(grad, ctx.group, ctx.dim), None, None, None


def gather_sequence(x: torch.Tensor, group, dim: int = SEQ_DIM) -> torch.Tensor:
    """The whole sequence from every rank's slice (its gradient reduce-scattered back)."""
    return _SequenceCollective.apply(x, group, dim, True)


def scatter_sequence(x: torch.Tensor, group, dim: int = SEQ_DIM) -> torch.Tensor:
    """This rank's slice of the sum over ranks (its gradient all-gathered)."""
    return _SequenceCollective.apply(x, group, dim, False)


def reference_layer(layer: LayerShard, rope: Rope, h: torch.Tensor, group, tp: int, cp_group=None,
                    sequence_parallel: bool = False) -> torch.Tensor:
    """The plain layer: whole microbatch, ordinary autograd, blocking collectives on ``group``
    (TP) and, with cp > 1, ``cp_group``. With ``sequence_parallel`` ``h`` is this TP rank's slice
    of the sequence and so is the result: the linears' inputs are all-gathered and their outputs
    reduce-scattered instead of all-reduced."""

    def reduce_forward(x: torch.Tensor) -> torch.Tensor:
        if sequence_parallel:
            return scatter_sequence(x, group)
        return tp_reduce_forward(x, group) if tp > 1 else x

    def reduce_backward(x: torch.Tensor) -> torch.Tensor:
        if sequence_parallel:
            return gather_sequence(x, group)
        return tp_reduce_backward(x, group) if tp > 1 else x

    eps = layer.shape.norm_eps
    normed = reduce_backward(rms_norm(h, layer.input_norm, eps))
    qkv = F.linear(normed, layer.w_qkv)
    if layer.shape.qk_norm:
        (qkv,) = _qk_norm_op(layer, rope, qkv)
    q, k, v = _rope_op(layer, rope, qkv)
    if rope.cp > 1:
        k, v = _SequenceCollective.apply(torch.stack([k, v]), cp_group, KV_SEQ_DIM, True)
    (context,) = _attention_op(layer, rope, q, k, v)
    h_mid = h + reduce_forward(F.linear(context, layer.w_out))
    normed2 = reduce_backward(rms_norm(h_mid, layer.mlp_norm, eps))
    (act,) = _swiglu_op(layer, rope, F.linear(normed2, layer.w_fc1))
    return h_mid + reduce_forward(F.linear(act, layer.w_fc2))


def reference_stack(layers: Sequence[LayerShard], rope: Rope, h: torch.Tensor, group, tp: int,
                    cp_group=None, sequence_parallel: bool = False) -> torch.Tensor:
    for layer in layers:
        h = reference_layer(layer, rope, h, group, tp, cp_group, sequence_parallel)
    return h


def check_supported(model: dict, cp: int = 1, seq: int = 0, tp: int = 1) -> Optional[str]:
    """Why this engine cannot run the model (with ``cp`` ranks over a ``seq``-token sequence and
    ``tp`` ranks), or None."""
    if model.get("position_embedding", "rope") != "rope":
        return (f"model {model['name']}: kareus.torch runs RoPE models only, found position_embedding "
                f"{model['position_embedding']}")
    if model.get("norm", "rmsnorm") != "rmsnorm":
        return f"model {model['name']}: kareus.torch implements RMSNorm, found norm {model['norm']}"
    if model.get("mlp") != "swiglu":
        return f"model {model['name']}: kareus.torch runs SwiGLU MLPs only, found {model.get('mlp')}"
    if model["vocab"] % tp != 0:
        return f"model {model['name']}: vocab {model['vocab']} does not split over --tp {tp} (vocab-parallel embedding)"
    if cp > 1 and seq % (2 * cp) != 0:
        return f"--seq {seq}: context parallelism splits the sequence into 2 x --cp = {2 * cp} equal chunks"
    return None


def tp_reduce_norm_grads(layers: Sequence[LayerShard], group, tp: int, sequence_parallel: bool = False,
                         extra: Sequence[torch.nn.Parameter] = ()) -> None:
    """Sums the q/k norm gradients over the TP group (each rank's covers only its heads) and, with
    sequence parallelism, the input and MLP norms' and the ``extra`` ones (the final norm: each
    rank's covers only its tokens)."""
    if tp == 1:
        return
    params: List[torch.nn.Parameter] = []
    for layer in layers:
        if layer.shape.qk_norm:
            params += [layer.q_norm, layer.k_norm]
        if sequence_parallel:
            params += [layer.input_norm, layer.mlp_norm]
    if sequence_parallel:
        params += list(extra)
    for param in params:
        if param.grad is not None:
            dist.all_reduce(param.grad, group=group)


def param_list(layer: torch.nn.Module, names: Sequence[str]) -> List[torch.nn.Parameter]:
    """The parameters of ``layer`` by (dotted) name."""
    return [layer.get_parameter(name) for name in names]

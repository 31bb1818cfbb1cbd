"""One pipeline stage of a Llama-shaped model on one TP rank.

Layers are ``LayerShard``s; the nonpartition work (docs/kareus.md section 2): the token embedding
on the first stage, the final RMSNorm, output layer and cross-entropy on the last, vocab-parallel
over the TP ranks (each CP rank runs it on its own tokens). Every rank draws every layer's full
weights from one seed, so any TP degree or stage split starts from the same model (and the
reference run from the same one).

A model with ``tied_embeddings`` has one table: the output layer multiplies by the embedding
weight. With one stage that is one parameter; with several, the first stage holds the table
and the last stage an equal copy (drawn the same), and ``PipelineDriver`` sums the two copies'
gradients over the embedding group (``make_embedding_group``) before every optimizer step, so
they stay equal, as Megatron does. A stage's state dict holds the table once, as ``embedding``.

With ``sequence_parallel`` the stage's activations are this TP rank's slice of the sequence: the
embedding's lookups are reduce-scattered over the sequence instead of all-reduced, the final norm
runs on the slice, and the output layer's input is all-gathered (its gradient reduce-scattered),
as Megatron-Core does; the final norm's gradient then covers this rank's tokens only and
``PipelineDriver`` sums it over TP (``tp_reduce_norm_grads``).
"""

from __future__ import annotations

from typing import List

import torch
import torch.distributed as dist
import torch.nn.functional as F

from kareus.torch.layer import (
    LayerShape,
    LayerShard,
    gather_sequence,
    rms_norm,
    scatter_sequence,
    tp_reduce_backward,
    tp_reduce_forward,
)


class LlamaStage(torch.nn.Module):
    def __init__(
        self, model: dict, stage_layers: List[int], stage: int, tp: int, tp_rank: int, seed: int,
        sequence_parallel: bool = False,
    ) -> None:
        super().__init__()
        if sequence_parallel and tp < 2:
            raise ValueError(f"LlamaStage: sequence parallelism needs tp >= 2, found tp {tp}")
        self.sequence_parallel = sequence_parallel
        self.stage = stage
        self.first = stage == 0
        self.last = stage == len(stage_layers) - 1
        shape = LayerShape.of_model(model, tp)
        self.shape = shape
        self.model = dict(model)
        self.tied = bool(model["tied_embeddings"])
        first_layer = sum(stage_layers[:stage])
        layers = []
        for index in range(stage_layers[stage]):
            generator = torch.Generator().manual_seed(seed * 1000 + first_layer + index)
            layers.append(LayerShard(shape, tp_rank, generator))
        self.layers = torch.nn.ModuleList(layers)
        outer = torch.Generator().manual_seed(seed * 1000 + 999)
        embedding = torch.randn(model["vocab"], model["hidden"], generator=outer) * 0.02
        output = torch.randn(model["vocab"], model["hidden"], generator=outer) * 0.02
        # Vocab-parallel, as Megatron (and the C++ cost model) does: each TP rank holds rows
        # [vocab_start, vocab_start + vocab / tp) of the embedding table and the output layer.
        self.tp = tp
        rows = model["vocab"] // tp
        self.vocab_start = tp_rank * rows
        mine = slice(self.vocab_start, self.vocab_start + rows)
        if self.first or (self.last and self.tied):
            self.embedding = torch.nn.Parameter(embedding[mine].contiguous())
        if self.last:
            self.final_norm = torch.nn.Parameter(torch.ones(model["hidden"]))
            if not self.tied:
                self.output = torch.nn.Parameter(output[mine].contiguous())

    @property
    def holds_embedding_copy(self) -> bool:
        """Whether this stage holds one of the two copies of a tied table (first or last of
        several stages), whose gradients the embedding group sums."""
        return self.tied and self.first != self.last

    def embed(self, tokens: torch.Tensor, group=None) -> torch.Tensor:
        """The tokens' embeddings: each TP rank looks up the tokens of its rows (zeros for the
        others) and the TP group (``group``, None when tp is 1) sums them."""
        rows = self.embedding.shape[0]
        local = tokens - self.vocab_start
        inside = (local >= 0) & (local < rows)
        looked_up = F.embedding(local.clamp(0, rows - 1), self.embedding) * inside.unsqueeze(-1)
        if self.sequence_parallel:
            return scatter_sequence(looked_up, group)  # this rank's slice of the summed rows
        return tp_reduce_forward(looked_up, group) if self.tp > 1 else looked_up

    def loss(self, h: torch.Tensor, labels: torch.Tensor, tokens: int, group=None) -> torch.Tensor:
        """Cross-entropy summed over this rank's tokens / ``tokens``, the microbatch's token count
        (all CP ranks'), so that the CP ranks' losses add up to the microbatch's mean; the logits
        are split over the TP group ``group``. ``labels`` are the CP rank's whole sequence (with
        sequence parallelism ``h`` is its TP rank's slice, gathered after the final norm)."""
        normed = rms_norm(h, self.final_norm, self.shape.norm_eps)
        if self.sequence_parallel:
            normed = gather_sequence(normed, group)  # the whole sequence's logits on every rank
        elif self.tp > 1:
            normed = tp_reduce_backward(normed, group)  # every rank's logits shard feeds h's gradient
        logits = F.linear(normed, self.embedding if self.tied else self.output)
        per_token = _VocabParallelCrossEntropy.apply(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                                                     self.vocab_start, group if self.tp > 1 else None)
        return per_token.sum() / tokens


class _VocabParallelCrossEntropy(torch.autograd.Function):
    """Per-token cross-entropy of logits whose vocabulary is split over ``group`` (this rank's
    columns start at ``start``; None: not split): the max, the sum of exponentials and the
    target's logit are all-reduced, and the gradient is this shard's softmax minus the one-hot
    target."""

    @staticmethod
    def forward(ctx, logits: torch.Tensor, labels: torch.Tensor, start: int, group) -> torch.Tensor:
        def all_reduce(x, op=dist.ReduceOp.SUM):
            if group is not None:
                dist.all_reduce(x, op=op, group=group)
            return x

        columns = logits.shape[-1]
        peak = all_reduce(logits.max(dim=-1).values, dist.ReduceOp.MAX)
        shifted = logits - peak.unsqueeze(-1)
        exps = shifted.exp()
        total = all_reduce(exps.sum(dim=-1))
        local = labels - start
        inside = (local >= 0) & (local < columns)
        index = local.clamp(0, columns - 1).unsqueeze(-1)
        target = all_reduce(shifted.gather(-1, index).squeeze(-1) * inside)
        ctx.save_for_backward(exps / total.unsqueeze(-1), index, inside)
        return total.log() - target

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        softmax, index, inside = ctx.saved_tensors
        result = softmax.scatter_add(-1, index, -inside.to(softmax.dtype).unsqueeze(-1))
        return result * grad.unsqueeze(-1), None, None, None


def synthetic_batch(vocab: int, microbatches: int, mbs: int, seq: int, step: int, seed: int):
    """Tokens and next-token labels: arithmetic sequences mod vocab (a learnable pattern), with
    starts and strides drawn from (seed, step). Shapes [microbatches, mbs, seq]."""
    generator = torch.Generator().manual_seed(seed * 7919 + step)
    starts = torch.randint(0, vocab, (microbatches, mbs, 1), generator=generator)
    strides = torch.randint(1, 4, (microbatches, mbs, 1), generator=generator)
    positions = torch.arange(seq + 1).view(1, 1, -1)
    sequence = (starts + strides * positions) % vocab
    return sequence[..., :-1].contiguous(), sequence[..., 1:].contiguous()

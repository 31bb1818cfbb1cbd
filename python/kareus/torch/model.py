"""One pipeline stage of a Llama-shaped model on one TP rank.

Layers are ``LayerShard``s; the nonpartition work (REFERENCE.md section 2) is replicated on the
TP ranks of its stage (each CP rank runs it on its own tokens): the token embedding on the
first stage, the final RMSNorm, output layer and cross-entropy on the last. Every rank draws every layer's full weights from one seed, so any
TP degree or stage split starts from the same model (and the reference run from the same one).
"""

from __future__ import annotations

from typing import List

import torch
import torch.nn.functional as F

from kareus.torch.layer import LayerShape, LayerShard, rms_norm


class LlamaStage(torch.nn.Module):
    def __init__(
        self, model: dict, stage_layers: List[int], stage: int, tp: int, tp_rank: int, seed: int
    ) -> None:
        super().__init__()
        self.stage = stage
        self.first = stage == 0
        self.last = stage == len(stage_layers) - 1
        shape = LayerShape(model["hidden"], model["heads"], model["kv_groups"], model["head_dim"], model["ffn"], tp,
                           bool(model.get("qk_norm")))
        self.shape = shape
        first_layer = sum(stage_layers[:stage])
        layers = []
        for index in range(stage_layers[stage]):
            generator = torch.Generator().manual_seed(seed * 1000 + first_layer + index)
            layers.append(LayerShard(shape, tp_rank, generator))
        self.layers = torch.nn.ModuleList(layers)
        outer = torch.Generator().manual_seed(seed * 1000 + 999)
        embedding = torch.randn(model["vocab"], model["hidden"], generator=outer) * 0.02
        output = torch.randn(model["vocab"], model["hidden"], generator=outer) * 0.02
        if self.first:
            self.embedding = torch.nn.Parameter(embedding)
        if self.last:
            self.final_norm = torch.nn.Parameter(torch.ones(model["hidden"]))
            self.output = torch.nn.Parameter(output)

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        return F.embedding(tokens, self.embedding)

    def loss(self, h: torch.Tensor, labels: torch.Tensor, tokens: int = 0) -> torch.Tensor:
        """Cross-entropy over this rank's tokens: their mean, or with ``tokens`` (context
        parallelism: the microbatch's tokens on all CP ranks) their sum / tokens, so that the CP
        ranks' losses add up to the microbatch's mean."""
        logits = F.linear(rms_norm(h, self.final_norm), self.output)
        flat_logits, flat_labels = logits.reshape(-1, logits.shape[-1]), labels.reshape(-1)
        if not tokens:
            return F.cross_entropy(flat_logits, flat_labels)
        return F.cross_entropy(flat_logits, flat_labels, reduction="sum") / tokens


def synthetic_batch(vocab: int, microbatches: int, mbs: int, seq: int, step: int, seed: int):
    """Tokens and next-token labels: arithmetic sequences mod vocab (a learnable pattern), with
    starts and strides drawn from (seed, step). Shapes [microbatches, mbs, seq]."""
    generator = torch.Generator().manual_seed(seed * 7919 + step)
    starts = torch.randint(0, vocab, (microbatches, mbs, 1), generator=generator)
    strides = torch.randint(1, 4, (microbatches, mbs, 1), generator=generator)
    positions = torch.arange(seq + 1).view(1, 1, -1)
    sequence = (starts + strides * positions) % vocab
    return sequence[..., :-1].contiguous(), sequence[..., 1:].contiguous()

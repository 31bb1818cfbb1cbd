"""The comm half: GPTModel's decoder block running its layers as the plan's partitions.

``KareusTransformerBlock`` is Megatron's ``TransformerBlock`` with another ``forward``: while a
planned instruction runs (the clock hook says which), the stage's layers run through kareus.torch's
``StageRunner`` (the project's one executor of partitions) over ``MEGATRON_OPS``: nanobatched,
partition by partition, each collective launched at its planned slot on the TP group of its
planned CTA count, recomputed as the plan says. Outside a planned instruction (evaluation,
``forward_only``, ``model.eval()``) it is the stock block. It adds no parameters and no buffers,
so ``state_dict`` and ``sharded_state_dict`` are the stock block's.

``adopt_block(model)`` turns a built GPTModel's decoder into one (Python's class assignment on
that one object; Megatron's sources are not changed).
"""

from __future__ import annotations

from typing import Optional

import torch

from kareus import InputError
from kareus.megatron.layer_ops import BATCH_DIM, LayerContext, megatron_ops, unwrap

try:  # The package imports without Megatron-Core; adopt_block needs it.
    from megatron.core.tensor_parallel import ColumnParallelLinear, RowParallelLinear
    from megatron.core.transformer.dot_product_attention import DotProductAttention
    from megatron.core.transformer.transformer_block import TransformerBlock
    from megatron.core.utils import make_viewless_tensor
except ImportError:  # pragma: no cover - exercised where megatron-core is absent
    TransformerBlock = None


class BlockFollower:
    """The kareus state of one adopted block (one model chunk's decoder): its runner and the
    planned instruction running on it."""

    def __init__(self, runner, chunk: int = 0) -> None:
        self.runner = runner
        self.chunk = chunk
        self.instruction = None  # kareus.torch.InstructionPlan while a planned instruction runs on it
        self.running_chunk = None  # the chunk a planned instruction runs on, while one runs

    def follow(self, instruction, running_chunk=None) -> None:
        """The planned instruction that begins on this chunk (None: none, or the running one
        ended); ``running_chunk`` is the chunk the plan runs now (None between instructions)."""
        self.instruction = instruction
        self.running_chunk = running_chunk if instruction is None else self.chunk
        # The runner keeps no instruction between its own: its backward outside one is refused.
        self.runner.set_instruction(instruction)

    def refuse_other_chunk(self) -> None:
        """Raises InputError when this chunk's decoder runs while the plan runs another chunk (the
        schedule and the plan disagree on which chunk the step is)."""
        if self.instruction is None and self.running_chunk is not None:
            raise InputError(f"kareus.megatron: model chunk {self.chunk}'s decoder ran while the plan runs chunk "
                             f"{self.running_chunk}")


if TransformerBlock is not None:

    class KareusTransformerBlock(TransformerBlock):
        """A TransformerBlock whose training forward runs the plan's partitions (see module)."""

        def forward(self, hidden_states, attention_mask=None, **kwargs):
            follower: Optional[BlockFollower] = self.__dict__.get("_kareus")
            if follower is not None and self.training:
                follower.refuse_other_chunk()
            if follower is None or follower.instruction is None or not self.training:
                return super().forward(hidden_states, attention_mask, **kwargs)
            rotary_pos_emb = kwargs.pop("rotary_pos_emb", None)
            for name, value in kwargs.items():
                if value is not None and name not in _IGNORED_ARGUMENTS:
                    raise InputError(f"kareus.megatron: the decoder was called with {name}; kareus runs causal "
                                     "self-attention over whole sequences")
            if attention_mask is not None and attention_mask.shape[0] != 1:
                raise InputError("kareus.megatron: a per-sample attention mask would need splitting per nanobatch; "
                                 "pass None or a [1, 1, s, s] mask")
            if not self.pre_process:
                hidden_states = self.input_tensor
            runner = follower.runner
            runner.rope = LayerContext(self.config, rotary_pos_emb, attention_mask)
            output = runner(hidden_states, follower.instruction.microbatch)
            if self.final_layernorm is not None:
                output = self.final_layernorm(output)
            return make_viewless_tensor(inp=output, requires_grad=True, keep_graph=True)


# Arguments GPTModel passes to its decoder that change nothing in training without packing.
_IGNORED_ARGUMENTS = ("dynamic_inference_decode_only", "sequence_len_offset", "padding_mask")


def plain_layers(block, context_of):
    """The stock layers of ``block`` one after another (blocking collectives in Megatron's
    modules): what an instruction planned without nanobatching runs. ``context_of()`` gives the
    running microbatch's LayerContext."""

    def run(hidden_states: torch.Tensor) -> torch.Tensor:
        context = context_of()
        for layer in block.layers:
            hidden_states, _ = layer(hidden_states=hidden_states, attention_mask=context.attention_mask,
                                     rotary_pos_emb=context.rotary_pos_emb)
        return hidden_states

    return run


def adopt_block(model, make_runner, chunk: int = 0) -> BlockFollower:
    """Makes ``model.decoder`` (a GPTModel's, possibly inside Megatron's wrappers; model chunk
    ``chunk`` of its rank) a KareusTransformerBlock driven by the returned follower.
    ``make_runner(layers, ops, plain, batch_dim)`` builds the StageRunner over the block's layers."""
    if TransformerBlock is None:
        raise InputError("kareus.megatron needs megatron-core (pip install megatron-core)")
    module = unwrap(model, "decoder")  # through Megatron's DDP / Float16Module wrappers
    block = getattr(module, "decoder", None)
    if not isinstance(block, TransformerBlock):
        raise InputError(f"kareus.megatron: {type(module).__name__} has no TransformerBlock decoder (expected a "
                         "GPTModel)")
    if type(block) not in (TransformerBlock, KareusTransformerBlock):
        raise InputError(f"kareus.megatron: the decoder is a {type(block).__name__}; kareus adopts Megatron's own "
                         "TransformerBlock")
    for layer in block.layers:
        _refuse_unknown_layer(layer)
    block.__class__ = KareusTransformerBlock
    runner_box = {}
    runner = make_runner(list(block.layers), megatron_ops(block.config),
                         plain_layers(block, lambda: runner_box["runner"].rope), BATCH_DIM)
    runner_box["runner"] = runner
    follower = BlockFollower(runner, chunk)
    block.__dict__["_kareus"] = follower
    return follower


def _refuse_unknown_layer(layer) -> None:
    """megatron_ops reads the local spec's modules; another spec's layer is refused by name."""
    expected = {"self_attention.linear_qkv": ColumnParallelLinear, "self_attention.linear_proj": RowParallelLinear,
                "self_attention.core_attention": DotProductAttention, "mlp.linear_fc1": ColumnParallelLinear,
                "mlp.linear_fc2": RowParallelLinear}
    for path, kind in expected.items():
        try:
            module = layer.get_submodule(path)
        except AttributeError:
            module = None
        if not isinstance(module, kind):
            raise InputError(f"kareus.megatron: layer {getattr(layer, 'layer_number', '?')}: {path} is "
                             f"{type(module).__name__}, expected {kind.__name__} (build the GPTModel with "
                             "get_gpt_layer_local_spec)")
    # qk_layernorm in the config but not in the spec: Megatron runs no q/k norm (IdentityOp).
    if layer.config.qk_layernorm and not hasattr(layer.self_attention.q_layernorm, "weight"):
        raise InputError(f"kareus.megatron: layer {getattr(layer, 'layer_number', '?')}: qk_layernorm=True but "
                         f"self_attention.q_layernorm is {type(layer.self_attention.q_layernorm).__name__} (build "
                         "the GPTModel with get_gpt_layer_local_spec(qk_layernorm=True))")

"""Shared helpers of the kareus.megatron tests: kareus.torch's test helpers (plans, gloo
launcher), the CPU shim of examples/megatron, and a tiny Megatron GPT configuration."""

from __future__ import annotations

import pathlib
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.append(str(HERE.parent / "torch"))
sys.path.insert(0, str(HERE.parents[2] / "examples" / "megatron"))

import helpers  # noqa: E402  (python/tests/torch/helpers.py)

REPO = helpers.REPO
TINY_MODEL = helpers.TINY_MODEL
EXAMPLE = REPO / "examples" / "megatron" / "train_gpt.py"


def require_megatron():
    """Skips the calling test (with the reason) without torch or megatron-core."""
    pytest.importorskip("torch", reason="kareus.megatron needs torch (scripts/setup.sh installs it)")
    pytest.importorskip("megatron.core", reason="megatron-core is not installed in this Python "
                        "(scripts/setup.sh installs megatron-core==0.16.1 into .venv/)")


def run_megatron_workers(worker, world: int, out) -> dict:
    """helpers.run_workers, skipped (with the reason) without torch or megatron-core."""
    require_megatron()
    return helpers.run_workers(worker, world, out)


def tiny_config(tp: int = 1, pp: int = 1, **overrides):
    """The TransformerConfig of examples/tiny-llama.json (fp32, CPU, no dropout, no biases)."""
    import torch
    import torch.nn.functional as F
    from megatron.core.transformer.transformer_config import TransformerConfig

    settings = dict(num_layers=4, hidden_size=64, num_attention_heads=4, num_query_groups=2, kv_channels=16,
                    ffn_hidden_size=128, normalization="RMSNorm", gated_linear_unit=True, activation_func=F.silu,
                    add_bias_linear=False, hidden_dropout=0.0, attention_dropout=0.0, bias_activation_fusion=False,
                    bias_dropout_fusion=False, masked_softmax_fusion=False, gradient_accumulation_fusion=False,
                    persist_layer_norm=False, use_cpu_initialization=True, params_dtype=torch.float32,
                    pipeline_dtype=torch.float32, tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp)
    settings.update(overrides)
    return TransformerConfig(**settings)


def init_megatron(rank: int, world: int, port: int, tp: int, pp: int = 1) -> None:
    """gloo process group, the CPU shim and Megatron's parallel state."""
    import cpu_shim
    from megatron.core import parallel_state

    helpers.init_gloo(rank, world, port)
    cpu_shim.install()
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp)


def gpt_forward_step(seq: int):
    """Megatron's forward_step_func for a GPTModel on (tokens, labels) batches of ``seq`` tokens:
    the loss is the mean per-token loss, also reported as "loss" (what the training tests compare)."""
    import torch

    def forward_step(batches, gpt):
        tokens, labels = next(batches)
        output = gpt(tokens, torch.arange(seq).unsqueeze(0).expand_as(tokens), None, labels=labels)

        def loss_func(per_token):
            loss = per_token.float().sum() / per_token.numel()
            return loss, {"loss": loss.detach().clone()}

        return output, loss_func

    return forward_step


def write_job_plan(path, job_workload, slot_ctas: int = 6) -> str:
    """A plan for one stage of ``job_workload`` (a kareus.megatron.MegatronWorkload): every
    searchable key at its first slot on ``slot_ctas`` CTAs, the workload block the job's."""
    import json

    runtime_workload = job_workload.runtime_workload()
    configs = helpers.plan_configs({key: (slot, slot_ctas)
                                    for key, slot in helpers.first_slots(runtime_workload).items()})
    return helpers.write_plan(path, job_workload.pp, job_workload.microbatches, configs,
                              job_workload.recompute == "full", workload=json.loads(runtime_workload.to_json()))


def start_block_test(rank: int, world: int, port: int, tp: int, seq: int, mbs: int):
    """What the block tests start from: Megatron at TP ``tp`` on gloo, the RoPE table of ``seq``
    positions (GPTModel's: the whole sequence, under SP too), the block's input and output
    gradient ([seq, mbs, 64] as Megatron lays them out) and kareus's comm groups."""
    import torch
    from megatron.core.models.common.embeddings.rotary_pos_embedding import RotaryEmbedding

    from kareus import torch as kt

    init_megatron(rank, world, port, tp)
    freqs = RotaryEmbedding(16, rotary_percent=1.0)(seq)
    x = torch.randn(seq, mbs, 64, generator=torch.Generator().manual_seed(5))
    grad = torch.randn(seq, mbs, 64, generator=torch.Generator().manual_seed(6))
    return freqs, x, grad, kt.CommGroups([list(range(tp))], rank, "gloo")


def seeded_block(config, spec):
    """Megatron's TransformerBlock from seed 3, its norm weights (biases) drawn off their init of
    ones (zeros) so that each norm matters."""
    import torch
    from megatron.core.transformer.transformer_block import TransformerBlock

    torch.manual_seed(3)
    block = TransformerBlock(config, spec, pre_process=True, post_process=False)
    with torch.no_grad():
        for name, param in block.named_parameters():
            if "layernorm" in name:
                param.uniform_(0.5, 1.5)
    return block


def holding(block):
    """What kareus.megatron.block.adopt_block looks for: a model with a decoder."""
    import torch

    holder = torch.nn.Module()
    holder.decoder = block
    return holder

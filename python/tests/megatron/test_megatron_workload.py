"""kareus.megatron.workload: the kareus workload of a Megatron config, and what it refuses.

The tiny GPT's TransformerConfig gives back examples/tiny-llama.json's shape; Megatron's layer
split (first/last stage sizes) and full recompute carry over; qk_layernorm is a qk_norm model; a
norm epsilon or rotary base off the defaults reaches the workload's shape (so a plan must agree on
it); each setting kareus does not model is refused by name.
"""

from __future__ import annotations

import json

import pytest

import mhelpers
from mhelpers import helpers

from kareus import InputError


@pytest.fixture(autouse=True)
def megatron():
    mhelpers.require_megatron()


def _workload(config, **overrides):
    from kareus.megatron import workload

    arguments = dict(vocab_size=256, seq_length=16, micro_batch_size=2, num_microbatches=4, name="tiny-llama")
    arguments.update(overrides)
    return workload(config, **arguments)


def test_the_tiny_config_gives_the_tiny_model_back(tmp_path):
    from kareus._runtime import load_model

    job = _workload(mhelpers.tiny_config(tp=2, pp=2))
    path = job.write_model(str(tmp_path / "tiny.json"))
    loaded, tiny = load_model(path), load_model(helpers.TINY_MODEL)
    assert loaded == tiny  # every field, norm_eps 1e-5 and rotary_base 10000 included
    assert job.plan_flags() == ["--tp", "2", "--cp", "1", "--pp", "2", "--dp", "1", "--mbs", "2", "--seq", "16",
                                "--microbatches", "4", "--recompute", "none", "--layers-per-stage", "2,2"]
    workload = job.runtime_workload()
    assert list(workload.stage_layers) == [2, 2] and workload.parallel["tp"] == 2


def test_megatrons_layer_split_and_full_recompute_carry_over():
    config = mhelpers.tiny_config(pp=2, num_layers_in_first_pipeline_stage=3, recompute_granularity="full",
                                  recompute_method="uniform", recompute_num_layers=1)
    job = _workload(config)
    assert job.layers_per_stage == [3, 1] and job.recompute == "full"
    assert list(job.runtime_workload().stage_layers) == [3, 1]


def test_a_norm_epsilon_rotary_base_and_scaling_reach_the_plans_shape():
    job = _workload(mhelpers.tiny_config(layernorm_epsilon=1e-6), rotary_base=500000, rope_scaling=True,
                    rope_scaling_factor=32.0)
    shape = json.loads(job.runtime_workload().to_json())["shape"]
    assert shape["norm_eps"] == 1e-6 and shape["rotary_base"] == 500000
    assert shape["rotary_scaling"] == {"type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                       "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
    default = json.loads(_workload(mhelpers.tiny_config()).runtime_workload().to_json())["shape"]
    assert default["norm_eps"] == 1e-5 and default["rotary_base"] == 10000 and default["rotary_scaling"] is None


def test_qk_layernorm_is_a_qk_norm_model_that_the_layers_run():
    from kareus.megatron.layer_ops import refuse_unsupported_layers

    config = mhelpers.tiny_config(tp=2, qk_layernorm=True)
    refuse_unsupported_layers(config)  # Megatron's q/k norms are among the ops now
    job = _workload(config)
    assert job.model["qk_norm"] is True
    assert json.loads(job.runtime_workload().to_json())["shape"]["qk_norm"] is True
    assert _workload(mhelpers.tiny_config(tp=2)).model["qk_norm"] is False


def test_a_presets_rope_goes_to_gptmodels_arguments():
    from kareus._runtime import load_model
    from kareus.megatron import gpt_model_rope_args

    assert gpt_model_rope_args(load_model("llama3.2-3b")) == {"rotary_base": 500000.0, "rope_scaling": True,
                                                              "rope_scaling_factor": 32.0}
    assert gpt_model_rope_args(load_model("qwen3-1.7b")) == {"rotary_base": 1000000.0, "rope_scaling": False}
    # Back through workload(): the preset's numbers again.
    preset = load_model("llama3.3-70b")
    job = _workload(mhelpers.tiny_config(), **gpt_model_rope_args(preset))
    assert job.model["rotary_base"] == 500000.0 and job.model["rotary_scaling"] == preset["rotary_scaling"]


def test_a_learned_position_model_is_refused_by_name():
    from kareus._runtime import load_model
    from kareus.megatron import gpt_model_rope_args

    with pytest.raises(InputError, match=r"position_embedding='learned': kareus.megatron runs RoPE models only"):
        gpt_model_rope_args(load_model("gpt3-175b"))


def test_a_scaling_megatron_cannot_take_is_refused_by_name():
    from kareus._runtime import load_model
    from kareus.megatron import gpt_model_rope_args

    model = load_model("llama3.2-3b")
    model["rotary_scaling"] = dict(model["rotary_scaling"], high_freq_factor=2.0)
    with pytest.raises(InputError, match=r"rotary_scaling.high_freq_factor=2.0: Megatron-Core's GPTModel scales RoPE "
                                         r"with high_freq_factor 4 only"):
        gpt_model_rope_args(model)


@pytest.mark.parametrize("overrides, arguments, named", [
    ({"recompute_granularity": "selective"}, {}, "recompute_granularity='selective'"),
    ({"num_moe_experts": 4}, {}, "num_moe_experts=4"),
    ({"gated_linear_unit": False}, {}, "activation_func='silu'"),
    ({}, {"position_embedding_type": "learned_absolute"},
     "position_embedding_type='learned_absolute': kareus.megatron runs RoPE models only"),
    ({}, {"seq_length": 0}, "seq_length must be a positive integer, found 0"),
])
def test_what_kareus_does_not_model_is_refused_by_name(overrides, arguments, named):
    with pytest.raises(InputError, match=named.replace("(", r"\(")):
        _workload(mhelpers.tiny_config(**overrides), **arguments)


def test_layernorm_is_the_models_norm_and_another_norm_is_refused_by_name():
    shape = json.loads(_workload(mhelpers.tiny_config(normalization="LayerNorm")).runtime_workload().to_json())["shape"]
    assert shape["norm"] == "layernorm"
    assert json.loads(_workload(mhelpers.tiny_config()).runtime_workload().to_json())["shape"]["norm"] == "rmsnorm"
    config = mhelpers.tiny_config()
    config.normalization = "L2Norm"
    with pytest.raises(InputError, match="normalization='L2Norm': kareus models RMSNorm and LayerNorm layers"):
        _workload(config)


def test_the_layers_kareus_runs_refuse_megatrons_own_comm_overlap_and_take_sequence_parallelism():
    from kareus.megatron.layer_ops import refuse_unsupported_layers

    refuse_unsupported_layers(mhelpers.tiny_config(tp=2))
    config = mhelpers.tiny_config(tp=2)
    config.tp_comm_overlap = True
    with pytest.raises(InputError, match="tp_comm_overlap=True is not supported"):
        refuse_unsupported_layers(config)
    config = mhelpers.tiny_config(tp=2)
    config.sequence_parallel = True
    refuse_unsupported_layers(config)  # the SP partitions run the plan's all-gathers and reduce-scatters



def test_the_distributed_optimizers_param_gather_overlap_is_refused_through_the_wrappers():
    # Megatron's own DDP config on stand-ins for its DDP(Float16Module(GPTModel)) nesting: the
    # pre-hooks that wait for the gathers belong to modules kareus's partitions do not call.
    from types import SimpleNamespace

    from megatron.core.distributed import DistributedDataParallelConfig

    from kareus.megatron.layer_ops import refuse_unsupported_wrapping

    def wrapped(**ddp):
        gpt = SimpleNamespace(decoder=object())
        return SimpleNamespace(ddp_config=DistributedDataParallelConfig(**ddp), module=SimpleNamespace(module=gpt))

    refuse_unsupported_wrapping(wrapped(use_distributed_optimizer=True, overlap_grad_reduce=True))
    refuse_unsupported_wrapping(wrapped(overlap_param_gather=True))  # no gathers without the optimizer
    refuse_unsupported_wrapping(SimpleNamespace(decoder=object()))  # unwrapped
    with pytest.raises(InputError, match="overlap_param_gather=True with use_distributed_optimizer=True is not "
                                         "supported: .* set DistributedDataParallelConfig"):
        refuse_unsupported_wrapping(wrapped(use_distributed_optimizer=True, overlap_param_gather=True))
    # Below a wrapper of its own too.
    with pytest.raises(InputError, match="overlap_param_gather=True"):
        refuse_unsupported_wrapping(SimpleNamespace(module=wrapped(use_distributed_optimizer=True,
                                                                   overlap_grad_reduce=True,
                                                                   overlap_param_gather=True)))


def test_sequence_parallelism_and_virtual_stages_reach_the_workload_and_the_plan_flags():
    config = mhelpers.tiny_config(tp=2, pp=2, sequence_parallel=True, virtual_pipeline_model_parallel_size=2)
    job = _workload(config)
    assert job.sequence_parallel is True and job.vpp == 2
    assert job.plan_flags()[-3:] == ["--sequence-parallel", "--vpp", "2"]
    parallel = job.runtime_workload().parallel
    assert parallel["sequence_parallel"] is True and parallel["vpp"] == 2
    plain = _workload(mhelpers.tiny_config(tp=2, pp=2))
    assert plain.sequence_parallel is False and plain.vpp == 1
    assert "--sequence-parallel" not in plain.plan_flags() and "--vpp" not in plain.plan_flags()


def test_megatrons_rules_for_virtual_stages_are_refused_by_name():
    config = mhelpers.tiny_config(tp=2, pp=2, virtual_pipeline_model_parallel_size=2)
    with pytest.raises(InputError, match=r"--vpp 2 needs --microbatches 3 divisible by --pp 2"):
        _workload(config, num_microbatches=3).runtime_workload()
    six_layers = mhelpers.tiny_config(tp=2, pp=2, num_layers=6, virtual_pipeline_model_parallel_size=2)
    with pytest.raises(InputError, match=r"--vpp 2 must divide every stage's layers; stage 0 has 3"):
        _workload(six_layers).runtime_workload()

"""A checkpoint of a kareus run is the stock GPTModel's, and loads into a stock run and back bit
for bit.

Two gloo ranks (TP 2). A GPTModel adopted by kareus trains one step following a plan; its
``state_dict`` has the stock model's keys and loads (strict) into a stock GPTModel, whose
tensors then equal the saved ones bit for bit; the stock model's ``state_dict`` loads back into a
fresh kareus model the same way. Both ``sharded_state_dict``s name the same shards with the same
global shapes and offsets. From the shared weights, one more step of each gives the same loss.
"""

from __future__ import annotations

import pytest

import mhelpers
from mhelpers import helpers

TP, SEQ, MBS, MICROBATCHES = 2, 16, 2, 2


def _worker(rank, world, port, out_dir):
    import torch
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.pipeline_parallel.schedules import get_forward_backward_func

    from kareus.megatron import MegatronJob, workload
    from kareus.torch import synthetic_batch

    config = mhelpers.tiny_config(tp=TP)
    job_workload = workload(config, vocab_size=256, seq_length=SEQ, micro_batch_size=MBS,
                            num_microbatches=MICROBATCHES)
    plan = mhelpers.write_job_plan(f"{out_dir}/plan_{rank}.json", job_workload)
    job = MegatronJob(plan, config, job_workload, rank=rank)
    mhelpers.init_megatron(rank, world, port, TP)

    def build(kareus):
        torch.manual_seed(7)
        model = GPTModel(config=config, transformer_layer_spec=get_gpt_layer_local_spec(normalization="RMSNorm"),
                         vocab_size=256, max_sequence_length=SEQ, share_embeddings_and_output_weights=False)
        if kareus:
            job.attach(model)
        return model

    def forward_step(batches, model):
        tokens, labels = next(batches)
        positions = torch.arange(SEQ).unsqueeze(0).expand_as(tokens)
        output = model(tokens, positions, None, labels=labels)
        return output, lambda per_token: (per_token.sum() / per_token.numel(), {"loss": per_token.mean().detach()})

    def step(model, schedule, step_index):
        tokens, labels = synthetic_batch(256, MICROBATCHES, MBS, SEQ, step_index, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.2)
        optimizer.zero_grad()
        stored = schedule(forward_step_func=forward_step, data_iterator=iter(zip(tokens, labels)), model=model,
                          num_microbatches=MICROBATCHES, seq_length=SEQ, micro_batch_size=MBS, forward_only=False)
        optimizer.step()
        return sum(float(entry["loss"]) for entry in stored) / MICROBATCHES

    def bitwise_equal(a, b):
        keys_a, keys_b = sorted(a), sorted(b)
        same = keys_a == keys_b and all(
            (a[k] is None and b[k] is None) or (torch.is_tensor(a[k]) and torch.equal(a[k], b[k]))
            or (not torch.is_tensor(a[k]) and a[k] == b[k]) for k in keys_a)
        return same, len(keys_a)

    def shards(model):
        return {key: (value.key, tuple(value.global_shape), tuple(value.global_offset))
                for key, value in model.sharded_state_dict().items() if hasattr(value, "global_shape")}

    kareus_schedule = job.forward_backward(get_forward_backward_func())
    stock_schedule = get_forward_backward_func()
    trained = build(kareus=True)
    step(trained, kareus_schedule, 0)
    path = f"{out_dir}/checkpoint_{rank}.pt"
    torch.save(trained.state_dict(), path)
    stock = build(kareus=False)
    stock.load_state_dict(torch.load(path, weights_only=False), strict=True)
    into_stock, tensors = bitwise_equal(stock.state_dict(), torch.load(path, weights_only=False))
    back = build(kareus=True)
    back.load_state_dict(stock.state_dict(), strict=True)
    into_kareus, _ = bitwise_equal(back.state_dict(), trained.state_dict())
    changed = not torch.equal(build(kareus=False).state_dict()["decoder.layers.0.mlp.linear_fc1.weight"],
                              trained.state_dict()["decoder.layers.0.mlp.linear_fc1.weight"])
    results = {"into_stock": into_stock, "into_kareus": into_kareus, "tensors": tensors, "trained_changed": changed,
               "same_shards": shards(back) == shards(stock), "shards": len(shards(stock)),
               "next_loss_kareus": step(back, kareus_schedule, 1), "next_loss_stock": step(stock, stock_schedule, 1)}
    job.close()
    helpers.finish_worker(rank, out_dir, results)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return mhelpers.run_megatron_workers(_worker, 2, tmp_path_factory.mktemp("megatron_checkpoint"))


def test_a_kareus_checkpoint_loads_into_a_stock_model_and_back_bit_for_bit(results):
    assert results["trained_changed"]  # the step moved the weights: the comparison is not of inits
    assert results["into_stock"] and results["into_kareus"]
    # embedding, 4 layers x 6 weights (+ _extra_state of the 4 linears), final norm, output layer
    assert results["tensors"] >= 1 + 4 * 6 + 2


def test_the_sharded_state_dicts_name_the_same_shards(results):
    assert results["same_shards"] and results["shards"] >= 1 + 4 * 6 + 2


def test_both_models_take_the_same_next_step(results):
    assert results["next_loss_kareus"] == pytest.approx(results["next_loss_stock"], rel=1e-5)

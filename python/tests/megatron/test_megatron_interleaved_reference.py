"""The stock reference of an interleaved run is right: stock Megatron's interleaved 1F1B, as
examples/megatron/train_gpt.py configures it, trains exactly as stock 1F1B from the same weights.

Four gloo ranks (TP 2 x PP 2), the tiny GPT. A 1F1B model trains 3 SGD steps; a vpp 2 model whose
chunks hold the same layers (chunk c of rank r: layer c x pp + r, copied by Megatron's global layer
number) trains the same steps under forward_backward_pipelining_with_interleaving with the
example's P2P settings (``train_gpt.interleaving_p2p``). The losses must agree within 1e-6
relative. (With Megatron's default batched P2P at PP 2 they do not: activations and gradients
between the two ranks swap buffers; see train_gpt.interleaving_p2p.) The kareus example's --check
compares kareus with this reference, so a wrong reference would pass unseen.
"""

from __future__ import annotations

import mhelpers
from mhelpers import helpers

SEQ, MBS, MICROBATCHES, STEPS = 32, 2, 4, 3


def _worker(rank, world, port, out_dir):
    import torch
    import torch.distributed as dist
    from megatron.core import parallel_state
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.pipeline_parallel.schedules import get_forward_backward_func

    import train_gpt  # examples/megatron (mhelpers puts it on the path)
    from kareus.torch import synthetic_batch

    helpers.init_gloo(rank, world, port)
    import cpu_shim

    cpu_shim.install()

    def build(vpp):
        config = mhelpers.tiny_config(tp=2, pp=2, virtual_pipeline_model_parallel_size=vpp,
                                      **train_gpt.interleaving_p2p(vpp or 1))
        torch.manual_seed(1)
        return [GPTModel(config=config, transformer_layer_spec=get_gpt_layer_local_spec(normalization="RMSNorm"),
                         vocab_size=256, max_sequence_length=SEQ, position_embedding_type="rope", vp_stage=vp,
                         pre_process=parallel_state.is_pipeline_first_stage(ignore_virtual=False, vp_stage=vp),
                         post_process=parallel_state.is_pipeline_last_stage(ignore_virtual=False, vp_stage=vp))
                for vp in (range(vpp) if vpp else [None])]

    def by_global_name(chunks):
        """Every parameter under a name without its chunk: layers by Megatron's global number."""
        named = {}
        for chunk in chunks:
            for name, param in chunk.named_parameters():
                if ".layers." in name:
                    index = int(name.split(".layers.")[1].split(".")[0])
                    number = chunk.decoder.layers[index].layer_number
                    name = name.replace(f".layers.{index}.", f".layers.number{number}.")
                named[name] = param
        return named

    def train(chunks, interleaved):
        optimizer = torch.optim.SGD([p for chunk in chunks for p in chunk.parameters()], lr=0.2)
        forward_step = mhelpers.gpt_forward_step(SEQ)
        losses = []
        for step in range(STEPS):
            tokens, labels = synthetic_batch(256, MICROBATCHES, MBS, SEQ, step, 1)
            batches = [iter(list(zip(tokens, labels))) for _ in chunks]
            optimizer.zero_grad(set_to_none=True)
            stored = get_forward_backward_func()(
                forward_step_func=forward_step, data_iterator=batches if interleaved else batches[0],
                model=chunks if interleaved else chunks[0], num_microbatches=MICROBATCHES, seq_length=SEQ,
                micro_batch_size=MBS, forward_only=False)
            optimizer.step()
            local = sum(float(entry["loss"]) for entry in stored) / MICROBATCHES if stored else 0.0
            last = parallel_state.is_pipeline_last_stage() and parallel_state.get_tensor_model_parallel_rank() == 0
            total = torch.tensor([local if last else 0.0], dtype=torch.float64)
            dist.all_reduce(total)
            losses.append(float(total))
        return losses

    parallel_state.initialize_model_parallel(tensor_model_parallel_size=2, pipeline_model_parallel_size=2)
    plain = build(None)
    weights = {name: param.detach().clone() for name, param in by_global_name(plain).items()}
    plain_losses = train(plain, False)
    parallel_state.destroy_model_parallel()
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=2, pipeline_model_parallel_size=2,
                                             virtual_pipeline_model_parallel_size=2)
    chunks = build(2)
    # The 1F1B stage of this rank held other layers than its chunks: pool this TP rank's weights.
    shared = [None] * world
    dist.all_gather_object(shared, (parallel_state.get_tensor_model_parallel_rank(), weights))
    pool = {}
    for tp_rank, stage_weights in shared:
        if tp_rank == parallel_state.get_tensor_model_parallel_rank():
            pool.update(stage_weights)
    copied = by_global_name(chunks)
    with torch.no_grad():
        for name, param in copied.items():
            param.copy_(pool[name])
    interleaved_losses = train(chunks, True)
    helpers.finish_worker(rank, out_dir, {"plain": plain_losses, "interleaved": interleaved_losses,
                                          "copied": sorted(copied)})


def test_stock_interleaved_trains_as_stock_1f1b_from_the_same_weights(tmp_path):
    results = mhelpers.run_megatron_workers(_worker, 4, tmp_path)
    plain, interleaved = results["plain"], results["interleaved"]
    assert len(plain) == STEPS and plain[-1] < plain[0]
    for a, b in zip(interleaved, plain):
        assert abs(a - b) / b < 1e-6, (interleaved, plain)
    # Rank 0 (stage 0) holds layers 1 and 3 of 4 (Megatron numbers them from 1): chunk c, layer c x pp + 1.
    assert [name for name in results["copied"] if name.endswith("linear_qkv.weight")] == [
        "decoder.layers.number1.self_attention.linear_qkv.weight",
        "decoder.layers.number3.self_attention.linear_qkv.weight"]

#!/usr/bin/env python3
"""Pretrain a small Megatron-Core GPT (local spec) following a kareus plan, with kareus.megatron.

    build/tools/kareus plan --model tiny-gpt.json ...   # the .json from --write-model
    .venv/bin/torchrun --standalone --nproc-per-node 4 examples/megatron/train_gpt.py \
        --model examples/tiny-llama.json --tp 2 --pp 2 --microbatches 4 --mbs 2 --seq 64 --steps 10 \
        --kareus-plan PLAN --check --json OUT.json

A GPTModel built from the kareus model file (RMSNorm, RoPE, GQA, SwiGLU, no biases, fp32),
trained by Megatron's own schedule (``get_forward_backward_func``) on synthetic tokens with SGD.
kareus.megatron applies the plan's clock per instruction (the clock backend) and runs every
layer as the plan's partitions. --check trains the stock GPTModel again from the same seed and
compares the losses, the recorded clocks and the launch trace with the plan.
--sequence-parallel runs Megatron's sequence parallelism (its stock reference runs without: the
local spec's norms take none in stock Megatron) and --vpp N interleaved 1F1B over N model chunks
per rank; the plan must be made with the same flags.
--write-model FILE writes the model .json kareus.megatron.workload derives from the Megatron
config (for ``kareus plan --model``) and prints the plan command's workload flags; no torchrun
needed. Without a GPU it runs on gloo through cpu_shim.py (beside this file). Exits 2 for bad
input (every rank, before any collective), 1 when --check fails.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from training_support import add_training_flags, report  # noqa: E402  (examples/)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_training_flags(parser, seq=64, steps=10)
    parser.add_argument("--kareus-plan", default="", help="kareus.plan/2 (or /1) file made by `kareus plan` for this workload")
    parser.add_argument("--write-model", default="", help="write the workload's model .json here and exit")
    parser.add_argument("--cpu", action="store_true", help="run on CPU with gloo (the default without a GPU)")
    parser.add_argument("--sequence-parallel", action="store_true",
                        help="Megatron's sequence parallelism (the plan must be made with it too)")
    parser.add_argument("--vpp", type=int, default=1,
                        help="virtual pipeline stages (model chunks) per rank: Megatron's interleaved 1F1B")
    return parser.parse_args(argv)


def megatron_config(model: dict, args, layers_per_stage, sequence_parallel=None):
    """The TransformerConfig of the kareus model file under the flags (``sequence_parallel``
    overrides --sequence-parallel: the stock reference of an SP run on the local spec runs without)."""
    import torch
    import torch.nn.functional as F
    from megatron.core.transformer.transformer_config import TransformerConfig

    split = {}
    if layers_per_stage:
        split = {"num_layers_in_first_pipeline_stage": layers_per_stage[0]}
        if len(layers_per_stage) > 1:
            split["num_layers_in_last_pipeline_stage"] = layers_per_stage[-1]
    recompute = {}
    if args.recompute == "full":
        recompute = {"recompute_granularity": "full", "recompute_method": "uniform", "recompute_num_layers": 1}
    swiglu = model["mlp"] == "swiglu"
    return TransformerConfig(
        num_layers=model["layers"], hidden_size=model["hidden"], num_attention_heads=model["heads"],
        num_query_groups=model["kv_groups"], kv_channels=model["head_dim"], ffn_hidden_size=model["ffn"],
        normalization="RMSNorm", layernorm_epsilon=model["norm_eps"], gated_linear_unit=swiglu,
        activation_func=F.silu if swiglu else F.gelu, qk_layernorm=model["qk_norm"], add_bias_linear=False,
        hidden_dropout=0.0, attention_dropout=0.0, bias_activation_fusion=False, bias_dropout_fusion=False,
        masked_softmax_fusion=False, gradient_accumulation_fusion=False, persist_layer_norm=False,
        use_cpu_initialization=True, params_dtype=torch.float32, pipeline_dtype=torch.float32,
        tensor_model_parallel_size=args.tp, pipeline_model_parallel_size=args.pp,
        context_parallel_size=args.cp, sequence_parallel=args.sequence_parallel if sequence_parallel is None
        else sequence_parallel, virtual_pipeline_model_parallel_size=args.vpp if args.vpp > 1 else None,
        **interleaving_p2p(args.vpp), **split, **recompute)


def interleaving_p2p(vpp: int) -> dict:
    """Megatron's point-to-point settings for interleaving. Batched P2P (the config's default) posts
    send-to-previous before send-to-next; at PP 2 both go to the one other rank, whose receives come
    in the other order, so an activation lands in a gradient's buffer and back (megatron-core
    0.16.1, gloo: stock interleaved training then diverges from stock 1F1B on the same weights).
    Unbatched P2P orders each pair's sends and receives by rank parity, as Megatron-LM's own
    interleaved runs do (overlap_p2p_comm)."""
    return {"batch_p2p_comm": False} if vpp > 1 else {}


def main(argv) -> int:
    args = parse_args(argv)
    import torch
    import torch.distributed as dist

    import kareus
    import kareus.megatron as km
    from kareus import _runtime

    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    cpu = args.cpu or not torch.cuda.is_available()
    # Everything a user can get wrong is checked here, on every rank, before any collective.
    try:
        model = _runtime.load_model(args.model)
        layers = [int(v) for v in args.layers_per_stage.split(",")] if args.layers_per_stage else []
        config = megatron_config(model, args, layers)
        workload = km.workload(config, vocab_size=model["vocab"], seq_length=args.seq, micro_batch_size=args.mbs,
                               num_microbatches=args.microbatches, data_parallel_size=args.dp,
                               share_embeddings_and_output_weights=model["tied_embeddings"],
                               **km.gpt_model_rope_args(model), name=model["name"])
        if args.write_model:
            workload.write_model(args.write_model)
            print(f"wrote {args.write_model}; plan it with: kareus plan --model {args.write_model} "
                  f"{' '.join(workload.plan_flags())} --out DIR")
            return 0
        if not args.kareus_plan:
            raise kareus.InputError("--kareus-plan is required (or --write-model)")
        ranks = args.tp * args.cp * args.pp * args.dp
        if world != ranks:
            raise kareus.InputError(f"--tp {args.tp} x --cp {args.cp} x --pp {args.pp} x --dp {args.dp} = {ranks} "
                                    f"ranks, but torchrun started {world}")
        job = km.MegatronJob(args.kareus_plan, config, workload, rank=rank, device_id=local_rank,
                             clock_backend=args.clock_backend, gpu=args.gpu, trace=args.check)
    except ValueError as error:  # kareus.InputError is a ValueError
        print(f"error: rank {rank}: {error}", file=sys.stderr)
        return 2

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import cpu_shim

    if cpu:
        torch.set_num_threads(1)
        dist.init_process_group("gloo", rank=rank, world_size=world)
        cpu_shim.install()
    else:
        torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl", rank=rank, world_size=world)
        if args.sequence_parallel:  # the local spec's torch norms, marked as TransformerEngine's are
            cpu_shim.allow_sequence_parallel_norms()
    from megatron.core import __version__ as megatron_version
    from megatron.core import parallel_state
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.pipeline_parallel.schedules import get_forward_backward_func

    from kareus.torch import describe_groups, synthetic_batch

    vpp = args.vpp if args.vpp > 1 else None
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=args.tp,
                                             pipeline_model_parallel_size=args.pp, context_parallel_size=args.cp,
                                             virtual_pipeline_model_parallel_size=vpp)
    first, last = parallel_state.is_pipeline_first_stage(), parallel_state.is_pipeline_last_stage()
    device = torch.device("cpu") if cpu else torch.device("cuda", local_rank)

    def build(chunk_config):
        """This rank's model chunks (one without interleaving), as Megatron builds them."""
        torch.manual_seed(args.seed)
        chunks = []
        for vp_stage in range(args.vpp) if vpp else [None]:
            chunks.append(GPTModel(
                config=chunk_config, transformer_layer_spec=get_gpt_layer_local_spec(
                    normalization="RMSNorm", qk_layernorm=model["qk_norm"]),
                vocab_size=model["vocab"], max_sequence_length=args.seq,
                pre_process=parallel_state.is_pipeline_first_stage(ignore_virtual=False, vp_stage=vp_stage),
                post_process=parallel_state.is_pipeline_last_stage(ignore_virtual=False, vp_stage=vp_stage),
                share_embeddings_and_output_weights=model["tied_embeddings"], position_embedding_type="rope",
                vp_stage=vp_stage, **km.gpt_model_rope_args(model)).to(device))
        return chunks

    def finalize_grads(chunks):
        """What Megatron's finalize step does for this job: the DP mean, the sequence-parallel norms'
        sum over TP (each rank's covers its tokens) and the tied embedding's sum over its copies."""
        params = [p for chunk in chunks for p in chunk.parameters() if p.grad is not None]
        for param in params:
            if args.dp > 1:
                dist.all_reduce(param.grad, group=parallel_state.get_data_parallel_group())
                param.grad /= args.dp
            if getattr(param, "sequence_parallel", False):
                dist.all_reduce(param.grad, group=parallel_state.get_tensor_model_parallel_group())
        if model["tied_embeddings"] and args.pp > 1:
            for chunk in chunks:
                if chunk.pre_process or chunk.post_process:
                    shared = chunk.shared_embedding_or_output_weight()
                    dist.all_reduce(shared.grad, group=parallel_state.get_embedding_group())

    def train(chunks, forward_backward, after_step=None):
        optimizer = torch.optim.SGD([p for chunk in chunks for p in chunk.parameters()], lr=args.lr)
        losses = []
        for step in range(args.steps):
            tokens, labels = synthetic_batch(model["vocab"], args.microbatches, args.mbs, args.seq,
                                             step * args.dp + parallel_state.get_data_parallel_rank(), args.seed)
            # Interleaved: each chunk reads the step's microbatches from an iterator of its own.
            batches = [iter(list(zip(tokens, labels))) for _ in chunks]
            optimizer.zero_grad(set_to_none=True)
            stored = forward_backward(forward_step_func=forward_step,
                                      data_iterator=batches if vpp else batches[0],
                                      model=chunks if vpp else chunks[0], num_microbatches=args.microbatches,
                                      seq_length=args.seq, micro_batch_size=args.mbs, forward_only=False)
            finalize_grads(chunks)
            optimizer.step()
            local = sum(float(entry["loss"]) for entry in stored) / args.microbatches if stored else 0.0
            total = torch.tensor([local / args.dp if last and parallel_state.get_tensor_model_parallel_rank() == 0
                                  else 0.0], dtype=torch.float64)
            dist.all_reduce(total)
            losses.append(float(total.item()))
            if after_step is not None:
                after_step(step)
        return losses

    def forward_step(batches, gpt):
        tokens, labels = (t.to(device) for t in next(batches))
        positions = torch.arange(args.seq, device=device).unsqueeze(0).expand_as(tokens)
        output = gpt(tokens, positions, None, labels=labels)

        def loss_func(per_token):
            loss = per_token.float().sum() / per_token.numel()
            return loss, {"loss": loss.detach().clone()}  # Megatron divides loss in place

        return output, loss_func

    # The kareus run.
    gpt = build(config)
    job.attach(gpt if vpp else gpt[0])
    problems = []

    def check_step(step):
        if args.check:
            _, found = job.check_trace()
            problems.extend(f"step {step}: {p}" for p in found)

    start = time.perf_counter()
    losses = train(gpt, job.forward_backward(get_forward_backward_func()), check_step)
    kareus_time_s = time.perf_counter() - start
    job.pfo.flush()
    clocks_mhz = [sample.requested_mhz for sample in job.pfo.timeline() if sample.requested_mhz != 0]
    planned = [i.freq_mhz for i in job.plan.stages[job.stage]] * args.steps
    planned = [f for index, f in enumerate(planned) if index == 0 or f != planned[index - 1]]
    job.close()

    result = {"steps": args.steps, "loss": losses, "comm_groups": describe_groups(job.groups),
              "megatron_core_version": megatron_version, "kareus_time_s": kareus_time_s,
              "backend": dist.get_backend(), "rank0_clocks_mhz": clocks_mhz}
    status = 0
    if args.check:
        # The stock reference: Megatron's own SP on the local spec needs apex or TransformerEngine
        # norms, so an SP run is compared with stock Megatron without SP at the same TP (the same
        # mathematics: SP only moves where the TP collectives cut the sequence).
        reference = megatron_config(model, args, layers, sequence_parallel=False)
        reference_losses = train(build(reference), get_forward_backward_func())
        flags = torch.tensor([0 if problems else 1, 1 if clocks_mhz == planned else 0], dtype=torch.int64)
        dist.all_reduce(flags, op=dist.ReduceOp.MIN)
        max_rel = max(abs(a - b) / abs(b) for a, b in zip(losses, reference_losses))
        result.update({"reference_loss": reference_losses, "max_rel_loss_diff": max_rel,
                       "trace_matches_plan": bool(flags[0]), "clocks_match_plan": bool(flags[1]),
                       "trace_problems": problems[:5]})
        if max_rel > 1e-4 or not flags.all() or not losses[-1] < losses[0]:
            status = 1
    report(rank, args, result, ("max_rel_loss_diff", "trace_matches_plan", "clocks_match_plan"), problems)
    parallel_state.destroy_model_parallel()
    dist.destroy_process_group()
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""kareus.megatron's bookkeeping against Megatron-Core's stock training step, on CPU.

Two processes under torchrun (TP 2, PP 1, gloo; rank 0 reports), the tiny GPT of examples/tiny-llama.json (4 layers, local spec,
fp32), 4 microbatches of 2 x --seq tokens, Megatron's schedule and SGD. Measured in one run:

  stock        the stock GPTModel's step
  clock half   the same with job.forward_backward (timers stand-in + frequency optimizer,
               recorder backend), stock layers
  kareus       clock and comm half: every layer as the plan's nanobatched partitions
  hook         the clock half per instruction, alone: begin + end through InstructionTimers

The comm half's extra time per partition (kareus - stock, over the step's partitions) is an
upper bound on its bookkeeping: it also holds the cost of running each op on half the batch
(smaller GEMMs), the per-op autograd graphs and the gloo collectives' launch and join.
The partition executor's own bookkeeping is bench/torch_bookkeeping.py's.

    PYTHONPATH=build/python .venv/bin/torchrun --standalone --nproc-per-node 2 \
        bench/megatron_overhead.py [--steps 30] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "examples", "megatron"))
sys.path.insert(0, os.path.join(REPO, "python", "tests", "megatron"))

MICROBATCHES, MBS = 4, 2


def _median_step_s(step, steps: int) -> float:
    for warmup in range(3):
        step(warmup)
    samples = []
    for index in range(steps):
        start = time.perf_counter()
        step(index)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    torch.set_num_threads(1)

    import cpu_shim
    import mhelpers  # python/tests/megatron: the hand-written plan
    import torch.nn.functional as F
    from megatron.core import parallel_state
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.pipeline_parallel.schedules import get_forward_backward_func
    from megatron.core.transformer.transformer_config import TransformerConfig

    import kareus.megatron as km
    from kareus import PipelineFrequencyOptimizer
    from kareus.torch import synthetic_batch

    rank, tp = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    config = TransformerConfig(num_layers=4, hidden_size=64, num_attention_heads=4, num_query_groups=2,
                               kv_channels=16, ffn_hidden_size=128, normalization="RMSNorm", gated_linear_unit=True,
                               activation_func=F.silu, add_bias_linear=False, hidden_dropout=0.0,
                               attention_dropout=0.0, bias_activation_fusion=False, bias_dropout_fusion=False,
                               masked_softmax_fusion=False, gradient_accumulation_fusion=False,
                               persist_layer_norm=False, use_cpu_initialization=True, params_dtype=torch.float32,
                               pipeline_dtype=torch.float32, tensor_model_parallel_size=tp)
    workload = km.workload(config, vocab_size=256, seq_length=args.seq, micro_batch_size=MBS,
                           num_microbatches=MICROBATCHES)
    tmp = tempfile.mkdtemp()
    plan = mhelpers.write_job_plan(os.path.join(tmp, f"plan_{rank}.json"), workload)
    job = km.MegatronJob(plan, config, workload, rank=rank)
    dist.init_process_group("gloo")
    cpu_shim.install()
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=tp)

    def build():
        torch.manual_seed(1)
        return GPTModel(config=config, transformer_layer_spec=get_gpt_layer_local_spec(normalization="RMSNorm"),
                        vocab_size=256, max_sequence_length=args.seq, share_embeddings_and_output_weights=False)

    def forward_step(batches, model):
        tokens, labels = next(batches)
        positions = torch.arange(args.seq).unsqueeze(0).expand_as(tokens)
        output = model(tokens, positions, None, labels=labels)
        return output, lambda per_token: (per_token.sum() / per_token.numel(), {"loss": per_token.mean().detach()})

    def stepper(model, schedule):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

        def step(index):
            tokens, labels = synthetic_batch(256, MICROBATCHES, MBS, args.seq, index, 1)
            optimizer.zero_grad()
            schedule(forward_step_func=forward_step, data_iterator=iter(zip(tokens, labels)), model=model,
                     num_microbatches=MICROBATCHES, seq_length=args.seq, micro_batch_size=MBS, forward_only=False)
            optimizer.step()

        return step

    results = {"seq": args.seq, "microbatches": MICROBATCHES, "mbs": MBS}
    stock_step = stepper(build(), get_forward_backward_func())
    clock_step = stepper(build(), job.forward_backward(get_forward_backward_func()))
    kareus_model = build()
    job.attach(kareus_model)
    kareus_step = stepper(kareus_model, job.forward_backward(get_forward_backward_func()))
    # Interleave the three so that the machine's load drifts over all of them alike.
    samples = {"stock": [], "clock_half": [], "kareus": []}
    for round_index in range(3):
        for name, step in (("stock", stock_step), ("clock_half", clock_step), ("kareus", kareus_step)):
            samples[name].append(_median_step_s(step, args.steps // 3))
    for name, values in samples.items():
        results[f"{name}_step_ms"] = statistics.median(values) * 1e3
    job.close()

    # The clock half alone, per instruction (recorder backend, no Megatron timers).
    pfo = PipelineFrequencyOptimizer(plan, rank=rank, tp=tp, install_signal_handlers=False)
    timers = km.InstructionTimers(None, km.InstructionHook(pfo, rank=rank))
    order = [(i["type"], i["microbatch"]) for i in json.load(open(plan))["stages"][0]["instructions"]]
    repeats = 2000
    start = time.perf_counter()
    for _ in range(repeats):
        timers("forward-backward").start()
        for kind, _ in order:
            timer = timers(f"{kind}-compute")
            timer.start()
            timer.stop()
        timers("forward-backward").stop()
    results["hook_us_per_instruction"] = (time.perf_counter() - start) / (repeats * len(order)) * 1e6
    pfo.close()

    instructions = 2 * MICROBATCHES
    stock_ms = results["stock_step_ms"]
    results["hook_share_of_stock_step_pct"] = results["hook_us_per_instruction"] * instructions / 1e3 / stock_ms * 100
    partitions = sum(len(p) for i in job.plan.stages[0] for p in i.passes)
    results["partitions_per_step"] = partitions
    results["kareus_extra_us_per_partition"] = (results["kareus_step_ms"] - stock_ms) * 1e3 / partitions
    parallel_state.destroy_model_parallel()
    dist.destroy_process_group()
    if rank != 0:
        return
    for key, value in results.items():
        print(f"{key:34s} {value:10.3f}" if isinstance(value, float) else f"{key:34s} {value:>10}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=2)


if __name__ == "__main__":
    main()

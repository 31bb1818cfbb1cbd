#!/usr/bin/env python3
"""Time one stage of layers nanobatched (kareus.torch) against the plain serial layers, and the
TP all-reduce alone per CTA count.

    torchrun --standalone --nproc-per-node TP bench/torch_layer_time.py --model llama3.2-3b \
        --tp TP --mbs 2 --seq 4096 --layers 1 --ctas 3,6,12,24 --json OUT.json

One stage (pp 1) of --layers layers, every rank a TP rank; NCCL with one CTA-bounded group per
count on GPUs (gloo on CPU, where the counts change nothing). Per CTA count: forward + backward
(full recompute) of the nanobatched stage with every key at --slot and that count, the plain
stage, and one all-reduce of a nanobatch's activations on that count's group; median of
--repeats after --warmup, seconds. Rank 0 prints them and writes them to --json (a check of the
overlap on a real GPU beside the emulator's; kareus plans from `kareus profile` logs, docs/gpu.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

import torch
import torch.distributed as dist

import kareus
from kareus import _runtime
from kareus import torch as kt


def _sync(cuda: bool) -> None:
    if cuda:
        torch.cuda.synchronize()


def _timed(fn, cuda: bool, warmup: int, repeats: int) -> float:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeats):
        _sync(cuda)
        start = time.perf_counter()
        fn()
        _sync(cuda)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="llama3.2-3b")
    parser.add_argument("--tp", type=int, default=int(os.environ.get("WORLD_SIZE", "1")))
    parser.add_argument("--mbs", type=int, default=2)
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--layers", type=int, default=1)
    parser.add_argument("--ctas", default="3,6,12,24")
    parser.add_argument("--slot", default="first", help="slot of every key: first (its first slot) or none")
    parser.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"])
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--json", default="")
    args = parser.parse_args()

    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world != args.tp:
        raise kareus.InputError(f"--tp {args.tp} must equal the {world} ranks torchrun started (one stage)")
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if cuda else torch.device("cpu")
    dtype = torch.bfloat16 if args.dtype == "bf16" and cuda else torch.float32
    if cuda:
        torch.cuda.set_device(device)
    model = _runtime.load_model(args.model)
    model = dict(model, layers=args.layers)
    with tempfile.TemporaryDirectory() as tmp:
        model_path = os.path.join(tmp, "model.json")
        with open(model_path, "w") as handle:
            json.dump(dict(model, source="bench/torch_layer_time.py"), handle)
        workload = _runtime.Workload(model_path, tp=args.tp, pp=1, mbs=args.mbs, seq=args.seq, microbatches=1)
        counts = [int(v) for v in args.ctas.split(",")]
        sm_count = torch.cuda.get_device_properties(device).multi_processor_count if cuda else 108
        plans = {}
        for ctas in counts:
            configs = {"forward": {}, "backward": {}}
            for key in workload.searchable_keys():
                slot = workload.representative_slots(key)[0] if args.slot == "first" else "none"
                configs["forward" if key.startswith("fwd") else "backward"][key] = {"slot": slot, "ctas": ctas}
            instructions = [{"type": "forward", "microbatch": 0, "freq_mhz": 1, "partitions": configs["forward"]},
                            {"type": "backward", "microbatch": 0, "freq_mhz": 1,
                             "partitions": {**configs["forward"], **configs["backward"]}}]
            path = os.path.join(tmp, f"plan_{ctas}_{rank}.json")
            with open(path, "w") as handle:
                json.dump({"schema": "kareus.plan/1", "workload": json.loads(workload.to_json()),
                           "predicted": {"time_s": 1.0, "energy_j": 1.0},
                           "stages": [{"stage": 0, "instructions": instructions}]}, handle)
            plans[ctas] = kt.ExecutionPlan(path, workload, sm_count, ctas)

    backend = "nccl" if cuda else "gloo"
    dist.init_process_group(backend, rank=rank, world_size=world)
    groups = kt.CommGroups([list(range(world))], rank, backend)
    groups.ensure(counts)
    stage = kt.LlamaStage(model, [args.layers], 0, args.tp, rank, 1).to(device=device, dtype=dtype)
    rope = kt.Rope(model, args.seq, device, dtype)
    x = torch.randn(args.mbs, args.seq, model["hidden"], device=device, dtype=dtype)
    grad = torch.randn_like(x)

    def plain():  # full recompute too: a forward without graphs, then forward and backward
        with torch.no_grad():
            kt.reference_stack(stage.layers, rope, x, groups.plain, args.tp)
        leaf = x.detach().requires_grad_()
        kt.reference_stack(stage.layers, rope, leaf, groups.plain, args.tp).backward(grad)

    result = {"model": args.model, "tp": args.tp, "mbs": args.mbs, "seq": args.seq, "layers": args.layers,
              "dtype": str(dtype), "backend": backend, "slot": args.slot,
              "device": torch.cuda.get_device_name(device) if cuda else "cpu",
              "plain_s": _timed(plain, cuda, args.warmup, args.repeats), "per_ctas": []}
    for ctas in counts:
        runner = kt.StageRunner(stage.layers, rope, groups, args.tp, recompute=True)
        instructions = plans[ctas].stages[0]

        def nanobatched():
            runner.set_instruction(instructions[0])
            leaf = x.detach().requires_grad_()
            out = runner(leaf, 0)
            runner.set_instruction(instructions[1])
            out.backward(grad)

        activations = torch.randn(args.mbs // 2, args.seq, model["hidden"], device=device, dtype=dtype)

        def all_reduce():
            groups.wait(groups.launch(activations, ctas))

        result["per_ctas"].append({"ctas": ctas,
                                   "nanobatched_s": _timed(nanobatched, cuda, args.warmup, args.repeats),
                                   "all_reduce_s": _timed(all_reduce, cuda, args.warmup, args.repeats)})
    if rank == 0:
        print(json.dumps(result, indent=2))
        if args.json:
            with open(args.json, "w") as handle:
                json.dump(result, handle, indent=2)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""What the example training scripts share: their flags and how they report a run.

examples/train_llama.py (kareus.torch) and examples/megatron/train_gpt.py (kareus.megatron) take
the same workload flags (those of kareus plan), so one plan command line describes either run,
and write their result the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import List, Sequence


def add_training_flags(parser: argparse.ArgumentParser, seq: int, steps: int) -> None:
    """Adds --model, --tp, --pp, --dp, --cp, --microbatches, --mbs, --seq, --recompute,
    --layers-per-stage, --steps, --gpu, --clock-backend, --lr, --seed, --check and --json."""
    parser.add_argument("--model", default="examples/tiny-llama.json", help="preset name or model .json")
    parser.add_argument("--tp", type=int, default=2)
    parser.add_argument("--pp", type=int, default=2)
    parser.add_argument("--dp", type=int, default=1)
    parser.add_argument("--cp", type=int, default=1)
    parser.add_argument("--microbatches", type=int, default=4)
    parser.add_argument("--mbs", type=int, default=2)
    parser.add_argument("--seq", type=int, default=seq)
    parser.add_argument("--recompute", default="full", choices=["full", "none"])
    parser.add_argument("--layers-per-stage", default="", help="e.g. 3,1 (default: even split)")
    parser.add_argument("--steps", type=int, default=steps)
    parser.add_argument("--gpu", default="a100-40gb", help="GPU preset or .json: SM count to check CTA counts "
                        "against without a GPU, and the trail partitions' default CTA count")
    parser.add_argument("--clock-backend", default="recorder", help="PipelineFrequencyOptimizer clock backend")
    parser.add_argument("--lr", type=float, default=0.2, help="SGD learning rate")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--check", action="store_true", help="also train without kareus and compare")
    parser.add_argument("--json", default="", help="write the result JSON here (rank 0)")


def report(rank: int, args, result: dict, summary_keys: Sequence[str], problems: List[str]) -> None:
    """Rank 0 writes ``result`` to --json (atomically) and prints the loss curve's ends and the
    ``summary_keys``; a rank whose trace differs from the plan says so on stderr."""
    if rank == 0:
        text = json.dumps(result, indent=2)
        if args.json:
            with open(args.json + ".tmp", "w", encoding="utf-8") as handle:
                handle.write(text + "\n")
            os.replace(args.json + ".tmp", args.json)
        losses = result["loss"]
        summary = {k: result[k] for k in summary_keys if k in result}
        print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f} in {args.steps} steps ({result['kareus_time_s']:.1f} s) "
              f"{summary}")
    if problems:
        print(f"rank {rank}: trace does not match the plan: {problems[0]}", file=sys.stderr)

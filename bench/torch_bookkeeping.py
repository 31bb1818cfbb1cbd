#!/usr/bin/env python3
"""Per-partition bookkeeping of kareus.torch's StageRunner, in microseconds.

Runs the forward and backward passes of one stage of llama3.2-3b (TP 8, PP 2: 14 layers, 58
forward and 58 backward partitions per instruction, from the C++ builder) with the compute ops
replaced by functions that return ready tensors, so what is timed is the engine itself: per
partition the loop, the slot check, the tensor lookups and stores of its ops, the collective's
lookup, enqueue and wait. Three variants:

  engine      collectives stubbed (enqueue returns a finished handle): the engine's own cost
  traced      the same with the launch trace recording (what --check does)
  gloo        real async all-reduces of a 1-element tensor on a 1-rank gloo group per CTA count
              (adds torch.distributed's launch and wait on CPU)

    PYTHONPATH=build/python .venv/bin/python bench/torch_bookkeeping.py [--repeats 200] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import tempfile
import time

import torch
import torch.distributed as dist

from kareus._runtime import Workload
from kareus.torch import engine as engine_module
from kareus.torch.comm import CommGroups, LaunchTrace
from kareus.torch.engine import StageRunner
from kareus.torch.layer import OPS, OpSpec
from kareus.torch.plan import ExecutionPlan


class _Done:
    def wait(self) -> None:
        pass


class _StubGroups(CommGroups):
    def __init__(self) -> None:  # no process groups
        self.plain = None
        self.bounded = {}

    def launch(self, tensor, ctas, family="tp"):
        return _Done()


def _ready_ops():
    token = torch.zeros(1)
    specs = {}
    for name, spec in OPS.items():
        outputs = tuple(token for _ in spec.outputs)
        specs[name] = OpSpec(spec.inputs, spec.outputs, spec.params, lambda layer, rope, *inputs, o=outputs: o)
    return specs


def _write_plan(path: str, workload: Workload) -> None:
    forward = {"fwd_attn": {"slot": "rope_0", "ctas": 12}, "fwd_mlp": {"slot": "linear_0", "ctas": 6}}
    backward = {"bwd_attn": {"slot": "attn_0", "ctas": 9}, "bwd_mlp": {"slot": "none", "ctas": 3}}
    stages = []
    for stage in range(2):
        instructions = [{"type": "forward", "microbatch": 0, "freq_mhz": 1410, "partitions": forward},
                        {"type": "backward", "microbatch": 0, "freq_mhz": 1410, "partitions": backward}]
        stages.append({"stage": stage, "instructions": instructions})
    with open(path, "w") as handle:
        json.dump({"schema": "kareus.plan/1", "workload": json.loads(workload.to_json()),
                   "predicted": {"time_s": 1.0, "energy_j": 1.0}, "stages": stages}, handle)


def _measure(runner: StageRunner, forward, backward, repeats: int) -> float:
    """Microseconds per partition over forward + backward passes (median of repeats)."""
    token = torch.zeros(1)
    samples = []
    for _ in range(repeats):
        states = [{("h", 0): token}, {("h", 0): token}]
        start = time.perf_counter()
        runner._forward_pass(forward, states, None)
        graphs = [{}, {}]
        runner._forward_pass(forward, [{("h", 0): token}, {("h", 0): token}], graphs)
        mid = time.perf_counter()
        grads = [{("h", len(runner.layers)): token}, {("h", len(runner.layers)): token}]
        runner._backward_pass(backward, grads, graphs, [None] * len(runner.params))
        end = time.perf_counter()
        runner.trace.clear()
        samples.append(((mid - start) / 2 / len(forward) + (end - mid) / len(backward)) / 2)
    return statistics.median(samples) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    torch.set_num_threads(1)
    workload = Workload("llama3.2-3b", tp=8, pp=2, mbs=8, seq=4096, microbatches=1, recompute="none")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "plan.json")
        _write_plan(path, workload)
        plan = ExecutionPlan(path, workload, sm_count=108, default_comm_ctas=16)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    engine_module.OPS = _ready_ops()
    # Backward ops run torch.autograd.grad on their per-op graph; with ready tensors there is no
    # graph, so time the backward's bookkeeping with a stand-in that does the same lookups.
    layers = [torch.nn.Module() for _ in range(workload.stage_layers[0])]
    forward, backward = plan.stages[0][0].passes[0], plan.stages[0][1].passes[0]

    def backward_lookups(self, op, layer_index, grads, graph, param_grads):
        spec = engine_module.OPS[op[:-4]]
        graph.pop((op[:-4], layer_index), None)
        for name, offset in spec.outputs:
            grads.pop((name, layer_index + offset), None)
        for name in spec.inputs:
            key = (name, layer_index)
            previous = grads.get(key)
            grads[key] = self._token if previous is None else previous

    StageRunner._token = torch.zeros(1)
    StageRunner._run_op_backward = backward_lookups
    results = {"partitions_per_pass": len(forward)}
    for variant in ("engine", "traced", "gloo"):
        if variant == "gloo":
            groups = CommGroups([[0]], 0, "gloo")  # rank 0 of a one-rank world
            groups.ensure(plan.distinct_ctas())
        else:
            groups = _StubGroups()
        runner = StageRunner(layers, None, groups, 8, recompute=False, trace=LaunchTrace(enabled=variant == "traced"))
        _measure(runner, forward, backward, 10)
        results[f"{variant}_us_per_partition"] = _measure(runner, forward, backward, args.repeats)
    dist.destroy_process_group()
    print(f"{results['partitions_per_pass']} partitions per pass (llama3.2-3b TP 8 PP 2, stage 0)")
    for variant in ("engine", "traced", "gloo"):
        print(f"{variant:8s} {results[f'{variant}_us_per_partition']:8.2f} us per partition")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=2)


if __name__ == "__main__":
    main()

"""Shared helpers of the kareus.torch tests: hand-made plans and a gloo process launcher."""

from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import sys
from typing import Dict, List

REPO = pathlib.Path(__file__).resolve().parents[3]
TINY_MODEL = str(REPO / "examples" / "tiny-llama.json")


def write_plan(path, stages: int, microbatches: int, configs: Dict[str, Dict[str, dict]], recompute: bool,
               workload: dict = None) -> str:
    """A kareus.plan/1 file whose every forward gets configs["forward"] and every backward
    configs["backward"] (plus the forward keys under full recompute); its workload block is
    ``workload`` (a hand-made plan's {} by default)."""
    from kareus import one_f_one_b

    document = {"schema": "kareus.plan/1", "workload": workload or {}, "predicted": {"time_s": 1.0, "energy_j": 1.0},
                "stages": []}
    for stage in range(stages):
        instructions = []
        for kind, microbatch in one_f_one_b(stage, stages, microbatches):
            partitions = dict(configs.get(kind, {}))
            if kind == "backward" and recompute:
                partitions.update(configs.get("recompute", configs.get("forward", {})))
            instructions.append({"type": kind, "microbatch": microbatch, "freq_mhz": 1200 + 30 * microbatch,
                                 "partitions": partitions})
        document["stages"].append({"stage": stage, "instructions": instructions})
    pathlib.Path(path).write_text(json.dumps(document))
    return str(path)


def slot_cases(workload, collectives=None) -> List[tuple]:
    """(key, slot) for every slot (and none) of every searchable key of stage 0 with a
    collective (only those named in ``collectives``, when given)."""
    cases = []
    for direction in ("forward", "backward"):
        slots = {}
        for partition in workload.partitions(0, direction):
            collective = partition["collective"]
            if collective is None or not partition["searchable"]:
                continue
            if collectives is None or collective["name"] in collectives:
                names = slots.setdefault(partition["key"], [])
                names += [s["name"] for s in partition["slots"] if s["name"] not in names]
        for key, names in slots.items():
            cases += [(key, slot) for slot in names + ["none"]]
    return cases


def first_slots(workload) -> Dict[str, str]:
    """Each searchable key's first slot (stage 0)."""
    first: Dict[str, str] = {}
    for key, slot in slot_cases(workload):
        first.setdefault(key, slot)
    return first


def plan_configs(choices: Dict[str, tuple]) -> Dict[str, Dict[str, dict]]:
    """write_plan's configs from {key: (slot, ctas)}: fwd_* keys go to the forwards, the others
    to the backwards."""
    configs: Dict[str, Dict[str, dict]] = {"forward": {}, "backward": {}}
    for key, (slot, ctas) in choices.items():
        configs["forward" if key.startswith("fwd") else "backward"][key] = {"slot": slot, "ctas": ctas}
    return configs


def case_configs(workload, collectives=None, ctas_cycle: int = 4):
    """(key, slot, configs) per case of slot_cases(workload, collectives): the case's key at its
    slot (on 3, 6, ... CTAs in turn, ``ctas_cycle`` counts), every other key at its first slot on
    3 CTAs."""
    first = first_slots(workload)
    for index, (key, slot) in enumerate(slot_cases(workload, collectives)):
        choices = {other: (other_slot, 3) for other, other_slot in first.items()}
        choices[key] = (slot, 3 + 3 * (index % ctas_cycle))
        yield key, slot, plan_configs(choices)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def spawn(fn, world: int, *args) -> None:
    """Runs fn(rank, world, port, *args) on `world` gloo processes; raises if any fails."""
    import torch.multiprocessing as mp

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    mp.spawn(fn, args=(world, free_port()) + args, nprocs=world, join=True)


def init_gloo(rank: int, world: int, port: int) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)


def kareus_binary() -> pathlib.Path:
    build = pathlib.Path(os.environ.get("KAREUS_BUILD_DIR", REPO / "build"))
    return build / "tools" / "kareus"


def python_env() -> dict:
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env


def each_rank_alone(command, ranks: int, timeout_s: float = 300, at_once: int = 2) -> List[tuple]:
    """(returncode, stdout, stderr) of every rank of a ``ranks``-rank job run alone, as torchrun
    would start it (not under torchrun, which stops the other ranks as soon as one exits, so how
    many report would depend on the machine's load), each with a rendezvous port of its own that
    no other rank joins: a rank that reached init_process_group before refusing would wait there
    and fail the test at ``timeout_s``. ``at_once`` ranks at a time (this machine's cores), so a
    loaded machine only makes it slower."""
    results = []
    for first in range(0, ranks, at_once):
        wave = []
        for rank in range(first, min(first + at_once, ranks)):
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                port = probe.getsockname()[1]
            env = dict(python_env(), RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(ranks),
                       MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
            wave.append(subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                         env=env, cwd=REPO))
        for offset, process in enumerate(wave):
            try:
                stdout, stderr = process.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                for running in wave:
                    running.kill()
                raise AssertionError(f"rank {first + offset} did not refuse before its rendezvous (still running "
                                     f"after {timeout_s} s)") from None
            results.append((process.returncode, stdout, stderr))
    return results


def relative(a, b) -> float:
    """max |a - b| over max |b| (or over 1 when b is all zero)."""
    scale = b.abs().max().item()
    return (a - b).abs().max().item() / (scale if scale > 0 else 1.0)


def seeded_inputs(mbs: int, seq: int) -> tuple:
    """The stage input and output gradient [mbs, seq, 64] of the tiny model's tests (seeds 5 and 6)."""
    import torch

    x = torch.randn(mbs, seq, 64, generator=torch.Generator().manual_seed(5))
    grad = torch.randn(mbs, seq, 64, generator=torch.Generator().manual_seed(6))
    return x, grad


def run_under_plan(kt, stage, rope, groups, tp, recompute, plan, x_run, grad, sequence_parallel=False) -> tuple:
    """One forward of ``x_run`` (a leaf that requires grad) and backward of ``grad`` through ``stage``
    by StageRunner under the plan's first stage's two instructions: the launch trace and the output."""
    trace = kt.LaunchTrace()
    runner = kt.StageRunner(stage.layers, rope, groups, tp, recompute, trace, sequence_parallel=sequence_parallel)
    runner.set_instruction(plan.stages[0][0])
    y = runner(x_run, 0)
    runner.set_instruction(plan.stages[0][1])
    y.backward(grad)
    return trace, y


def run_against_reference(kt, stage, reference, rope, groups, tp, recompute, plan, x, grad, y_ref, x_ref):
    """One forward and backward of ``stage`` through StageRunner under the plan's first stage's two
    instructions: the launch trace, and the relative errors of the output, the input gradient and
    every parameter gradient against the reference run's (y_ref, x_ref.grad, reference's grads)."""
    x_run = x.clone().requires_grad_()
    trace, y = run_under_plan(kt, stage, rope, groups, tp, recompute, plan, x_run, grad)
    errors = {"output": relative(y, y_ref), "input_grad": relative(x_run.grad, x_ref.grad)}
    for (name, mine), (_, theirs) in zip(stage.layers.named_parameters(), reference.layers.named_parameters()):
        errors[name] = relative(mine.grad, theirs.grad)
    return trace, errors


def start_tp_cp_test(rank: int, world: int, port: int, tp: int, cp: int, seq: int, mbs: int) -> tuple:
    """What the TP x CP workers start from: gloo, this rank's TP and CP ranks, kareus's comm groups
    (TP and CP), the RoPE tables of the whole sequence (the reference's) and of this CP rank's
    part, and seeded_inputs over the whole sequence."""
    import torch

    from kareus import torch as kt
    from kareus._runtime import load_model, map_rank

    init_gloo(rank, world, port)
    where = map_rank(rank, tp=tp, cp=cp)
    tp_rank, cp_rank = where["tp_rank"], where["cp_rank"]
    groups = kt.CommGroups(kt.tp_groups(tp, 1, 1, cp), rank, "gloo", kt.cp_groups(tp, 1, 1, cp))
    cpu = torch.device("cpu")
    model = load_model(TINY_MODEL)
    full_rope = kt.Rope(model, seq, cpu, torch.float32)
    rope = kt.Rope(model, seq, cpu, torch.float32, cp, cp_rank)
    return (tp_rank, cp_rank, groups, full_rope, rope) + seeded_inputs(mbs, seq)


# The norm weights whose gradients SP leaves partial on each TP rank (it runs the norms on the
# rank's part of the sequence alone).
SP_NORMS = ("input_norm", "mlp_norm")


class ShardedStage:
    """Stage 0 of ``workload`` run on this rank's part of the sequence, against the plain TP layer
    over the whole sequence (neither SP nor CP, on ``full_rope``), which cannot share a mistake
    with the SP or CP code. ``positions``: the rank's positions of the whole sequence, which
    ``shard`` cuts out of a [batch, seq, ...] tensor (indexing at them by default); ``cp``: the
    stage runs CP on groups.plain_cp; ``sequence_parallel``: it runs SP."""

    def __init__(self, kt, workload, tp_rank, groups, full_rope, rope, x, grad, positions, shard=None, cp=False,
                 sequence_parallel=False):
        self.kt, self.workload, self.tp_rank, self.groups, self.rope = kt, workload, tp_rank, groups, rope
        self.tp, self.recompute = workload.parallel["tp"], workload.recompute == "full"
        self.x, self.grad, self.positions = x, grad, positions
        self.shard = shard or (lambda tensor: tensor[:, positions])
        self.cp_group = groups.plain_cp if cp else None
        self.sequence_parallel = sequence_parallel
        self.reference = self.stage(sequence_parallel=False)
        self.x_ref = x.clone().requires_grad_()
        self.y_ref = kt.reference_stack(self.reference.layers, full_rope, self.x_ref, groups.plain, self.tp)
        self.y_ref.backward(grad)

    def stage(self, sequence_parallel: bool):
        return self.kt.LlamaStage(self.workload.model, list(self.workload.stage_layers), 0, self.tp, self.tp_rank, 3,
                                  sequence_parallel=sequence_parallel)

    def errors(self, stage, x_run, y) -> dict:
        """Relative errors against the reference: the output and input gradient at the rank's
        positions; each parameter gradient summed over CP first (a CP rank's covers its part of
        the sequence only) and, under SP, each norm weight's over TP too."""
        import torch.distributed as dist

        errors = {"output": relative(y, self.y_ref[:, self.positions]),
                  "input_grad": relative(x_run.grad, self.x_ref.grad[:, self.positions])}
        for (name, mine), (_, theirs) in zip(stage.layers.named_parameters(), self.reference.layers.named_parameters()):
            summed = mine.grad.clone()
            if self.cp_group is not None:
                dist.all_reduce(summed, group=self.cp_group)
            if self.sequence_parallel and name.split(".")[-1] in SP_NORMS:
                dist.all_reduce(summed, group=self.groups.plain)
            errors[name] = relative(summed, theirs.grad)
        return errors

    def plain(self) -> dict:
        """The errors of the plain (not nanobatched) sharded layer: reference_stack under CP and SP."""
        stage = self.stage(self.sequence_parallel)
        x_run = self.shard(self.x).clone().requires_grad_()
        y = self.kt.reference_stack(stage.layers, self.rope, x_run, self.groups.plain, self.tp, self.cp_group,
                                    sequence_parallel=self.sequence_parallel)
        y.backward(self.shard(self.grad))
        return self.errors(stage, x_run, y)

    def cases(self, plan_path: str, collectives=None) -> List[dict]:
        """The nanobatched stage under each case of case_configs(workload, collectives) (2 CTA
        counts): key, slot, recompute, trace_ok and problems (the launch trace against the plan),
        the collectives it enqueued, and its errors."""
        kt = self.kt
        made = {"sequence_parallel": True} if self.sequence_parallel else None
        cases = []
        for key, slot, configs in case_configs(self.workload, collectives, ctas_cycle=2):
            plan = kt.ExecutionPlan(write_plan(plan_path, 1, 1, configs, self.recompute, made), self.workload, 108, 16)
            self.groups.ensure(plan.distinct_ctas())
            stage = self.stage(self.sequence_parallel)
            x_run = self.shard(self.x).clone().requires_grad_()
            trace, y = run_under_plan(kt, stage, self.rope, self.groups, self.tp, self.recompute, plan, x_run,
                                      self.shard(self.grad), self.sequence_parallel)
            ok, problems = kt.check_trace(trace.events, plan, 0, self.recompute)
            cases.append({"key": key, "slot": slot, "recompute": self.recompute, "trace_ok": ok, "problems": problems,
                          "collectives": sorted({e[2] for e in trace.events if e[0] == "enqueue"}),
                          "errors": self.errors(stage, x_run, y)})
        return cases


def finish_worker(rank: int, out_dir: str, results: dict) -> None:
    """Rank 0 writes ``results`` to out_dir/results.json; then every rank leaves the process group."""
    import torch.distributed as dist

    if rank == 0:
        with open(f"{out_dir}/results.json", "w") as handle:
            json.dump(results, handle)
    dist.barrier()
    dist.destroy_process_group()


def run_workers(fn, world: int, out: pathlib.Path, *args) -> dict:
    """Spawns fn(rank, world, port, str(out), *args) and returns the results.json it wrote."""
    spawn(fn, world, str(out), *args)
    return json.loads((out / "results.json").read_text())


def check_case(case, tolerance: float) -> None:
    """One slot case: every compared tensor within ``tolerance``, the launch trace the plan's."""
    worst = max(case["errors"], key=case["errors"].get)
    assert case["errors"][worst] < tolerance, (case["key"], case["slot"], case["recompute"], worst,
                                               case["errors"][worst])
    assert case["trace_ok"], case["problems"]


def check_slot_cases(cases, tolerance: float, errors_per_case: int) -> None:
    """Asserts the per-slot cases of a layer test (case_configs, recompute and not): every slot
    of the tiny model's four keys (fwd_attn 5, fwd_mlp 4, bwd_mlp 5, bwd_attn 5 slots, each + none:
    23 per recompute setting), each within ``tolerance`` on its ``errors_per_case`` compared
    tensors, with a launch trace matching the plan."""
    assert len(cases) == 2 * 23
    assert {(c["key"], c["slot"]) for c in cases} >= {("fwd_attn", "rope_0"), ("bwd_attn", "attn_0"),
                                                      ("fwd_mlp", "none"), ("bwd_mlp", "elementwise_0")}
    for case in cases:
        check_case(case, tolerance)
        assert len(case["errors"]) == errors_per_case


def check_sharded_cases(cases, tolerance: float, collectives, at_least: bool = False) -> None:
    """Asserts ShardedStage's cases: each within ``tolerance`` on every compared tensor, with a
    launch trace matching the plan, having enqueued ``collectives`` (at least those, when
    ``at_least``: the TP ones may run beside them)."""
    for case in cases:
        check_case(case, tolerance)
        enqueued = set(case["collectives"])
        matches = enqueued >= collectives if at_least else enqueued == collectives
        assert matches, case["collectives"]

"""The comm half of a kareus.plan/1 plan, resolved against the C++ partition builder (no torch).

``ExecutionPlan`` reads a plan file with the C++ reader (``kareus._runtime.read_plan``: schema,
fields, 1F1B order), checks it is for the job's workload (``check_plan_workload``: model shape,
parallel sizes, mbs, seq, microbatches, nanobatches, recompute, layer split, GPU) and that it fits
(``check_plan_fits``, the C++ plan check of plan/plan_fit.h: partition keys, launch slots, CTA
counts, and clocks the GPU has), before any collective runs. Every rank reads the same file and
runs the same checks, so a wrong plan fails on every rank with the same ``InputError`` and nothing
hangs.

Partitions, their keys, slots and collectives, and the config each of them runs with (the
fallbacks for trails and for instances lacking the planned slot) come from
``kareus._runtime.Workload`` (``partitions``, ``comm_configs``, ``instruction_passes``); this module
only arranges them per instruction for an executor (kareus.torch, kareus.megatron).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from kareus._runtime import (
    SLOT_NONE,
    CommConfig,
    InputError,
    Workload,
    check_plan_fits,
    check_plan_workload,
    read_plan,
)

__all__ = ["ExecutionPlan", "InstructionPlan", "PlannedPartition", "slot_launch_index"]


@dataclass
class PlannedPartition:
    """One partition of an instruction, as the C++ builder made it, with its planned knobs.

    launch_index: index into ``ops`` of the op the collective is enqueued just before;
    len(ops) for slot ``none`` (after all compute). None when the partition has no collective.
    """

    key: str
    nanobatch: int
    layer: int
    ops: List[Tuple[str, int]]  # (op name, layer)
    collective: Optional[Tuple[str, int, int]]  # (collective name, nanobatch, layer)
    slots: List[Tuple[str, int]]  # (slot name, first op)
    choice: Optional[CommConfig] = None
    launch_index: Optional[int] = None


@dataclass
class InstructionPlan:
    """One planned instruction of one stage."""

    type: str  # "forward" | "backward"
    microbatch: int
    freq_mhz: int
    nanobatched: bool
    chunk: int = 0  # the model chunk (virtual pipeline stage) it runs; 0 without interleaving
    choices: Dict[str, CommConfig] = field(default_factory=dict)  # the plan's configs by key
    # Execution order of partitions: for a backward with full recompute, the recompute forward
    # partitions then the backward ones.
    passes: List[List[PlannedPartition]] = field(default_factory=list)
    # A nanobatched backward whose forward kept no per-op graphs (full recompute, or a forward
    # that ran plain) reruns these forward partitions first: the plan's fwd_* configs under full
    # recompute, else each collective after the compute on the plain group (ctas 0).
    recompute_pass: List[PlannedPartition] = field(default_factory=list)


class ExecutionPlan:
    """A plan file checked against a workload.

    Args:
        path: the kareus.plan/1 file.
        workload: the ``kareus._runtime.Workload`` the job runs (nanobatches 2).
        sm_count: SMs of the GPU; every CTA count must lie in 1..sm_count.
        default_comm_ctas: CTAs of the trail partitions, which plans do not list (the GPU's
            default, as the planner runs them).
        gpu: the GPU preset's name; when given, the plan must have been made for it and every
            clock must be one of its clocks (without it clocks are not checked here; the
            runtime checks them against the GPU it drives).

    Raises InputError (a ValueError) naming the file and what is wrong.
    """

    def __init__(self, path: str, workload: Workload, sm_count: int, default_comm_ctas: int, gpu: str = "") -> None:
        self.path = str(path)
        self.workload = workload
        plan = read_plan(self.path)
        self.sequence_parallel = bool(workload.parallel["sequence_parallel"])
        self.vpp = int(workload.parallel["vpp"])
        _check_sequence_parallel(plan, self.sequence_parallel, self.path)
        check_plan_workload(plan, workload, gpu, self.path)
        check_plan_fits(plan, workload, self.path, gpu=gpu, max_ctas=sm_count, default_ctas=default_comm_ctas)
        _check_no_token_nanobatches(plan, workload, self.path)

        # Each model chunk's instruction runs the partitions of its own virtual stage.
        chunks = chunk_stages(workload)
        pp = int(workload.parallel["pp"])
        built_of: Dict[int, Dict[str, List[PlannedPartition]]] = {}

        def built(virtual: int) -> Dict[str, List[PlannedPartition]]:
            if virtual not in built_of:
                built_of[virtual] = {direction: [_planned(p) for p in chunks.partitions(virtual, direction)]
                                     for direction in ("forward", "backward")}
            return built_of[virtual]

        self.stages: List[List[InstructionPlan]] = []
        for stage, instructions in enumerate(plan.stages):
            planned: List[InstructionPlan] = []
            for entry in instructions:
                virtual = entry.chunk * pp + stage
                instruction = InstructionPlan(entry.type, entry.microbatch, entry.freq_mhz,
                                              entry.overlap == "nanobatch", entry.chunk)
                if instruction.nanobatched:
                    instruction.choices = dict(entry.partitions)
                    for direction in workload.instruction_passes(entry.type):
                        resolved = chunks.comm_configs(virtual, direction, instruction.choices, default_comm_ctas)
                        instruction.passes.append(
                            [_with_choice(p, choice) for p, choice in zip(built(virtual)[direction], resolved)])
                    if entry.type == "backward":
                        instruction.recompute_pass = (
                            instruction.passes[0]
                            if len(instruction.passes) == 2
                            else [_with_choice(p, CommConfig(SLOT_NONE, 0) if p.collective else None)
                                  for p in built(virtual)["forward"]]
                        )
                planned.append(instruction)
            self.stages.append(planned)

    def distinct_ctas(self) -> List[int]:
        """Every CTA count any nanobatched instruction of any stage uses, ascending (the order
        every rank creates its CTA-bounded process groups in)."""
        counts = set()
        for stage in self.stages:
            for instruction in stage:
                for partitions in instruction.passes:
                    counts.update(p.choice.ctas for p in partitions if p.choice is not None)
        return sorted(counts)


def chunk_stages(workload: Workload) -> Workload:
    """``workload`` with every model chunk a pipeline stage of its own (C++
    ``workload::chunk_stages``, what the planner and the plan check cut partitions from): chunk c of
    stage s is stage c x pp + s, with layers_per_stage[s] / vpp layers. The workload itself without
    interleaving."""
    parallel = workload.parallel
    vpp, pp = int(parallel["vpp"]), int(parallel["pp"])
    if vpp == 1:
        return workload
    layers = [workload.stage_layers[stage] // vpp for _ in range(vpp) for stage in range(pp)]
    with tempfile.TemporaryDirectory(prefix="kareus-chunks-") as folder:
        model = os.path.join(folder, "model.json")
        with open(model, "w", encoding="utf-8") as handle:
            json.dump(workload.model, handle)
        return Workload(model, tp=parallel["tp"], cp=parallel["cp"], pp=pp * vpp, dp=parallel["dp"],
                        mbs=parallel["mbs"], seq=parallel["seq"], microbatches=parallel["microbatches"],
                        nanobatches=parallel["nanobatches"], recompute=workload.recompute,
                        layers_per_stage=layers, sequence_parallel=bool(parallel["sequence_parallel"]))


def _check_sequence_parallel(plan, job: bool, path: str) -> None:
    """The workload check's refusal of a plan made with the other sequence-parallel setting, in the
    words of the flag: the two runs' partitions have different keys and collectives."""
    recorded = json.loads(plan.workload_json)
    made = bool(recorded.get("sequence_parallel", False))
    if made != job:
        raise InputError(f"{path}: made {'with' if made else 'without'} --sequence-parallel, this run "
                         f"{'has' if job else 'is without'} --sequence-parallel (made for sequence_parallel "
                         f"{str(made).lower()}, this run has sequence_parallel {str(job).lower()})")


def _check_no_token_nanobatches(plan, workload: Workload, path: str) -> None:
    """Refuses a nanobatched instruction of a one-sequence microbatch: the planner prices its two
    nanobatches as the halves of the sequence, and the executors split only the batch dimension."""
    parallel = workload.parallel
    if parallel["mbs"] >= parallel["nanobatches"]:
        return
    for stage, instructions in enumerate(plan.stages):
        for entry in instructions:
            if entry.overlap == "nanobatch":
                raise InputError(
                    f"{path}: stage {stage}'s {entry.type} of microbatch {entry.microbatch} is nanobatched, and with "
                    f"--mbs 1 its nanobatches are the two halves of one sequence (token nanobatches), which "
                    f"kareus.torch and kareus.megatron do not execute: follow a plan without overlap (e.g. "
                    f"plans/perseus/) or train with --mbs >= 2")


def _planned(entry: dict) -> PlannedPartition:
    collective = entry["collective"]
    return PlannedPartition(
        key=entry["key"],
        nanobatch=entry["nanobatch"],
        layer=entry["layer"],
        ops=[(op["name"], op["layer"]) for op in entry["ops"]],
        collective=None if collective is None else (collective["name"], collective["nanobatch"], collective["layer"]),
        slots=[(slot["name"], slot["first_op"]) for slot in entry["slots"]],
    )


def _with_choice(partition: PlannedPartition, choice: Optional[CommConfig]) -> PlannedPartition:
    if choice is None:
        return partition
    return PlannedPartition(partition.key, partition.nanobatch, partition.layer, partition.ops, partition.collective,
                            partition.slots, choice, slot_launch_index(partition, choice.slot))


def slot_launch_index(partition: PlannedPartition, slot: str) -> int:
    """Index of the op the collective is enqueued before: len(ops) for ``none``. ``slot`` is one
    of the partition's own slots (Workload.comm_configs resolved it)."""
    if slot == SLOT_NONE:
        return len(partition.ops)
    return dict(partition.slots)[slot]

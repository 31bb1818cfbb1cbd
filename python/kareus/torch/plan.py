"""The comm half of a kareus.plan/1 plan, resolved against the C++ partition builder.

``ExecutionPlan`` reads a plan file with the C++ reader (``kareus._runtime.read_plan``: schema,
fields, 1F1B order), checks it is for the job's workload with the one C++ check
(``check_plan_workload``: model shape, parallel sizes, mbs, seq, microbatches, nanobatches,
recompute, layer split, GPU), then checks every instruction's partition configs before any
collective runs: partition keys, launch slots and CTA counts. Every rank reads the same file and
runs the same checks, so a wrong plan fails on every rank with the same ``InputError`` and nothing
hangs. Pure Python over ``kareus._runtime`` (no torch).

Partitions and their keys, slots and collectives come from ``kareus._runtime.Workload`` (the C++
builder, partition.h); this module only attaches the planned ``CommConfig`` to each of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from kareus._runtime import SLOT_NONE, CommConfig, InputError, Workload, check_plan_workload, read_plan


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
    choices: Dict[str, CommConfig] = field(default_factory=dict)
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
        default_comm_ctas: CTAs of the trail partitions the plan does not list (the planner runs
            them at the GPU's default with the first slot, as compose does).
        gpu: the GPU preset's name; when given, the plan must have been made for it.

    Raises InputError (a ValueError) naming the file and what is wrong.
    """

    def __init__(self, path: str, workload: Workload, sm_count: int, default_comm_ctas: int, gpu: str = "") -> None:
        self.path = str(path)
        self.workload = workload
        plan = read_plan(self.path)
        check_plan_workload(plan, workload, gpu, self.path)

        recompute = workload.recompute == "full"
        self.stage_partitions: List[Dict[str, List[PlannedPartition]]] = []
        self.stages: List[List[InstructionPlan]] = []
        for stage, instructions in enumerate(plan.stages):
            built = {
                direction: [_planned(p) for p in workload.partitions(stage, direction)]
                for direction in ("forward", "backward")
            }
            self.stage_partitions.append(built)
            planned: List[InstructionPlan] = []
            for index, entry in enumerate(instructions):
                kind = entry.type
                where = f"{self.path}: stage {stage} instruction {index} ({kind} microbatch {entry.microbatch})"
                partitions = entry.partitions
                nanobatched = bool(partitions) and entry.overlap == "nanobatch"
                passes_dirs = ["forward", "backward"] if kind == "backward" and recompute else [kind]
                instruction = InstructionPlan(kind, entry.microbatch, entry.freq_mhz, nanobatched)
                if nanobatched:
                    run = [p for d in passes_dirs for p in built[d]]
                    instruction.choices = self._resolve(where, partitions, run, sm_count, default_comm_ctas)
                    for direction in passes_dirs:
                        instruction.passes.append(
                            [_with_choice(p, instruction.choices) for p in built[direction]]
                        )
                    if kind == "backward":
                        instruction.recompute_pass = (
                            instruction.passes[0]
                            if recompute
                            else [_with_choice(p, {p.key: CommConfig(SLOT_NONE, 0)}) for p in built["forward"]]
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

    def _representative_slots(self, key: str) -> List[str]:
        cache = self.__dict__.setdefault("_slot_cache", {})
        if key not in cache:
            cache[key] = list(self.workload.representative_slots(key))
        return cache[key]

    def _resolve(
        self,
        where: str,
        partitions: Dict[str, CommConfig],
        run: Sequence[PlannedPartition],
        sm_count: int,
        default_comm_ctas: int,
    ) -> Dict[str, CommConfig]:
        keys_run: Dict[str, List[PlannedPartition]] = {}
        for partition in run:
            if partition.collective is not None:
                keys_run.setdefault(partition.key, []).append(partition)
        searchable = [k for k in keys_run if not k.endswith("_trail")]
        choices: Dict[str, CommConfig] = {}
        for key, config in partitions.items():
            if key not in keys_run:
                raise InputError(f"{where}: unknown partition key '{key}' (this instruction runs "
                                 f"{', '.join(keys_run) or 'no collective'})")
            slot, ctas = config.slot, config.ctas
            if not 1 <= ctas <= sm_count:
                raise InputError(f"{where}: partition '{key}': ctas {ctas} is not a CTA count this GPU has "
                                 f"(1..{sm_count} SMs)")
            # The search chose from the steady-state layer's slots; an instance lacking the slot
            # (a stage's first or last layer) launches at its first slot (slot_launch_index).
            known = [name for partition in keys_run[key] for name, _ in partition.slots]
            if not key.endswith("_trail"):
                known = self._representative_slots(key) + known
            if slot != SLOT_NONE and slot not in known:
                raise InputError(f"{where}: partition '{key}': no launch slot '{slot}' (slots: "
                                 f"{', '.join(dict.fromkeys(known))}, {SLOT_NONE})")
            choices[key] = config
        missing = [key for key in searchable if key not in choices]
        if missing:
            raise InputError(f"{where}: no config for partition {', '.join(missing)}")
        for key, members in keys_run.items():
            if key not in choices:  # a trail: the planner's fixed config
                if not 1 <= default_comm_ctas <= sm_count:
                    raise InputError(f"{where}: default CTA count {default_comm_ctas} outside 1..{sm_count}")
                choices[key] = CommConfig(members[0].slots[0][0] if members[0].slots else SLOT_NONE,
                                          default_comm_ctas)
        return choices


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


def _with_choice(partition: PlannedPartition, choices: Dict[str, CommConfig]) -> PlannedPartition:
    if partition.collective is None:
        return partition
    choice = choices[partition.key]
    launch = slot_launch_index(partition, choice.slot)
    return PlannedPartition(partition.key, partition.nanobatch, partition.layer, partition.ops, partition.collective,
                            partition.slots, choice, launch)


def slot_launch_index(partition: PlannedPartition, slot: str) -> int:
    """Index of the op the collective is enqueued before: len(ops) for ``none``. The first and
    last layers' instances of a key may lack the representative's leading memory-bound run; a
    slot the instance lacks means its first slot, as in the C++ emulator (instruction.cpp)."""
    if slot == SLOT_NONE:
        return len(partition.ops)
    for name, first in partition.slots:
        if name == slot:
            return first
    return partition.slots[0][1] if partition.slots else len(partition.ops)

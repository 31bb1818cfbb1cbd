"""Checks a recorded launch trace against the plan.

For every nanobatched instruction of the stage, the trace must hold each partition's compute ops
in the C++ builder's order, its collective enqueued just before the op that opens the planned
slot (after the last op for slot ``none``) with the planned CTA count, and joined right after the
partition's last op, before the next partition starts.
"""

from __future__ import annotations

from typing import List, Sequence, Tuple

from kareus._runtime import SLOT_NONE
from kareus.plan import ExecutionPlan, PlannedPartition


def _expected(partitions: Sequence[PlannedPartition]) -> List[tuple]:
    events: List[tuple] = []
    for partition in partitions:
        launch = None
        if partition.collective is not None:
            slot = partition.choice.slot
            launch = len(partition.ops) if slot == SLOT_NONE else dict(partition.slots)[slot]
        name, nanobatch, layer = partition.collective or (None, None, None)
        enqueue = ("enqueue", partition.key, name, layer, nanobatch,
                   partition.choice.slot if partition.choice else None, partition.choice.ctas if partition.choice else None)
        for index, (op, op_layer) in enumerate(partition.ops):
            if index == launch:
                events.append(enqueue)
            events.append(("op", op, op_layer, partition.nanobatch))
        if launch == len(partition.ops):
            events.append(enqueue)
        if partition.collective is not None:
            events.append(("wait", partition.key, name, layer, nanobatch))
    return events


def check_trace(events: Sequence[tuple], plan: ExecutionPlan, stage: int, recompute: bool) -> Tuple[bool, List[str]]:
    """Whether one step's ``events`` (LaunchTrace.events) match ``plan`` on ``stage``; the list
    names the first mismatches."""
    passes: List[Tuple[tuple, List[tuple]]] = []
    for event in events:
        if event[0] == "pass":
            passes.append((event, []))
        elif passes:
            passes[-1][1].append(event)
        else:
            return False, [f"event {event} before any pass marker"]
    expected_passes: List[Tuple[tuple, List[tuple]]] = []
    for instruction in plan.stages[stage]:
        if not instruction.nanobatched:
            continue
        if instruction.type == "forward":
            expected_passes.append((("pass", "forward", instruction.microbatch, "forward"),
                                    _expected(instruction.passes[0])))
        else:
            if recompute:
                expected_passes.append((("pass", "backward", instruction.microbatch, "recompute"),
                                        _expected(instruction.recompute_pass)))
            expected_passes.append((("pass", "backward", instruction.microbatch, "backward"),
                                    _expected(instruction.passes[-1])))
    problems: List[str] = []
    if len(passes) != len(expected_passes):
        problems.append(f"stage {stage}: {len(passes)} nanobatched passes traced, the plan has {len(expected_passes)}")
    for (marker, got), (want_marker, want) in zip(passes, expected_passes):
        if marker != want_marker:
            problems.append(f"stage {stage}: traced {marker}, planned {want_marker}")
            continue
        if got != want:
            index = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
            problems.append(f"stage {stage} {marker[1:]}: event {index} is "
                            f"{got[index] if index < len(got) else 'missing'}, planned "
                            f"{want[index] if index < len(want) else 'nothing'}")
    return not problems, problems[:5]

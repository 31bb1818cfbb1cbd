"""kareus.torch's name for kareus.plan (the plan reader needs no torch; this import path stays)."""

from kareus.plan import ExecutionPlan, InstructionPlan, PlannedPartition, slot_launch_index

__all__ = ["ExecutionPlan", "InstructionPlan", "PlannedPartition", "slot_launch_index"]

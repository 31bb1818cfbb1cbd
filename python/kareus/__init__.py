"""kareus: follow an energy-optimal kareus plan from a PyTorch (or any) training loop.

``PipelineFrequencyOptimizer`` has the shape of Zeus's callback of the same name: call
``on_step_begin`` / ``on_step_end`` around each iteration and ``on_instruction_begin`` /
``on_instruction_end`` around each pipeline forward or backward. It applies the planned GPU clock
(MHz) of each instruction off the training thread and answers ``comm_config(partition_key)``
with the planned launch slot and CTA count of an overlapped collective. No torch import needed.

The plan contract is the C++ one, re-exported from ``kareus._runtime``: ``read_plan`` (a validated
``Plan``), ``check_plan_workload`` (is this plan for this workload and GPU?), ``check_plan_fits``
(do its clocks, partition keys, slots and CTA counts fit the GPU and workload?), ``one_f_one_b``
(a stage's instruction order), ``map_rank`` / ``global_rank`` / ``parallel_groups`` (Megatron's
tp-cp-dp-pp rank order) and ``CommConfig`` (slot, ctas).
"""

from __future__ import annotations

import weakref
from typing import List, NamedTuple, Optional, Sequence, Tuple

from kareus._runtime import (
    CommConfig,
    InputError,
    KareusError,
    Plan,
    Runtime,
    check_plan_fits,
    check_plan_workload,
    choose_for_deadline,
    global_rank,
    map_rank,
    one_f_one_b,
    parallel_groups,
    read_frontier,
    read_plan,
)

__all__ = [
    "ClockSample",
    "CommConfig",
    "InputError",
    "KareusError",
    "PipelineFrequencyOptimizer",
    "Plan",
    "check_plan_fits",
    "check_plan_workload",
    "choose_for_deadline",
    "global_rank",
    "map_rank",
    "one_f_one_b",
    "parallel_groups",
    "read_frontier",
    "read_plan",
]


class ClockSample(NamedTuple):
    """One applied clock change; requested_mhz is 0 for a reset to the driver's default."""

    time_s: float
    requested_mhz: int
    effective_mhz: int


class PipelineFrequencyOptimizer:
    """Follows one rank's stage of a kareus.plan/1 plan.

    Args:
        plan: path of the plan file.
        rank: global rank; its stage is ``map_rank(rank, ...)["stage"]`` (Megatron's tp-cp-dp-pp order).
        tp, cp, pp, dp: parallel degrees; pp must equal the plan's stage count.
        device_id: local GPU index this process drives.
        clock_backend: "recorder" (no GPU), "nvml", "nvml:LIBRARY_PATH" or "kareusd:SOCKET_PATH".
        install_signal_handlers: reset clocks on SIGINT/SIGTERM (then re-raise: KeyboardInterrupt
            still happens) and on std::terminate; one optimizer per process may install them.
        strict_clocks: a clock change the GPU, NVML or kareusd refuses raises KareusError from the
            next call. By default it is reported on stderr, the previous clock stays and training
            goes on (``failed_clock_changes`` counts them; a kareusd rate-limit answer skips that
            one change, ``skipped_clock_changes``).

    Raises InputError (a ValueError) for the caller's mistakes and KareusError (a RuntimeError)
    for device or daemon failures. The plan (and every plan switched to) must fit: its clocks are
    clocks the backend's GPU supports, and its comm configs fit the workload its block records
    (partition keys, launch slots, CTA counts: ``check_plan_fits``).
    """

    def __init__(
        self,
        plan: str,
        rank: int = 0,
        tp: int = 1,
        cp: int = 1,
        pp: int = 1,
        dp: int = 1,
        device_id: int = 0,
        clock_backend: str = "recorder",
        install_signal_handlers: bool = True,
        strict_clocks: bool = False,
    ) -> None:
        # The runtime lives in a holder the finalizer can empty at garbage collection or at
        # interpreter exit, so clocks are reset even if close() is never called.
        self._holder: List[Optional[Runtime]] = [
            Runtime(str(plan), rank, tp, cp, pp, dp, device_id, clock_backend, install_signal_handlers, strict_clocks)
        ]
        self._finalizer = weakref.finalize(self, self._holder.clear)
        self._running: Optional[str] = None

    @property
    def stage(self) -> int:
        return self._live().stage

    @property
    def failed_clock_changes(self) -> int:
        """Clock changes that were refused or failed; the previous clock stayed."""
        return self._live().failed_clock_changes

    @property
    def skipped_clock_changes(self) -> int:
        """Clock changes skipped on kareusd's rate-limit answer."""
        return self._live().skipped_clock_changes

    def on_step_begin(self) -> None:
        self._live().on_step_begin()

    def on_step_end(self) -> None:
        self._live().on_step_end()

    def on_instruction_begin(self, name: str, microbatch: Optional[int] = None, chunk: int = 0) -> None:
        """Starts "forward" or "backward" of ``microbatch`` on model ``chunk`` (the virtual pipeline
        stage; 0 without interleaving); without ``microbatch``, the next one of that type."""
        self._live().on_instruction_begin(name, microbatch, chunk)
        self._running = name

    def on_instruction_end(self, name: Optional[str] = None) -> None:
        """Ends the running instruction; ``name``, if given, must match it (as Zeus passes it)."""
        if name is not None and self._running is not None and name != self._running:
            raise InputError(
                f"stage {self.stage}: on_instruction_end('{name}') but the running instruction is '{self._running}'"
            )
        self._live().on_instruction_end()
        self._running = None

    def comm_config(self, partition_key: str) -> CommConfig:
        """The planned launch slot and CTA count of ``partition_key`` for the running
        instruction; ``CommConfig("none", 0)`` (``overlapped`` False) for every key of an
        instruction planned without nanobatching."""
        return self._live().comm_config(partition_key)

    def switch_plan(self, plan: str) -> None:
        """Moves to another plan (e.g. another frontier point); only between steps."""
        self._live().switch_plan(str(plan))

    def switch_for_deadline(self, frontier: str, deadline_s: float) -> Tuple[str, bool]:
        """Switches to the least-energy point of a kareus.frontier/1 file that meets ``deadline_s``
        (else the fastest); returns (plan path, whether the deadline is met)."""
        return self._live().switch_for_deadline(str(frontier), deadline_s)

    def flush(self) -> None:
        """Waits until every requested clock is applied."""
        self._live().flush()

    def timeline(self) -> Sequence[ClockSample]:
        return [ClockSample(*sample) for sample in self._live().timeline()]

    def close(self) -> None:
        """Resets the clocks and releases the GPU (also on garbage collection and at exit)."""
        self._finalizer()

    def __enter__(self) -> "PipelineFrequencyOptimizer":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _live(self) -> Runtime:
        if not self._holder:
            raise InputError("PipelineFrequencyOptimizer is closed")
        return self._holder[0]

"""The clock half: a stand-in for ``config.timers`` that follows the plan's 1F1B order.

Megatron-Core's pipeline schedules start and stop ``config.timers('forward-compute')`` around
each microbatch's forward step, ``'backward-compute'`` around each backward step and
``'forward-backward'`` around the whole step, on every rank, whenever ``config.timers`` is not
None. ``InstructionTimers`` answers those calls: it passes every call through to the timers it
wraps (Megatron's, or None) and, on the three names above, drives a
``kareus.PipelineFrequencyOptimizer`` (clock per instruction, any clock backend) and tells the
comm half which planned instruction runs. The k-th forward (backward) of a step is microbatch k,
as in every non-interleaved Megatron schedule; the optimizer checks it against the plan's 1F1B
order and a mismatch closes the optimizer (resetting the clocks) and raises ``InputError``
naming the rank, the stage, and the planned and the seen instruction.
No Megatron patch and no torch import here.
"""

from __future__ import annotations

from typing import Callable, Optional

from kareus import InputError

# The timer names of Megatron's schedules this hook acts on.
STEP_TIMER = "forward-backward"
INSTRUCTION_TIMERS = {"forward-compute": "forward", "backward-compute": "backward"}


def refuse_unsupported_schedule(config) -> None:
    """Raises InputError when ``config`` selects a schedule in which one timed compute step is
    not one forward or one backward of one microbatch (the clock could not follow the plan)."""
    settings = [
        ("virtual_pipeline_model_parallel_size", "interleaved 1F1B (virtual pipeline stages) runs several model "
         "chunks per stage; kareus plans one forward and one backward per microbatch and stage"),
        ("overlap_moe_expert_parallel_comm", "the combined 1F1B EP-overlap schedule merges a forward and a "
         "backward into one step"),
        ("hybrid_context_parallel", "the hybrid context-parallel schedule runs a variable number of sub-steps"),
    ]
    for name, why in settings:
        value = getattr(config, name, None)
        if value not in (None, False):
            raise InputError(f"kareus.megatron: {name}={value!r} is not supported: {why}")


class _NullTimer:
    def start(self, barrier: bool = False) -> None:
        pass

    def stop(self, barrier: bool = False) -> None:
        pass


class _HookedTimer:
    """One of Megatron's timers (or none) with the instruction hook before start and after stop."""

    def __init__(self, inner, name: str, hook: "InstructionHook") -> None:
        self._inner, self._name, self._hook = inner, name, hook

    def start(self, barrier: bool = False) -> None:
        self._hook.begin(self._name)
        self._inner.start(barrier=barrier)

    def stop(self, barrier: bool = False) -> None:
        self._inner.stop(barrier=barrier)
        self._hook.end(self._name)

    def __getattr__(self, attribute):  # elapsed(), reset(), ... of Megatron's timer
        return getattr(self._inner, attribute)


class InstructionHook:
    """Follows one rank's stage of the plan through the schedule's timer calls.

    The optimizer's plan cursor checks every step and instruction against the plan (its 1F1B
    order); this hook counts microbatches, adds the rank to the cursor's message and restores
    the clocks on a mismatch.

    Args:
        frequency_optimizer: a ``kareus.PipelineFrequencyOptimizer`` for this rank.
        rank: the global rank (for messages).
        on_instruction: called with (type, microbatch) as each instruction begins and with None
            when it ends (the comm half follows it); may be None.
    """

    def __init__(self, frequency_optimizer, rank: int,
                 on_instruction: Optional[Callable[[Optional[tuple]], None]] = None) -> None:
        self.pfo = frequency_optimizer
        self.rank = rank
        self.on_instruction = on_instruction
        self.failed: Optional[str] = None
        self._counts = {"forward": 0, "backward": 0}

    def begin(self, name: str) -> None:
        self._refuse_after_failure()
        if name == STEP_TIMER:
            self._counts = {"forward": 0, "backward": 0}
            self._call(self.pfo.on_step_begin)
            return
        kind = INSTRUCTION_TIMERS[name]
        microbatch = self._counts[kind]
        self._call(lambda: self.pfo.on_instruction_begin(kind, microbatch))
        self._counts[kind] += 1
        if self.on_instruction is not None:
            self.on_instruction((kind, microbatch))

    def end(self, name: str) -> None:
        self._refuse_after_failure()
        if name == STEP_TIMER:
            self._call(self.pfo.on_step_end)
            return
        if self.on_instruction is not None:
            self.on_instruction(None)
        self._call(lambda: self.pfo.on_instruction_end(INSTRUCTION_TIMERS[name]))

    def _call(self, action) -> None:
        """Runs an optimizer callback; a plan mismatch (kareus.InputError) restores the clocks
        (closing the optimizer) and is raised again naming the rank."""
        try:
            action()
        except ValueError as error:
            self.failed = f"kareus.megatron: rank {self.rank}: {error}"
            self.pfo.close()
            raise InputError(self.failed) from None

    def _refuse_after_failure(self) -> None:
        if self.failed is not None:
            raise InputError(f"{self.failed} (the plan is no longer followed)")


class InstructionTimers:
    """What ``config.timers`` holds while kareus follows the plan: calls pass through to
    ``inner`` (Megatron's timers, or None: then no timing happens) and the step and compute
    timers also drive ``hook``."""

    def __init__(self, inner, hook: InstructionHook) -> None:
        self.inner = inner
        self.hook = hook

    def __call__(self, name: str, log_level: Optional[int] = None):
        if self.inner is None:
            timer = _NullTimer()
        elif log_level is None:
            timer = self.inner(name)
        else:
            timer = self.inner(name, log_level=log_level)
        if name == STEP_TIMER or name in INSTRUCTION_TIMERS:
            return _HookedTimer(timer, name, self.hook)
        return timer

    def __getattr__(self, attribute):  # log(), write(), ... of Megatron's Timers
        if self.inner is None:
            raise AttributeError(attribute)
        return getattr(self.inner, attribute)

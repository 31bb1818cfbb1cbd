"""The clock half: a stand-in for ``config.timers`` that follows the plan's (interleaved) 1F1B order.

Megatron-Core's pipeline schedules start and stop ``config.timers('forward-compute')`` around
each microbatch's forward step, ``'backward-compute'`` around each backward step and
``'forward-backward'`` around the whole step, on every rank, whenever ``config.timers`` is not
None. ``InstructionTimers`` answers those calls: it passes every call through to the timers it
wraps (Megatron's, or None) and, on the three names above, drives a
``kareus.PipelineFrequencyOptimizer`` (clock per instruction, any clock backend) and tells the
comm half which planned instruction runs. The timers name no model chunk and no microbatch:
``StepOrder`` gives the (chunk, microbatch) of a rank's k-th forward and k-th backward, as
Megatron's schedules pick them (without interleaving the k-th of each is microbatch k of the one
chunk; with it, ``forward_backward_pipelining_with_interleaving``'s lookup table of microbatch
groups). The optimizer checks every instruction against the plan's order, and a mismatch closes
the optimizer (resetting the clocks) and raises ``InputError`` naming the rank, the stage, and
the planned and the seen instruction.
No Megatron patch and no torch import here.
"""

from __future__ import annotations

from typing import Callable, List, Optional, Tuple

from kareus import InputError

# The timer names of Megatron's schedules this hook acts on.
STEP_TIMER = "forward-backward"
INSTRUCTION_TIMERS = {"forward-compute": "forward", "backward-compute": "backward"}


def refuse_unsupported_schedule(config) -> None:
    """Raises InputError when ``config`` selects a schedule in which one timed compute step is
    not one forward or one backward of one microbatch on one model chunk, or an interleaved order
    other than the one kareus plans (microbatch groups of pp, Megatron's default)."""
    settings = [
        ("overlap_moe_expert_parallel_comm", "the combined 1F1B EP-overlap schedule merges a forward and a "
         "backward into one step"),
        ("hybrid_context_parallel", "the hybrid context-parallel schedule runs a variable number of sub-steps"),
    ]
    for name, why in settings:
        value = getattr(config, name, None)
        if value not in (None, False):
            raise InputError(f"kareus.megatron: {name}={value!r} is not supported: {why}")
    vpp = getattr(config, "virtual_pipeline_model_parallel_size", None)
    group = getattr(config, "microbatch_group_size_per_vp_stage", None)
    pp = config.pipeline_model_parallel_size
    if vpp not in (None, 1) and group not in (None, pp):
        raise InputError(f"kareus.megatron: microbatch_group_size_per_vp_stage={group!r} is not supported: kareus "
                         f"plans the interleaved order of microbatch groups of pipeline_model_parallel_size ({pp})")


class StepOrder:
    """The (chunk, microbatch) of one rank's k-th forward and k-th backward step in Megatron's
    schedule of ``vpp`` model chunks (1: no interleaving) over ``pp`` stages.

    With interleaving, forwards walk the table of microbatch groups of ``pp`` (the last group takes
    the rest): every chunk in turn runs the group's microbatches; the k-th backward is the k-th
    entry's microbatch on the mirrored chunk (vpp - 1 - chunk), as the gradients come back through
    the chunks in reverse. The table does not depend on the rank: only when the backwards start
    (the warmup) does, and the timers show that."""

    def __init__(self, pp: int, vpp: int, microbatches: int) -> None:
        self.vpp = vpp
        self.microbatches = microbatches
        self._table: List[Tuple[int, int]] = []  # (chunk, microbatch) of the k-th forward
        for first in range(0, microbatches, pp):
            last = microbatches if first + pp >= microbatches else first + pp
            self._table += [(chunk, m) for chunk in range(vpp) for m in range(first, last)]

    def step(self, kind: str, index: int) -> Tuple[int, int]:
        """(chunk, microbatch) of the ``index``-th ``kind`` ("forward" | "backward") of a step;
        past the last one, (0, index): the plan cursor then names the extra step."""
        if index >= len(self._table):
            return 0, index
        chunk, microbatch = self._table[index]
        return (chunk if kind == "forward" else self.vpp - 1 - chunk), microbatch

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
        on_instruction: called with (type, chunk, microbatch) as each instruction begins and with
            None when it ends (the comm half follows it); may be None.
        order: the schedule's ``StepOrder`` (default: no interleaving, microbatch k is the k-th).
    """

    def __init__(self, frequency_optimizer, rank: int,
                 on_instruction: Optional[Callable[[Optional[tuple]], None]] = None,
                 order: Optional[StepOrder] = None) -> None:
        self.pfo = frequency_optimizer
        self.rank = rank
        self.on_instruction = on_instruction
        self.order = order
        self.failed: Optional[str] = None
        self._counts = {"forward": 0, "backward": 0}

    def begin(self, name: str) -> None:
        self._refuse_after_failure()
        if name == STEP_TIMER:
            self._counts = {"forward": 0, "backward": 0}
            self._call(self.pfo.on_step_begin)
            return
        kind = INSTRUCTION_TIMERS[name]
        index = self._counts[kind]
        chunk, microbatch = (0, index) if self.order is None else self.order.step(kind, index)
        if self.order is None or self.order.vpp == 1:
            self._call(lambda: self.pfo.on_instruction_begin(kind, microbatch))
        else:
            self._call(lambda: self.pfo.on_instruction_begin(kind, microbatch, chunk=chunk))
        self._counts[kind] += 1
        if self.on_instruction is not None:
            self.on_instruction((kind, chunk, microbatch))

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

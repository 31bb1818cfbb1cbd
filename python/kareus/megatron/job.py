"""``MegatronJob``: one rank of a Megatron-Core GPT job following a kareus plan.

Construction checks everything a user can get wrong, on every rank, before any collective: the
schedule (no interleaving, no combined 1F1B), the plan file against the job's workload (the
plan contract's check, through kareus.torch's ``ExecutionPlan``) and the rank's stage; then it
opens the frequency optimizer. ``attach(model)`` adds the comm half (the decoder runs the plan's
partitions on process groups made per CTA count, on every rank in the same order: a collective
step). ``forward_backward(fn)`` wraps Megatron's schedule function so that each training call
runs with ``config.timers`` wrapped by the instruction hook (the clock half) and each
``forward_only`` call runs untouched.
"""

from __future__ import annotations

import os
from typing import Optional

from kareus import InputError, PipelineFrequencyOptimizer, map_rank
from kareus.megatron.layer_ops import refuse_unsupported_layers
from kareus.megatron.schedule import InstructionHook, InstructionTimers, refuse_unsupported_schedule
from kareus.megatron.workload import MegatronWorkload


class MegatronJob:
    """Follows ``plan`` on this rank.

    Args:
        plan: a kareus.plan/1 file made for ``workload`` (``kareus plan --model``).
        config: the job's TransformerConfig (the one its GPTModel and schedule use).
        workload: ``kareus.megatron.workload(config, ...)`` of this job.
        rank: global rank (default: $RANK).
        device_id: local GPU index (default: $LOCAL_RANK).
        clock_backend: "recorder" (no GPU), "nvml", "kareusd:SOCKET" (docs/runtime.md).
        gpu: GPU preset or .json: SM count for the CTA counts without a GPU, and the CTA count of
            the trail partitions the plan does not list.
        trace: record the launch trace of the comm half (``launch_trace``).
    """

    def __init__(self, plan: str, config, workload: MegatronWorkload, rank: Optional[int] = None,
                 device_id: Optional[int] = None, clock_backend: str = "recorder", gpu: str = "a100-40gb",
                 trace: bool = False, install_signal_handlers: bool = False) -> None:
        from kareus import _runtime
        from kareus import torch as kt

        refuse_unsupported_schedule(config)
        self.config = config
        self.workload = workload
        self.rank = int(os.environ.get("RANK", "0")) if rank is None else rank
        device_id = int(os.environ.get("LOCAL_RANK", "0")) if device_id is None else device_id
        self.where = map_rank(self.rank, tp=workload.tp, cp=workload.cp, pp=workload.pp, dp=workload.dp)
        self.stage = self.where["stage"]
        gpu_spec = _runtime.load_gpu(gpu)
        sm_count = _cuda_sm_count(device_id) or gpu_spec["sm_count"]
        self.plan = kt.ExecutionPlan(plan, workload.runtime_workload(), sm_count, gpu_spec["default_comm_ctas"],
                                     gpu_spec["name"])
        self.pfo = PipelineFrequencyOptimizer(str(plan), rank=self.rank, tp=workload.tp, cp=workload.cp,
                                              pp=workload.pp, dp=workload.dp, device_id=device_id,
                                              clock_backend=clock_backend,
                                              install_signal_handlers=install_signal_handlers)
        self._instructions = {(i.type, i.microbatch): i for i in self.plan.stages[self.stage]}
        self.launch_trace = kt.LaunchTrace(enabled=trace)
        self.groups = None
        self._follower = None
        self.hook = InstructionHook(self.pfo, self.rank, self._on_instruction)

    # -- comm half -----------------------------------------------------------------------------
    def attach(self, model, backend: Optional[str] = None) -> None:
        """Makes ``model``'s decoder (this rank's GPTModel stage) run the plan's partitions.
        Creates the CTA-bounded process groups: call on every rank, after Megatron's
        ``initialize_model_parallel``."""
        import torch.distributed as dist

        from kareus import torch as kt
        from kareus.megatron.block import adopt_block

        refuse_unsupported_layers(self.config)
        backend = backend or dist.get_backend()
        w = self.workload
        self.groups = kt.CommGroups(kt.tp_groups(w.tp, w.pp, w.dp, w.cp), self.rank, backend)
        self.groups.ensure(self.plan.distinct_ctas())
        recompute = w.recompute == "full"

        def make_runner(layers, ops, plain, batch_dim):
            if len(layers) != w.layers_per_stage[self.stage]:
                raise InputError(f"kareus.megatron: rank {self.rank}: stage {self.stage} holds {len(layers)} "
                                 f"layers, the plan's workload {w.layers_per_stage[self.stage]}")
            # With sequence parallelism the runner's own gathers hold their own buffers (Megatron's
            # column-parallel gather reuses one global buffer, which concurrent partitions cannot).
            return kt.StageRunner(layers, None, self.groups, w.tp, recompute, self.launch_trace, ops=ops,
                                  plain=plain, batch_dim=batch_dim, sequence_parallel=w.sequence_parallel)

        self._follower = adopt_block(model, make_runner)

    def check_trace(self):
        """(whether the launch trace since the last call matches the plan, problems); clears it."""
        from kareus import torch as kt

        ok, problems = kt.check_trace(self.launch_trace.events, self.plan, self.stage,
                                      self.workload.recompute == "full")
        self.launch_trace.clear()
        return ok, problems

    # -- clock half ----------------------------------------------------------------------------
    def forward_backward(self, schedule):
        """Wraps Megatron's forward-backward function (``get_forward_backward_func()``): a
        training call follows the plan, a ``forward_only`` call runs as Megatron's."""
        if getattr(schedule, "__name__", "") == "forward_backward_pipelining_with_interleaving":
            raise InputError("kareus.megatron: the interleaved 1F1B schedule (virtual pipeline stages) runs several "
                             "model chunks per stage; kareus plans one forward and one backward per microbatch")
        job = self

        def run(*args, forward_only: bool = False, **kwargs):
            if forward_only:
                return schedule(*args, forward_only=True, **kwargs)
            microbatches = kwargs.get("num_microbatches")
            if microbatches is not None and microbatches != job.workload.microbatches:
                raise InputError(f"kareus.megatron: rank {job.rank}: num_microbatches {microbatches}, the plan runs "
                                 f"{job.workload.microbatches} per step")
            # The schedule reads the timers from the model's config (normally the job's).
            config = _model_config(kwargs.get("model")) or job.config
            inner = config.timers
            config.timers = InstructionTimers(inner, job.hook)
            try:
                return schedule(*args, forward_only=False, **kwargs)
            finally:
                config.timers = inner

        return run

    def _on_instruction(self, instruction) -> None:
        if self._follower is not None:
            self._follower.follow(None if instruction is None else self._instructions[instruction])

    def close(self) -> None:
        """Resets the clocks (also at exit)."""
        self.pfo.close()


def _model_config(model):
    """The TransformerConfig Megatron's schedule uses for ``model`` (None without a model)."""
    if model is None:
        return None
    from megatron.core.utils import get_model_config

    return get_model_config(model[0] if isinstance(model, list) else model)


def _cuda_sm_count(device_id: int) -> Optional[int]:
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_properties(device_id).multi_processor_count

"""``MegatronJob``: one rank of a Megatron-Core GPT job following a kareus plan.

Construction checks everything a user can get wrong, on every rank, before any collective: the
schedule (no combined 1F1B; interleaving only in Megatron's default microbatch groups), the plan
file against the job's workload (the plan contract's check, through kareus.torch's
``ExecutionPlan``: sequence parallelism and virtual pipeline stages included) and the rank's
stage; then it opens the frequency optimizer. ``attach(model)`` adds the comm half to the rank's
model, or to each of its model chunks with interleaving (every chunk's decoder runs the plan's
partitions of that chunk, on process groups made per CTA count, on every rank in the same order:
a collective step). ``forward_backward(fn)`` wraps Megatron's schedule function so that each
training call runs with ``config.timers`` wrapped by the instruction hook (the clock half) and
each ``forward_only`` call runs untouched.
"""

from __future__ import annotations

import os
from typing import Optional

from kareus import InputError, PipelineFrequencyOptimizer, map_rank
from kareus.megatron.layer_ops import refuse_unsupported_layers, refuse_unsupported_wrapping, unwrap
from kareus.megatron.schedule import InstructionHook, InstructionTimers, StepOrder, refuse_unsupported_schedule
from kareus.megatron.workload import MegatronWorkload


class MegatronJob:
    """Follows ``plan`` on this rank.

    Args:
        plan: a kareus.plan/2 (or /1) file made for ``workload`` (``kareus plan --model``).
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
        self._instructions = {(i.type, i.chunk, i.microbatch): i for i in self.plan.stages[self.stage]}
        self.launch_trace = kt.LaunchTrace(enabled=trace)
        self.groups = None
        self._followers = []  # one per model chunk, in vp_stage order
        self.hook = InstructionHook(self.pfo, self.rank, self._on_instruction,
                                    StepOrder(workload.pp, workload.vpp, workload.microbatches))

    # -- comm half -----------------------------------------------------------------------------
    def attach(self, model, backend: Optional[str] = None) -> None:
        """Makes ``model``'s decoder (this rank's GPTModel stage) run the plan's partitions; with
        virtual pipeline stages ``model`` is the list of this rank's model chunks as Megatron
        builds them (GPTModel(..., vp_stage=c) for c in 0..vpp-1). Creates the CTA-bounded process
        groups: call on every rank, after Megatron's ``initialize_model_parallel``."""
        import torch.distributed as dist

        from kareus import torch as kt
        from kareus.megatron.block import adopt_block

        refuse_unsupported_layers(self.config)
        chunks = self._chunks(model)
        for chunk in chunks:
            refuse_unsupported_wrapping(chunk)
        backend = backend or dist.get_backend()
        w = self.workload
        self.groups = kt.CommGroups(kt.tp_groups(w.tp, w.pp, w.dp, w.cp), self.rank, backend)
        self.groups.ensure(self.plan.distinct_ctas())
        recompute = w.recompute == "full"
        runtime_workload = w.runtime_workload()

        self._followers = []  # a later attach (another model: a loaded checkpoint) replaces the earlier
        for chunk_index, chunk in enumerate(chunks):
            first, count = (runtime_workload.chunk_layers(self.stage, chunk_index) if w.vpp > 1
                            else (sum(w.layers_per_stage[: self.stage]), w.layers_per_stage[self.stage]))

            def make_runner(layers, ops, plain, batch_dim, first=first, count=count, chunk_index=chunk_index):
                self._check_chunk_layers(chunk_index, layers, first, count)
                # With sequence parallelism the runner's own gathers hold their own buffers (Megatron's
                # column-parallel gather reuses one global buffer, which concurrent partitions cannot).
                return kt.StageRunner(layers, None, self.groups, w.tp, recompute, self.launch_trace, ops=ops,
                                      plain=plain, batch_dim=batch_dim, sequence_parallel=w.sequence_parallel)

            self._followers.append(adopt_block(chunk, make_runner, chunk_index))

    def _chunks(self, model) -> list:
        """The rank's model chunks: ``model`` itself without interleaving, else the list of vpp
        chunks in vp_stage order."""
        vpp = self.workload.vpp
        if vpp == 1:
            if isinstance(model, (list, tuple)):
                if len(model) != 1:
                    raise InputError(f"kareus.megatron: rank {self.rank}: {len(model)} model chunks, the plan's "
                                     "workload has no virtual pipeline stages (vpp 1)")
                model = model[0]
            return [model]
        if not isinstance(model, (list, tuple)) or len(model) != vpp:
            found = len(model) if isinstance(model, (list, tuple)) else "one model, not a list of"
            raise InputError(f"kareus.megatron: rank {self.rank}: {found} model chunks, the plan's workload has "
                             f"vpp {vpp}: pass the list of this rank's chunks as Megatron builds them")
        for index, chunk in enumerate(model):
            vp_stage = _vp_stage(chunk)
            if vp_stage != index:
                raise InputError(f"kareus.megatron: rank {self.rank}: model chunk {index} has vp_stage {vp_stage}; "
                                 "pass the chunks in vp_stage order, each built with GPTModel(..., vp_stage=c)")
        return list(model)

    def _check_chunk_layers(self, chunk: int, layers, first: int, count: int) -> None:
        """The chunk holds the plan's layers: as many, starting at the same global layer."""
        where = f"stage {self.stage}" + (f" chunk {chunk}" if self.workload.vpp > 1 else "")
        if len(layers) != count:
            raise InputError(f"kareus.megatron: rank {self.rank}: {where} holds {len(layers)} layers, the plan's "
                             f"workload {count}")
        number = getattr(layers[0], "layer_number", first + 1) if layers else first + 1
        if number != first + 1:  # Megatron numbers layers globally from 1
            raise InputError(f"kareus.megatron: rank {self.rank}: {where} starts at layer {number - 1}, the plan's "
                             f"workload at layer {first}")

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
        interleaved = getattr(schedule, "__name__", "") == "forward_backward_pipelining_with_interleaving"
        if interleaved != (self.workload.vpp > 1):
            raise InputError(f"kareus.megatron: {getattr(schedule, '__name__', schedule)} with a plan made for vpp "
                             f"{self.workload.vpp}: the interleaved schedule runs exactly when "
                             "virtual_pipeline_model_parallel_size is set")
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
        """The planned instruction (type, chunk, microbatch) that begins, or None when it ends: its
        chunk's decoder follows it, and every other chunk's decoder refuses to run meanwhile."""
        planned = None if instruction is None else self._instructions[instruction]
        for follower in self._followers:
            follower.follow(planned if planned is not None and planned.chunk == follower.chunk else None,
                            running_chunk=None if planned is None else planned.chunk)

    def close(self) -> None:
        """Resets the clocks (also at exit)."""
        self.pfo.close()


def _model_config(model):
    """The TransformerConfig Megatron's schedule uses for ``model`` (None without a model)."""
    if model is None:
        return None
    from megatron.core.utils import get_model_config

    return get_model_config(model[0] if isinstance(model, list) else model)


def _vp_stage(chunk):
    """The vp_stage a GPTModel chunk was built with (through Megatron's DDP / Float16Module)."""
    return getattr(unwrap(chunk, "vp_stage"), "vp_stage", None)


def _cuda_sm_count(device_id: int) -> Optional[int]:
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_properties(device_id).multi_processor_count

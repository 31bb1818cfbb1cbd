"""The clock half: the timers stand-in drives the frequency optimizer in the plan's 1F1B order.

The calls Megatron's schedules make on ``config.timers`` (names, log levels, start/stop with
barrier) are replayed here by hand for stage 1 of a 2-stage, 4-microbatch plan, through
``InstructionTimers`` over a recording stand-in of Megatron's timers: every call must reach
the inner timers unchanged, and the recorder clock backend must see the stage's planned clocks
in order. A mis-ordered step raises InputError naming rank, stage, the expected and the seen
instruction, and closes the optimizer (which resets the clocks). ``forward_only`` leaves
``config.timers`` alone. Combined-1F1B schedules, and interleaving in microbatch groups other than
Megatron's default (pp), are refused by name; the interleaved schedule function is refused for a
plan without virtual stages, the other one for a plan with them.
"""

from __future__ import annotations

import json
import types

import pytest

import mhelpers
from mhelpers import helpers

from kareus import InputError, PipelineFrequencyOptimizer, one_f_one_b
from kareus.megatron.schedule import InstructionHook, InstructionTimers, refuse_unsupported_schedule

STAGES, MICROBATCHES = 2, 4


class RecordingTimers:
    """Megatron's Timers as far as the schedules use them: timers(name, log_level)."""

    def __init__(self):
        self.calls = []

    def __call__(self, name, log_level=None):
        self.calls.append(("get", name, log_level))
        calls = self.calls

        class Timer:
            def start(self, barrier=False):
                calls.append(("start", name, barrier))

            def stop(self, barrier=False):
                calls.append(("stop", name, barrier))

        return Timer()

    def log(self, names):
        return f"logged {names}"


def run_step(timers, order):
    """The timer calls of one non-interleaved Megatron step running ``order``."""
    timers("forward-backward", log_level=1).start(barrier=True)
    for kind, _ in order:
        name = f"{kind}-compute"
        timers(name, log_level=2).start()
        timers("forward-recv", log_level=2).start()  # P2P timers pass through untouched
        timers("forward-recv").stop()
        timers(name).stop()
    timers("forward-backward").stop()


@pytest.fixture
def plan(tmp_path):
    from kareus._runtime import Workload

    workload = Workload(helpers.TINY_MODEL, pp=STAGES, mbs=2, seq=16, microbatches=MICROBATCHES, recompute="none")
    return helpers.write_plan(tmp_path / "plan.json", STAGES, MICROBATCHES, {}, recompute=False,
                              workload=json.loads(workload.to_json()))


def test_the_recorder_sees_the_stage_clocks_in_order_and_megatron_every_call(plan):
    pfo = PipelineFrequencyOptimizer(plan, rank=1, pp=STAGES, install_signal_handlers=False)
    seen = []
    hook = InstructionHook(pfo, rank=1, on_instruction=seen.append)
    inner = RecordingTimers()
    timers = InstructionTimers(inner, hook)
    order = one_f_one_b(1, STAGES, MICROBATCHES)
    for _ in range(2):
        run_step(timers, order)
    pfo.flush()
    # write_plan gives microbatch m's instructions 1200 + 30 m MHz; stage 1 runs F0 B0 F1 B1 ...,
    # so F m and B m share a clock and it changes (is sent) four times a step.
    planned = [1200 + 30 * m for _, m in order] * 2
    collapsed = [f for i, f in enumerate(planned) if i == 0 or f != planned[i - 1]]
    assert [s.requested_mhz for s in pfo.timeline()] == collapsed
    assert collapsed[:4] == [1200, 1230, 1260, 1290] and len(collapsed) == 8
    # The comm half is told each instruction as it begins and that it ended.
    assert seen[:4] == [("forward", 0, 0), None, ("backward", 0, 0), None]  # (type, chunk, microbatch)
    assert len(seen) == 2 * 2 * 2 * MICROBATCHES
    # Megatron's timers got every call, with its log level and barrier, in order.
    per_step = 4 + 8 * 2 * MICROBATCHES  # 2 calls per get + start/stop, 4 timers per instruction
    assert len(inner.calls) == 2 * per_step
    assert inner.calls[:5] == [("get", "forward-backward", 1), ("start", "forward-backward", True),
                               ("get", "forward-compute", 2), ("start", "forward-compute", False),
                               ("get", "forward-recv", 2)]
    assert inner.calls[per_step - 2:per_step] == [("get", "forward-backward", None),
                                                  ("stop", "forward-backward", False)]
    assert timers.log(["x"]) == "logged ['x']"
    pfo.close()


def test_without_megatron_timers_the_hook_still_follows_the_plan(plan):
    pfo = PipelineFrequencyOptimizer(plan, rank=0, pp=STAGES, install_signal_handlers=False)
    timers = InstructionTimers(None, InstructionHook(pfo, rank=0))
    run_step(timers, one_f_one_b(0, STAGES, MICROBATCHES))
    pfo.flush()
    assert [s.requested_mhz for s in pfo.timeline()][:3] == [1200, 1230, 1200]  # F0 F1 B0
    pfo.close()


def test_a_misordered_step_names_rank_stage_expected_and_seen_and_restores_the_clock(plan):
    pfo = PipelineFrequencyOptimizer(plan, rank=1, pp=STAGES, install_signal_handlers=False)
    timers = InstructionTimers(RecordingTimers(), InstructionHook(pfo, rank=1))
    timers("forward-backward", log_level=1).start()
    timers("forward-compute", log_level=2).start()
    timers("forward-compute").stop()
    with pytest.raises(InputError) as error:
        timers("forward-compute", log_level=2).start()  # stage 1 must run B0 now
    message = str(error.value)
    assert "rank 1" in message and "stage 1" in message
    assert "expected backward microbatch 0, got forward microbatch 1" in message
    # The optimizer is closed (its clocks reset) and the hook refuses to go on.
    with pytest.raises(InputError, match="closed"):
        pfo.timeline()
    with pytest.raises(InputError, match="no longer followed"):
        timers("forward-compute").stop()


def test_a_step_that_ends_early_is_refused(plan):
    pfo = PipelineFrequencyOptimizer(plan, rank=0, pp=STAGES, install_signal_handlers=False)
    timers = InstructionTimers(None, InstructionHook(pfo, rank=0))
    timers("forward-backward").start()
    timers("forward-compute").start()
    timers("forward-compute").stop()
    with pytest.raises(InputError, match=r"rank 0: stage 0: step ended after 1 of 8 instructions"):
        timers("forward-backward").stop()


@pytest.mark.parametrize("setting, value", [("overlap_moe_expert_parallel_comm", True),
                                            ("hybrid_context_parallel", True)])
def test_schedules_without_one_instruction_per_step_are_refused_by_name(setting, value):
    config = types.SimpleNamespace(**{setting: value})
    with pytest.raises(InputError, match=f"{setting}={value!r} is not supported"):
        refuse_unsupported_schedule(config)
    refuse_unsupported_schedule(types.SimpleNamespace(pipeline_model_parallel_size=2))  # Megatron's defaults pass


def test_interleaving_passes_in_megatrons_default_groups_and_other_groups_are_refused():
    def config(group):
        return types.SimpleNamespace(pipeline_model_parallel_size=2, virtual_pipeline_model_parallel_size=2,
                                     microbatch_group_size_per_vp_stage=group)

    refuse_unsupported_schedule(config(None))
    refuse_unsupported_schedule(config(2))
    with pytest.raises(InputError, match=r"microbatch_group_size_per_vp_stage=4 is not supported: kareus plans the "
                                         r"interleaved order of microbatch groups of pipeline_model_parallel_size \(2\)"):
        refuse_unsupported_schedule(config(4))


def test_forward_only_runs_with_the_timers_megatron_has(plan):
    mhelpers.require_megatron()
    from kareus.megatron import MegatronJob, workload

    config = mhelpers.tiny_config(pp=STAGES)
    job_workload = workload(config, vocab_size=256, seq_length=16, micro_batch_size=2, num_microbatches=MICROBATCHES)
    inner = RecordingTimers()
    config.timers = inner
    seen = []

    def schedule(*, forward_only, num_microbatches, **unused):
        seen.append((forward_only, config.timers))
        if not forward_only:
            run_step(config.timers, one_f_one_b(1, STAGES, MICROBATCHES))
        return ["losses"]

    document = helpers.write_plan(plan, STAGES, MICROBATCHES, {}, recompute=False,
                                  workload=json.loads(job_workload.runtime_workload().to_json()))
    job = MegatronJob(document, config, job_workload, rank=1)
    forward_backward = job.forward_backward(schedule)
    assert forward_backward(forward_only=True, num_microbatches=MICROBATCHES) == ["losses"]
    assert seen[0] == (True, inner)  # untouched
    assert forward_backward(forward_only=False, num_microbatches=MICROBATCHES) == ["losses"]
    assert isinstance(seen[1][1], InstructionTimers) and seen[1][1].inner is inner
    assert config.timers is inner  # restored after the step
    job.pfo.flush()
    assert [s.requested_mhz for s in job.pfo.timeline()] == [1200, 1230, 1260, 1290]  # F m, B m share one
    with pytest.raises(InputError, match="num_microbatches 3, the plan runs 4"):
        forward_backward(forward_only=False, num_microbatches=3)
    from megatron.core.pipeline_parallel.schedules import forward_backward_pipelining_with_interleaving

    with pytest.raises(InputError, match="forward_backward_pipelining_with_interleaving with a plan made for vpp 1"):
        job.forward_backward(forward_backward_pipelining_with_interleaving)
    job.close()


@pytest.mark.parametrize("freq_mhz", [1411, 10**9])
def test_a_clock_the_gpu_lacks_is_refused(plan, freq_mhz):
    mhelpers.require_megatron()
    from kareus.megatron import MegatronJob, workload

    config = mhelpers.tiny_config(pp=STAGES)
    job_workload = workload(config, vocab_size=256, seq_length=16, micro_batch_size=2, num_microbatches=MICROBATCHES)
    document = helpers.write_plan(plan, STAGES, MICROBATCHES, {}, recompute=False,
                                  workload=json.loads(job_workload.runtime_workload().to_json()))
    edited = json.loads(open(document).read())
    edited["stages"][1]["instructions"][0]["freq_mhz"] = freq_mhz
    open(document, "w").write(json.dumps(edited))
    with pytest.raises(InputError, match=rf"stage 1 instruction 0 \(forward microbatch 0\): freq_mhz {freq_mhz} is not "
                                         r"a clock of a100-40gb \(210\.\.1410 MHz in 15 MHz steps\)"):
        MegatronJob(document, config, job_workload, rank=1)

"""kareus.megatron with sequence parallelism and virtual pipeline stages: what a job checks before
it trains (in one process, no collective).

A plan made for another vpp, or with the other sequence-parallel setting, is refused by
MegatronJob naming the setting; a plan of the job's own interleaved workload gives every stage the
chunks of Megatron's interleaved order. ``attach`` takes the rank's model chunks only as Megatron
builds them (as many as vpp, in vp_stage order), and a chunk's decoder that runs while the plan
runs another chunk is refused.
"""

from __future__ import annotations

import json
import types

import pytest

import mhelpers

from kareus import InputError

PP, VPP, MICROBATCHES = 2, 2, 4


@pytest.fixture(autouse=True)
def megatron():
    mhelpers.require_megatron()


def _job_workload(**overrides):
    from kareus.megatron import workload

    config = mhelpers.tiny_config(tp=2, pp=PP, **overrides)
    return config, workload(config, vocab_size=256, seq_length=16, micro_batch_size=2, num_microbatches=MICROBATCHES)


def _write_plan(path, job_workload) -> str:
    """A plan of ``job_workload`` in its (interleaved) 1F1B order, no instruction nanobatched:
    what is checked here is the workload block and the order, not the comm configs."""
    from kareus._runtime import interleaved_one_f_one_b

    runtime = job_workload.runtime_workload()
    stages = []
    for stage in range(job_workload.pp):
        instructions = [{"type": kind, "chunk": chunk, "microbatch": microbatch, "freq_mhz": 1200 + 30 * microbatch,
                         "partitions": {}}
                        for kind, chunk, microbatch in interleaved_one_f_one_b(stage, job_workload.pp,
                                                                               job_workload.vpp, MICROBATCHES)]
        stages.append({"stage": stage, "instructions": instructions})
    document = {"schema": "kareus.plan/2", "workload": json.loads(runtime.to_json()),
                "predicted": {"time_s": 1.0, "energy_j": 1.0}, "stages": stages}
    path.write_text(json.dumps(document))
    return str(path)


def _job(plan, config, job_workload, rank=0):
    from kareus.megatron import MegatronJob

    return MegatronJob(plan, config, job_workload, rank=rank)


@pytest.mark.parametrize("setting, plain_plan_in_this_run, this_plan_in_a_plain_run", [
    ({"virtual_pipeline_model_parallel_size": VPP}, "made for vpp 1, this run has vpp 2",
     "made for vpp 2, this run has vpp 1"),
    ({"sequence_parallel": True}, "made without --sequence-parallel, this run has --sequence-parallel",
     "made with --sequence-parallel, this run is without --sequence-parallel"),
])
def test_a_plan_made_for_the_other_setting_is_refused_naming_it(tmp_path, setting, plain_plan_in_this_run,
                                                                this_plan_in_a_plain_run):
    config, job_workload = _job_workload(**setting)
    plain_config, plain = _job_workload()
    with pytest.raises(InputError, match=plain_plan_in_this_run):
        _job(_write_plan(tmp_path / "plain.json", plain), config, job_workload)
    with pytest.raises(InputError, match=this_plan_in_a_plain_run):
        _job(_write_plan(tmp_path / "this.json", job_workload), plain_config, plain)


def test_an_interleaved_plan_gives_each_stage_megatrons_chunks_in_order(tmp_path):
    config, interleaved = _job_workload(virtual_pipeline_model_parallel_size=VPP, sequence_parallel=True)
    plan = _write_plan(tmp_path / "plan.json", interleaved)
    job = _job(plan, config, interleaved, rank=2)  # TP 2: rank 2 is stage 1
    assert job.stage == 1
    order = [(i.type, i.chunk, i.microbatch) for i in job.plan.stages[1]]
    assert order[:6] == [("forward", 0, 0), ("forward", 0, 1), ("forward", 1, 0), ("backward", 1, 0),
                         ("forward", 1, 1), ("backward", 1, 1)]
    assert sorted(order) == sorted((kind, c, m) for kind in ("forward", "backward") for c in range(VPP)
                                   for m in range(MICROBATCHES))
    job.close()


def _chunk(vp_stage):
    return types.SimpleNamespace(vp_stage=vp_stage)


def test_attach_takes_the_chunks_only_as_megatron_builds_them(tmp_path):
    config, interleaved = _job_workload(virtual_pipeline_model_parallel_size=VPP)
    job = _job(_write_plan(tmp_path / "plan.json", interleaved), config, interleaved)
    chunks = [_chunk(0), _chunk(1)]
    assert job._chunks(chunks) == chunks
    with pytest.raises(InputError, match="rank 0: 1 model chunks, the plan's workload has vpp 2"):
        job._chunks(chunks[:1])
    with pytest.raises(InputError, match="rank 0: one model, not a list of model chunks, the plan's workload has vpp 2"):
        job._chunks(chunks[0])
    with pytest.raises(InputError, match=r"model chunk 0 has vp_stage 1; pass the chunks in vp_stage order"):
        job._chunks([_chunk(1), _chunk(0)])
    job.close()
    plain_config, plain = _job_workload()
    job = _job(_write_plan(tmp_path / "plain.json", plain), plain_config, plain)
    with pytest.raises(InputError, match="rank 0: 2 model chunks, the plan's workload has no virtual pipeline stages"):
        job._chunks(chunks)
    job.close()


def test_a_chunk_layer_split_other_than_the_plans_is_refused(tmp_path):
    config, interleaved = _job_workload(virtual_pipeline_model_parallel_size=VPP)
    job = _job(_write_plan(tmp_path / "plan.json", interleaved), config, interleaved, rank=2)
    layer = types.SimpleNamespace
    # Stage 1 chunk 1 holds layer 3 (Megatron's (c x pp + r)-th block of one layer), numbered 4.
    job._check_chunk_layers(1, [layer(layer_number=4)], 3, 1)
    with pytest.raises(InputError, match="rank 2: stage 1 chunk 1 starts at layer 2, the plan's workload at layer 3"):
        job._check_chunk_layers(1, [layer(layer_number=3)], 3, 1)
    with pytest.raises(InputError, match="rank 2: stage 1 chunk 1 holds 2 layers, the plan's workload 1"):
        job._check_chunk_layers(1, [layer(layer_number=4), layer(layer_number=5)], 3, 1)
    job.close()


def test_a_chunk_that_runs_while_the_plan_runs_another_is_refused():
    from kareus.megatron.block import BlockFollower

    class Runner:
        instruction = "unset"

        def set_instruction(self, instruction):
            self.instruction = instruction

    follower = BlockFollower(Runner(), chunk=0)
    follower.follow(None)  # between instructions: the stock block may run (evaluation)
    follower.refuse_other_chunk()
    follower.follow(None, running_chunk=1)
    assert follower.runner.instruction is None  # its runner's backward is refused too
    with pytest.raises(InputError, match="model chunk 0's decoder ran while the plan runs chunk 1"):
        follower.refuse_other_chunk()
    planned = types.SimpleNamespace(chunk=0)
    follower.follow(planned, running_chunk=0)
    follower.refuse_other_chunk()
    assert follower.runner.instruction is planned

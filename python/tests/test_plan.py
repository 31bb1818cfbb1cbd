"""ExecutionPlan (kareus.plan, no torch): the C++ partitions with their planned knobs, and every
wrong plan named by the C++ rules (partition/comm_fit.h)."""

from __future__ import annotations

import json
import pathlib
import re
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parent / "torch"))  # the plan writer of the torch tests
import helpers  # noqa: E402
from kareus import CommConfig, InputError  # noqa: E402
from kareus._runtime import Workload  # noqa: E402
from kareus.plan import ExecutionPlan  # noqa: E402

GOOD = {
    "forward": {"fwd_attn": {"slot": "rope_0", "ctas": 12}, "fwd_mlp": {"slot": "none", "ctas": 6}},
    "backward": {"bwd_attn": {"slot": "attn_0", "ctas": 3}, "bwd_mlp": {"slot": "norm_0", "ctas": 30}},
}


@pytest.fixture()
def workload():
    return Workload(helpers.TINY_MODEL, tp=2, pp=2, mbs=2, seq=64, microbatches=2)


def _plan(tmp_path, workload, configs=GOOD, stages=2, edit=None):
    path = helpers.write_plan(tmp_path / "plan.json", stages, 2, configs, recompute=True)
    if edit is not None:
        document = json.loads(open(path).read())
        edit(document)
        open(path, "w").write(json.dumps(document))
    return ExecutionPlan(path, workload, sm_count=108, default_comm_ctas=16)


def test_partitions_carry_their_planned_slot_and_launch_point(tmp_path, workload):
    plan = _plan(tmp_path, workload)
    stage0 = plan.stages[0]
    assert [(i.type, i.microbatch) for i in stage0] == [("forward", 0), ("forward", 1), ("backward", 0),
                                                       ("backward", 1)]
    forward = stage0[0].passes[0]
    # 2 layers: (attn, mlp) segments x 2 nanobatches + the trail pair.
    assert [p.key for p in forward] == ["fwd_attn", "fwd_attn", "fwd_mlp", "fwd_mlp"] * 2 + ["fwd_trail"] * 2
    assert forward[0].collective is None and forward[0].launch_index is None
    # fwd_attn at rope_0: ops input_norm, qkv, rope, ... -> before op 2; in layer 1 the segment
    # starts with the previous MLP's bias-dropout-add -> before op 3.
    assert forward[1].launch_index == 2 and forward[1].collective == ("attn_all_reduce", 0, 0)
    assert forward[5].launch_index == 3 and forward[5].ops[0] == ("mlp_bda", 0)
    # fwd_mlp at none: after all 5 ops.
    assert forward[2].launch_index == 5 and forward[2].choice.ctas == 6
    # The trail, not in the plan, runs at the GPU default with its first slot.
    assert forward[8].choice.ctas == 16 and forward[8].launch_index == 0
    # A backward with full recompute runs the forward partitions (its fwd_* configs), then bwd_*.
    assert len(stage0[2].passes) == 2 and stage0[2].passes[0][1].key == "fwd_attn"
    backward = stage0[2].passes[1]
    # bwd_mlp's slot norm_0 does not exist in the last layer's instance (no next layer's norm):
    # it launches at that instance's first slot with the planned CTAs, as the emulator does.
    assert backward[1].key == "bwd_mlp" and backward[1].launch_index == 0
    assert backward[1].choice == CommConfig(backward[1].slots[0][0], 30) and backward[1].slots[0][0] != "norm_0"
    assert backward[5].choice == CommConfig("norm_0", 30)
    assert backward[5].key == "bwd_mlp" and backward[5].launch_index == 0 and backward[5].ops[0][0] == "input_norm_bwd"
    assert plan.distinct_ctas() == [3, 6, 12, 16, 30]


def test_overlap_none_and_empty_partitions_are_not_nanobatched(tmp_path, workload):
    def edit(document):
        document["stages"][0]["instructions"][0].update(overlap="none", partitions={})
        document["stages"][1]["instructions"][0]["partitions"] = {}

    plan = _plan(tmp_path, workload, edit=edit)
    assert not plan.stages[0][0].nanobatched and plan.stages[0][0].passes == []
    assert not plan.stages[1][0].nanobatched
    assert plan.stages[0][1].nanobatched


@pytest.mark.parametrize(
    "edit, message",
    [
        # The C++ reader and workload check (kareus._runtime.read_plan, check_plan_workload).
        (lambda d: d.update(schema="kareus.plan/9"),
         r': schema must be "kareus.plan/2" \(or the older "kareus.plan/1"\), found "kareus.plan/9"$'),
        (lambda d: d["stages"][0]["instructions"][0].update(overlap="both"),
         r'stages\[0\]\.instructions\[0\]: overlap both: expected "none" \(Megatron\) or "nanobatch"$'),
        (lambda d: d["stages"][0]["instructions"][1]["partitions"]["fwd_mlp"].update(ctas=0),
         r"stages\[0\]\.instructions\[1\]\.partitions\.fwd_mlp: field 'ctas' must be an integer >= 1, found 0$"),
        (lambda d: d.update(workload={"tp": 4}), r": made for tp 4, this run has tp 2$"),
        (lambda d: d.update(workload={"seq": 32}), r": made for seq 32, this run has seq 64$"),
        (lambda d: d.update(workload={"mbs": 4}), r": made for mbs 4, this run has mbs 2$"),
        (lambda d: d.update(workload={"shape": {"hidden": 3072}}),
         r": made for shape\.hidden 3072, this run has shape\.hidden 64$"),
        # The partition configs against the C++ partition builder's partitions.
        (lambda d: d["stages"][1]["instructions"][0]["partitions"].update({"fwd_qkv_ag": {"slot": "norm_0", "ctas": 3}}),
         r"stage 1 instruction 0 \(forward microbatch 0\): unknown partition key 'fwd_qkv_ag' \(this instruction's "
         r"comm configs are for fwd_attn, fwd_mlp\)$"),
        (lambda d: d["stages"][1]["instructions"][0]["partitions"].update({"fwd_trail": {"slot": "norm_0", "ctas": 3}}),
         r"unknown partition key 'fwd_trail' \(this instruction's comm configs are for fwd_attn, fwd_mlp; a trail "
         r"runs at the GPU's default CTAs\)$"),
        (lambda d: d["stages"][0]["instructions"][1]["partitions"]["fwd_mlp"].update(ctas=132),
         r"stage 0 instruction 1 \(forward microbatch 1\): partition 'fwd_mlp': ctas 132 is outside 1\.\.108 "
         r"\(one CTA per SM\)$"),
        (lambda d: d["stages"][0]["instructions"][2]["partitions"]["bwd_attn"].update(slot="attn_1"),
         r"partition 'bwd_attn': no launch slot 'attn_1' \(slots: norm_0, linear_0, attn_0, rope_0, linear_1, none\)$"),
        (lambda d: d["stages"][0]["instructions"][2]["partitions"].pop("bwd_mlp"),
         r"stage 0 instruction 2 \(backward microbatch 0\): nanobatched, but no comm config for partition bwd_mlp "
         r"\(give its slot and ctas, or \"overlap\": \"none\"\)$"),
        (lambda d: d["stages"][0]["instructions"][2].update(overlap="nanobatch", partitions={}),
         r"stage 0 instruction 2 \(backward microbatch 0\): nanobatched, but no comm config for partition fwd_attn "),
    ],
)
def test_a_wrong_plan_is_named(tmp_path, workload, edit, message):
    with pytest.raises(InputError, match=message) as caught:
        _plan(tmp_path, workload, edit=edit)
    assert str(caught.value).startswith(f"{tmp_path / 'plan.json'}: ")


def test_a_plan_for_another_pipeline_or_gpu_is_named(tmp_path, workload):
    with pytest.raises(InputError, match=r": made for pp 1, this run has pp 2$"):
        _plan(tmp_path, workload, stages=1)

    def edit(document):
        document["workload"] = {"gpu": "h100-sxm"}

    with pytest.raises(InputError, match=r': made for gpu "h100-sxm", this run has gpu "a100-40gb"$'):
        ExecutionPlan(_plan(tmp_path, workload, edit=edit).path, workload, 108, 16, gpu="a100-40gb")


def test_unreadable_plan(tmp_path, workload):
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(InputError, match=r"bad.json:1:2: invalid JSON"):
        ExecutionPlan(str(tmp_path / "bad.json"), workload, 108, 16)
    with pytest.raises(InputError, match=r"cannot read .*missing.json"):
        ExecutionPlan(str(tmp_path / "missing.json"), workload, 108, 16)


def test_workload_binding_names_bad_degrees():
    with pytest.raises(InputError, match=r"^--tp 3 must divide the 4 attention heads of tiny-llama$"):
        Workload(helpers.TINY_MODEL, tp=3)
    with pytest.raises(InputError, match=r'^direction must be "forward" or "backward", found "sideways"$'):
        Workload(helpers.TINY_MODEL, tp=2).partitions(0, "sideways")
    with pytest.raises(InputError, match=r"stage 2 is outside 0\.\.1"):
        Workload(helpers.TINY_MODEL, tp=2, pp=2).partitions(2, "forward")


def test_a_slot_of_the_steady_layer_is_valid_on_a_one_layer_stage(tmp_path):
    # Stage 1 holds one layer: its only bwd_mlp instances are the last layer's, without the next
    # layer's norm, so their slots start at elementwise_0; the plan's norm_0 (the steady layer's)
    # is accepted and launches at the instance's first slot.
    workload = Workload(helpers.TINY_MODEL, tp=2, pp=2, mbs=2, seq=64, microbatches=2, layers_per_stage=[3, 1])
    assert workload.representative_slots("bwd_mlp") == ["norm_0", "linear_0", "activation_0", "linear_1"]
    plan = _plan(tmp_path, workload)
    backward = plan.stages[1][1].passes[1]
    assert backward[1].key == "bwd_mlp" and backward[1].slots[0] == ("elementwise_0", 0)
    assert backward[1].choice == CommConfig("elementwise_0", 30) and backward[1].launch_index == 0


@pytest.mark.parametrize("freq_mhz", [1411, 10**9])
def test_a_clock_the_gpu_lacks_is_refused(tmp_path, workload, freq_mhz):
    def edit(document):
        document["stages"][1]["instructions"][2]["freq_mhz"] = freq_mhz  # stage 1: F0 B0 F1 B1

    path = _plan(tmp_path, workload, edit=edit).path  # no GPU given: clocks are the runtime's to check
    with pytest.raises(InputError, match=rf"^{re.escape(path)}: stage 1 instruction 2 \(forward microbatch 1\): freq_mhz "
                                         rf"{freq_mhz} is not a clock of a100-40gb \(210\.\.1410 MHz in 15 MHz steps\)$"):
        ExecutionPlan(path, workload, 108, 16, gpu="a100-40gb")


def test_the_gpus_own_grid_decides(tmp_path, workload):
    def edit(document):
        document["stages"][0]["instructions"][0]["freq_mhz"] = 1500  # above the A100's 1410, an H100 clock

    path = _plan(tmp_path, workload, edit=edit).path
    with pytest.raises(InputError, match=r"freq_mhz 1500 is not a clock of a100-40gb \(210\.\.1410 MHz"):
        ExecutionPlan(path, workload, 108, 16, gpu="a100-40gb")
    assert ExecutionPlan(path, workload, 132, 16, gpu="h100-sxm").stages[0][0].freq_mhz == 1500


def test_token_nanobatches_are_planned_but_not_executed(tmp_path):
    # --mbs 1: the planner prices the two halves of the one sequence; the executors split batches.
    one_sequence = Workload(helpers.TINY_MODEL, tp=2, pp=2, mbs=1, seq=64, microbatches=2)
    with pytest.raises(InputError, match=r"stage 0's forward of microbatch 0 is nanobatched, and with --mbs 1 "
                                         r"its nanobatches are the two halves of one sequence"):
        _plan(tmp_path, one_sequence)

    def no_overlap(document):
        for stage in document["stages"]:
            for instruction in stage["instructions"]:
                instruction.update(overlap="none", partitions={})

    plan = _plan(tmp_path, one_sequence, edit=no_overlap)
    assert not any(instruction.nanobatched for stage in plan.stages for instruction in stage)

"""Acceptance test of the kareus Python module: a fake 1F1B training loop on the CPU follows a
plan with the recorder clock backend; the applied clocks and every comm_config answer must equal
the plan, and any deviation from the plan must raise a clear kareus.InputError."""

import json
import os
import signal
import time

import pytest

import kareus

STAGES = 2
MICROBATCHES = 4
TP = 2
DP = 2


one_f_one_b = kareus.one_f_one_b


def make_plan(path, clock_offset_mhz=0):
    """A plan whose clocks and comm configs differ per stage, type and microbatch."""
    stages = []
    for stage in range(STAGES):
        instructions = []
        for kind, microbatch in one_f_one_b(stage, STAGES, MICROBATCHES):
            backward = kind == "backward"
            # Consecutive microbatches share clocks sometimes, so set-only-on-change is exercised.
            clock = 1980 - 15 * (20 * stage + (10 if backward else 0) + microbatch // 2) - clock_offset_mhz
            partitions = {"fwd_attn": {"slot": "linear_0", "ctas": 4 + microbatch + 8 * stage}}
            if backward:
                partitions = {
                    "bwd_attn": {"slot": "linear_1", "ctas": 6 + microbatch},
                    # the recompute forward inside the backward has its own config here
                    "fwd_attn": {"slot": "mlp_0", "ctas": 20 + microbatch},
                }
            instructions.append(
                {"type": kind, "microbatch": microbatch, "freq_mhz": clock, "partitions": partitions}
            )
        stages.append({"stage": stage, "instructions": instructions})
    document = {
        "schema": "kareus.plan/1",
        "workload": {"model": "test"},
        "predicted": {"time_s": 1.0, "energy_j": 100.0},
        "stages": stages,
    }
    path.write_text(json.dumps(document))
    return document


def make_optimizer(*args, install_signal_handlers=False, **kwargs):
    """Most tests hold several optimizers; only one per process may install signal handlers."""
    return kareus.PipelineFrequencyOptimizer(*args, install_signal_handlers=install_signal_handlers, **kwargs)


def deduplicated(values):
    result = []
    for value in values:
        if not result or result[-1] != value:
            result.append(value)
    return result


def run_step(optimizer, stage, zeus_style=False):
    """One training iteration; returns every comm_config answer as {(kind, mb, key): CommConfig}."""
    answers = {}
    optimizer.on_step_begin()
    for kind, microbatch in one_f_one_b(stage, STAGES, MICROBATCHES):
        if zeus_style:
            optimizer.on_instruction_begin(kind)
        else:
            optimizer.on_instruction_begin(kind, microbatch)
        keys = ["fwd_attn"] if kind == "forward" else ["bwd_attn", "fwd_attn"]
        for key in keys:
            answers[(kind, microbatch, key)] = optimizer.comm_config(key)
        optimizer.on_instruction_end(kind)
    optimizer.on_step_end()
    return answers


@pytest.mark.parametrize("zeus_style", [False, True])
def test_every_rank_follows_the_plan(tmp_path, zeus_style):
    plan = make_plan(tmp_path / "plan.json")
    for rank in range(TP * DP * STAGES):
        stage = 0 if rank < 4 else 1  # TP x DP = 4 ranks per stage
        with make_optimizer(
            tmp_path / "plan.json", rank=rank, tp=TP, dp=DP, pp=STAGES
        ) as optimizer:
            assert optimizer.stage == stage
            planned = plan["stages"][stage]["instructions"]
            for _ in range(2):
                answers = run_step(optimizer, stage, zeus_style)
                for instruction in planned:
                    for key, config in instruction["partitions"].items():
                        answer = answers[(instruction["type"], instruction["microbatch"], key)]
                        assert answer == kareus.CommConfig(config["slot"], config["ctas"])
            optimizer.flush()
            timeline = optimizer.timeline()
            clocks = [instruction["freq_mhz"] for instruction in planned]
            # Two steps; the clock of step 2's first instruction differs from step 1's last.
            assert clocks[0] != clocks[-1]
            assert [sample.requested_mhz for sample in timeline] == deduplicated(clocks * 2)
            assert all(sample.effective_mhz == sample.requested_mhz for sample in timeline)
            assert [sample.time_s for sample in timeline] == sorted(sample.time_s for sample in timeline)


def test_out_of_order_instruction_raises_a_clear_error(tmp_path):
    make_plan(tmp_path / "plan.json")
    optimizer = make_optimizer(tmp_path / "plan.json", rank=4, tp=TP, dp=DP, pp=STAGES)
    optimizer.on_step_begin()
    optimizer.on_instruction_begin("forward", 0)
    optimizer.on_instruction_end("forward")
    with pytest.raises(kareus.InputError, match="^stage 1: expected backward microbatch 0, got forward microbatch 1$"):
        optimizer.on_instruction_begin("forward", 1)
    assert issubclass(kareus.InputError, ValueError)
    optimizer.on_instruction_begin("backward", 0)
    with pytest.raises(kareus.InputError, match="has no comm config for partition 'fwd_mlp'"):
        optimizer.comm_config("fwd_mlp")
    with pytest.raises(kareus.InputError, match="on_instruction_end\\('forward'\\) but the running instruction"):
        optimizer.on_instruction_end("forward")
    optimizer.on_instruction_end()
    with pytest.raises(kareus.InputError, match="step ended after 2 of 8 instructions, expected forward microbatch 1"):
        optimizer.on_step_end()
    with pytest.raises(kareus.InputError, match="instruction type must be \"forward\" or \"backward\""):
        optimizer.on_instruction_begin("fwd")


def test_bad_setup_is_named(tmp_path):
    make_plan(tmp_path / "plan.json")
    with pytest.raises(kareus.InputError, match="rank 8 is out of range: world size is 8"):
        make_optimizer(tmp_path / "plan.json", rank=8, tp=TP, dp=DP, pp=STAGES)
    with pytest.raises(kareus.InputError, match="cannot read .*missing.json"):
        make_optimizer(tmp_path / "missing.json", pp=STAGES)
    with pytest.raises(kareus.KareusError, match="no NVIDIA driver found"):
        make_optimizer(
            tmp_path / "plan.json", pp=STAGES, clock_backend="nvml:/nonexistent/libnvidia-ml.so.1"
        )


def test_switch_for_deadline_between_steps(tmp_path):
    make_plan(tmp_path / "fast.json")
    make_plan(tmp_path / "slow.json", clock_offset_mhz=300)
    (tmp_path / "frontier.json").write_text(json.dumps({
        "schema": "kareus.frontier/1",
        "points": [
            {"time_s": 1.0, "energy_j": 120.0, "plan": "fast.json"},
            {"time_s": 1.4, "energy_j": 90.0, "plan": "slow.json"},
        ],
    }))
    optimizer = make_optimizer(tmp_path / "fast.json", rank=0, pp=STAGES)
    optimizer.on_step_begin()
    with pytest.raises(kareus.InputError, match="stage 0: switch_for_deadline called mid-step"):
        optimizer.switch_for_deadline(tmp_path / "frontier.json", 1.5)
    optimizer.close()

    optimizer = make_optimizer(tmp_path / "fast.json", rank=0, pp=STAGES)
    run_step(optimizer, 0)
    plan, meets = optimizer.switch_for_deadline(tmp_path / "frontier.json", 1.5)
    assert (os.path.basename(plan), meets) == ("slow.json", True)
    run_step(optimizer, 0)
    optimizer.flush()
    assert optimizer.timeline()[-1].requested_mhz == 1980 - 15 * (10 + 1) - 300  # last: B3 of the slow plan
    assert kareus.choose_for_deadline([(1.0, 120.0, "a"), (1.4, 90.0, "b")], 0.5) == (0, False)


def test_sigint_resets_clocks_then_raises_keyboard_interrupt(tmp_path):
    make_plan(tmp_path / "plan.json")
    optimizer = kareus.PipelineFrequencyOptimizer(tmp_path / "plan.json", rank=0, pp=STAGES)  # handlers by default
    with pytest.raises(kareus.KareusError, match="signal handlers are already installed by another kareus runtime"):
        kareus.PipelineFrequencyOptimizer(tmp_path / "plan.json", rank=0, pp=STAGES)
    optimizer.on_step_begin()
    optimizer.on_instruction_begin("forward", 0)
    optimizer.flush()
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(500):
            time.sleep(0.01)
    timeline = optimizer.timeline()
    assert timeline[0].requested_mhz == 1980
    assert timeline[-1].requested_mhz == 0  # the reset, before Python saw the interrupt
    optimizer.close()
    with pytest.raises(kareus.InputError, match="closed"):
        optimizer.on_step_begin()
    # Closed: its handlers are gone, so a new optimizer may install them.
    kareus.PipelineFrequencyOptimizer(tmp_path / "plan.json", rank=0, pp=STAGES).close()


def test_a_deeply_nested_plan_is_refused_not_a_crash(tmp_path):
    # 90,000 levels in a field the error message would quote used to overflow the stack.
    (tmp_path / "deep.json").write_text('{"schema": "kareus.plan/1", "freq_mhz": ' + "[" * 90000)
    with pytest.raises(kareus.InputError, match="deep.json:1:104: JSON nested deeper than 64 levels$"):
        make_optimizer(tmp_path / "deep.json", pp=STAGES)


def test_the_plan_contract_is_the_cpp_one(tmp_path):
    # 1F1B by hand: stage 0 of 2 warms up with one forward; the last stage alternates.
    assert kareus.one_f_one_b(0, 2, 3) == [("forward", 0), ("forward", 1), ("backward", 0), ("forward", 2),
                                           ("backward", 1), ("backward", 2)]
    assert kareus.one_f_one_b(1, 2, 2) == [("forward", 0), ("backward", 0), ("forward", 1), ("backward", 1)]
    with pytest.raises(kareus.InputError, match="stage 2, stages 2"):
        kareus.one_f_one_b(2, 2, 1)
    # Megatron's rank order: tp fastest, then cp, dp, pp (tp 2, cp 1, dp 2, pp 2).
    assert kareus.global_rank(1, 0, 1, 1, tp=2, dp=2, pp=2) == 1 + 2 * (1 + 2 * 1)
    assert kareus.map_rank(7, tp=2, dp=2, pp=2) == {"tp_rank": 1, "cp_rank": 0, "dp_rank": 1, "stage": 1}
    assert kareus.parallel_groups("tp", tp=2, dp=2, pp=2) == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert kareus.parallel_groups("gradient", tp=2, dp=2, pp=2) == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert kareus.parallel_groups("embedding", tp=2, dp=2, pp=2) == [[0, 4], [1, 5], [2, 6], [3, 7]]
    with pytest.raises(kareus.InputError, match='expected tp, cp, gradient or embedding, found "pp"'):
        kareus.parallel_groups("pp")
    # One reader and one workload check: the plan's own stage and microbatch counts included.
    document = make_plan(tmp_path / "plan.json")
    plan = kareus.read_plan(tmp_path / "plan.json")
    assert plan.microbatches == MICROBATCHES and len(plan.stages) == STAGES
    first = plan.stages[1][0]
    assert (first.type, first.microbatch, first.freq_mhz, first.overlap) == ("forward", 0, 1680, "nanobatch")
    assert first.partitions == {"fwd_attn": kareus.CommConfig("linear_0", 12)}
    assert plan.stages[0][1].partitions["fwd_attn"] == kareus.CommConfig("linear_0", 5)
    assert kareus.CommConfig("none", 0).overlapped is False
    from kareus._runtime import Workload
    workload = Workload("llama3.2-3b", tp=2, pp=2, dp=2, seq=256, microbatches=MICROBATCHES)
    with pytest.raises(kareus.InputError, match='^plan: made for model "test", this run has model "llama3.2-3b"$'):
        kareus.check_plan_workload(plan, workload, "a100-40gb")  # the fields the block names are compared
    document["workload"] = json.loads(workload.to_json())
    document["workload"]["gpu"] = "a100-40gb"
    (tmp_path / "plan.json").write_text(json.dumps(document))
    plan = kareus.read_plan(tmp_path / "plan.json")
    kareus.check_plan_workload(plan, workload, "a100-40gb")
    for change, field in [({"seq": 128}, "seq 256, this run has seq 128"), ({"mbs": 4}, "mbs 2, this run has mbs 4"),
                          ({"microbatches": 2}, "microbatches 4, this run has microbatches 2")]:
        other = Workload("llama3.2-3b", **{"tp": 2, "pp": 2, "dp": 2, "seq": 256, "microbatches": MICROBATCHES,
                                           **change})
        with pytest.raises(kareus.InputError, match=f"^p: made for {field}$"):
            kareus.check_plan_workload(plan, other, "a100-40gb", origin="p")
    with pytest.raises(kareus.InputError, match='^p: made for gpu "a100-40gb", this run has gpu "h200"$'):
        kareus.check_plan_workload(plan, workload, "h200", origin="p")


def _recorded_plan(tmp_path, edit, name="plan.json"):
    """A plan for a real workload (its block records the workload and GPU, as the planner
    writes it), edited; the bare optimizer checks it against the C++ rules."""
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "torch"))
    import helpers
    from kareus._runtime import Workload

    workload = Workload(helpers.TINY_MODEL, tp=2, pp=2, mbs=2, seq=64, microbatches=2)
    block = json.loads(workload.to_json())
    block["gpu"] = "a100-40gb"
    configs = {"forward": {"fwd_attn": {"slot": "rope_0", "ctas": 12}, "fwd_mlp": {"slot": "none", "ctas": 6}},
               "backward": {"bwd_attn": {"slot": "attn_0", "ctas": 3}, "bwd_mlp": {"slot": "norm_0", "ctas": 30}}}
    path = helpers.write_plan(tmp_path / name, 2, 2, configs, recompute=True, workload=block)
    document = json.loads(open(path).read())
    edit(document["stages"][0]["instructions"][1])  # stage 0: F0 F1 B0 B1
    open(path, "w").write(json.dumps(document))
    return path


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda i: i.update(freq_mhz=1411), "freq_mhz 1411 is not a clock of the GPU behind recorder"),
        (lambda i: i.update(freq_mhz=10**9), "freq_mhz 1000000000 is not a clock of the GPU behind recorder"),
        (lambda i: i["partitions"]["fwd_attn"].update(ctas=10**9),
         r"partition 'fwd_attn': ctas 1000000000 is outside 1\.\.65536 \(kareus's CTA limit\)"),
        (lambda i: i["partitions"]["fwd_mlp"].update(slot="evil_0"), r"partition 'fwd_mlp': no launch slot 'evil_0'"),
        (lambda i: i["partitions"].update(evil_key={"slot": "none", "ctas": 4}), r"unknown partition key 'evil_key'"),
    ],
)
def test_the_bare_optimizer_refuses_what_the_plan_check_refuses(tmp_path, edit, message):
    good = _recorded_plan(tmp_path, lambda instruction: None, "good.json")
    make_optimizer(good, rank=0, tp=2, pp=2).close()  # the unedited plan runs
    path = _recorded_plan(tmp_path, edit)
    with pytest.raises(kareus.InputError, match=r"plan\.json: stage 0 instruction 1 \(forward microbatch 1\): " + message):
        make_optimizer(path, rank=0, tp=2, pp=2)
    # ... and so does a switch to it.
    optimizer = make_optimizer(good, rank=0, tp=2, pp=2)
    with pytest.raises(kareus.InputError, match=message):
        optimizer.switch_plan(path)
    optimizer.close()

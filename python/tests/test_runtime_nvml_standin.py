"""The runtime's own NVML backend (clock_backend "nvml:PATH", no kareusd) against the stand-in
libnvidia-ml.so.1 of tests/nvml_standin, whose GPU state lives in a file as a GPU's clocks
outlive a process: the plan's clocks reach the GPU, every way out a process has (close, an
exception, SIGTERM) leaves the GPU at the driver's default, and an NVML fault is reported, or
raised under strict_clocks, naming it. (SIGKILL of a process that drives NVML itself leaves the
GPU locked: that is what kareusd is for, tests/runtime/nvml_standin_test.sh.)"""

import fcntl
import json
import os
import signal
import subprocess
import sys

import pytest

import kareus

STANDIN = os.environ.get("KAREUS_NVML_STANDIN")
pytestmark = pytest.mark.skipif(not STANDIN, reason="KAREUS_NVML_STANDIN (the stand-in library) not set; ctest sets it")
MICROBATCHES = 4


def make_plan(path):
    """One stage; every instruction at its own clock on the stand-in's 210..1410 MHz grid."""
    instructions = [{"type": kind, "microbatch": microbatch, "freq_mhz": 1410 - 90 * index, "partitions": {}}
                    for index, (kind, microbatch) in enumerate(kareus.one_f_one_b(0, 1, MICROBATCHES))]
    path.write_text(json.dumps({"schema": "kareus.plan/1", "workload": {"model": "test"},
                                "predicted": {"time_s": 1.0, "energy_j": 100.0},
                                "stages": [{"stage": 0, "instructions": instructions}]}))
    return instructions


def locked_mhz(state_path, gpu=0):
    """GPU `gpu`'s locked clock as the stand-in records it (0: the driver's default)."""
    for line in state_path.read_text().splitlines():
        words = line.split()
        if words[:3] == ["gpu", str(gpu), "locked_mhz"]:
            return int(words[3])
    raise AssertionError(f"no clock of gpu {gpu} in {state_path}")


def inject(state_path, line):
    with open(state_path, "a") as state:
        fcntl.flock(state, fcntl.LOCK_EX)  # as the stand-in locks it
        state.write(line + "\n")


@pytest.fixture
def gpu_state(tmp_path, monkeypatch):
    state = tmp_path / "gpu.state"
    monkeypatch.setenv("KAREUS_NVML_STANDIN_STATE", str(state))
    return state


def optimizer_for(plan, **kwargs):
    kwargs.setdefault("install_signal_handlers", False)
    return kareus.PipelineFrequencyOptimizer(plan, clock_backend=f"nvml:{STANDIN}", **kwargs)


def test_the_plans_clocks_reach_the_gpu_and_close_resets_them(tmp_path, gpu_state):
    instructions = make_plan(tmp_path / "plan.json")
    optimizer = optimizer_for(tmp_path / "plan.json")
    seen = []
    for _ in range(2):
        optimizer.on_step_begin()
        for instruction in instructions:
            optimizer.on_instruction_begin(instruction["type"], instruction["microbatch"])
            optimizer.flush()
            seen.append(locked_mhz(gpu_state))
            optimizer.on_instruction_end()
        optimizer.on_step_end()
    assert seen == [instruction["freq_mhz"] for instruction in instructions] * 2
    assert optimizer.failed_clock_changes == 0
    optimizer.close()
    assert locked_mhz(gpu_state) == 0


def test_an_exception_in_the_training_loop_resets_the_clocks(tmp_path, gpu_state):
    instructions = make_plan(tmp_path / "plan.json")
    with pytest.raises(ZeroDivisionError):
        with optimizer_for(tmp_path / "plan.json") as optimizer:
            optimizer.on_step_begin()
            optimizer.on_instruction_begin("forward", 0)
            optimizer.flush()
            assert locked_mhz(gpu_state) == instructions[0]["freq_mhz"]
            1 / 0
    assert locked_mhz(gpu_state) == 0


def test_sigterm_resets_the_clocks_before_the_process_ends(tmp_path, gpu_state):
    make_plan(tmp_path / "plan.json")
    trainer = subprocess.Popen(
        [sys.executable, "-c", f"""
import sys, time, kareus
optimizer = kareus.PipelineFrequencyOptimizer({str(tmp_path / 'plan.json')!r}, clock_backend={'nvml:' + STANDIN!r})
optimizer.on_step_begin()
optimizer.on_instruction_begin("forward", 0)
optimizer.flush()
print("locked", flush=True)
time.sleep(60)
"""], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        assert trainer.stdout.readline().strip() == "locked", trainer.stderr.read()
        assert locked_mhz(gpu_state) == 1410
        trainer.send_signal(signal.SIGTERM)
        trainer.wait(timeout=30)
    finally:
        trainer.kill()
    assert trainer.returncode != 0  # SIGTERM still ends it, after the reset
    assert locked_mhz(gpu_state) == 0


@pytest.mark.parametrize("strict", [False, True])
def test_an_nvml_fault_keeps_the_previous_clock_and_names_the_error(tmp_path, gpu_state, strict, capfd):
    instructions = make_plan(tmp_path / "plan.json")
    optimizer = optimizer_for(tmp_path / "plan.json", strict_clocks=strict)
    optimizer.on_step_begin()
    optimizer.on_instruction_begin("forward", 0)
    optimizer.flush()
    optimizer.on_instruction_end()
    inject(gpu_state, "fault nvmlDeviceSetGpuLockedClocks 4")  # NVML_ERROR_NO_PERMISSION
    next_type, next_microbatch = instructions[1]["type"], instructions[1]["microbatch"]
    if strict:
        with pytest.raises(kareus.KareusError, match=r"nvmlDeviceSetGpuLockedClocks\(gpu 0, 1320 MHz\) failed: "
                                                     r"Insufficient Permissions \(NVML error 4\)"):
            optimizer.on_instruction_begin(next_type, next_microbatch)
            optimizer.flush()
    else:
        optimizer.on_instruction_begin(next_type, next_microbatch)
        optimizer.flush()
        assert optimizer.failed_clock_changes == 1
        assert "failed the clock change to 1320 MHz" in capfd.readouterr().err
    assert locked_mhz(gpu_state) == instructions[0]["freq_mhz"]  # the previous clock stays
    optimizer.close()  # the reset is another call (nvmlDeviceResetGpuLockedClocks), not refused
    assert locked_mhz(gpu_state) == 0

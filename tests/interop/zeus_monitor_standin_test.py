"""Zeus 0.16's ZeusMonitor reads GPU energy through the stand-in libnvidia-ml.so.1 of
tests/nvml_standin (found by the normal loader: LD_LIBRARY_PATH), while the kareus runtime locks
one GPU's clock through the same library by its plain name: the energy Zeus measures over a
window is the stand-in's power times the window (300 W unlocked, 100 W + 0.1 W per locked MHz),
within the counter's 100 ms steps. Exit 77 (skipped) without zeus or the kareus module."""
import json
import os
import sys
import tempfile
import time

try:
    import kareus
    from zeus.monitor import ZeusMonitor
except ImportError as error:
    print(f"skipped: {error}")
    sys.exit(77)

LOCKED_MHZ = 1005
COUNTER_STEP_S = 0.1


def power_w(locked_mhz):
    return 300.0 if locked_mhz == 0 else 100.0 + 0.1 * locked_mhz


def window(monitor, seconds):
    # No framework sync: the stand-in's GPUs run no kernels (and torch here has no CUDA).
    monitor.begin_window("w", sync_execution=False)
    time.sleep(seconds)
    return monitor.end_window("w", sync_execution=False)


def check(measurement, locked):
    for gpu, locked_mhz in locked.items():
        expected_j = power_w(locked_mhz) * measurement.time
        # Each end of the window may miss up to one counter step.
        tolerance_j = 2 * COUNTER_STEP_S * power_w(locked_mhz) + 1e-6
        got_j = measurement.gpu_energy[gpu]
        assert abs(got_j - expected_j) <= tolerance_j, (gpu, got_j, expected_j, measurement)


def main():
    with tempfile.TemporaryDirectory() as folder:
        os.environ["KAREUS_NVML_STANDIN_STATE"] = os.path.join(folder, "gpu.state")
        monitor = ZeusMonitor(gpu_indices=[0, 1], cpu_indices=[])
        check(window(monitor, 1.0), {0: 0, 1: 0})

        plan = os.path.join(folder, "plan.json")
        with open(plan, "w") as file:
            json.dump({"schema": "kareus.plan/1", "workload": {"model": "test"},
                       "predicted": {"time_s": 1.0, "energy_j": 1.0},
                       "stages": [{"stage": 0, "instructions": [
                           {"type": kind, "microbatch": microbatch, "freq_mhz": LOCKED_MHZ, "partitions": {}}
                           for kind, microbatch in kareus.one_f_one_b(0, 1, 1)]}]}, file)
        optimizer = kareus.PipelineFrequencyOptimizer(plan, clock_backend="nvml", install_signal_handlers=False)
        optimizer.on_step_begin()
        optimizer.on_instruction_begin("forward", 0)
        optimizer.flush()
        check(window(monitor, 1.0), {0: LOCKED_MHZ, 1: 0})
        optimizer.close()
        check(window(monitor, 0.5), {0: 0, 1: 0})
    print("zeus_monitor_standin: ok")


if __name__ == "__main__":
    main()

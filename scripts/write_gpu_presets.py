#!/usr/bin/env python3
"""Writes data/gpus/*.json: every emulator parameter with its source.

Sources: [S] spec sheet, [M] third-party measurement, [D] arithmetic on cited numbers,
[F] calibration fit (against docs/kareus.md section 9; the fit is described in bench/RESULTS.md), [E]
engineering estimate to be replaced by `kareus calibrate` on real measurements.
Keys of docs/gpu-data.md name where the [S]/[M] numbers come from.
"""
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent

# Shared physics of the emulator's calibration (fit on A100, kept for Hopper unless measured).
FIT = "[F] fit to docs/kareus.md section 9 (Llama 3.2 3B, 4 configs), see bench/RESULTS.md"
# The two overlap parameters fitted to the A100 ratios T(N+P fastest) / T(Perseus fastest)
# (planner/overlap_calibration.h, bench/overlap_calibration_bench.cpp, leave-one-out in bench/RESULTS.md).
OVERLAP_FIT = "[F] fit to the six A100 overlap ratios (Llama 3.2 3B x4, Qwen3 1.7B x2; leave-one-out and leave-one-model-out in bench/RESULTS.md, Emulator calibration)"

A100 = {
    "name": "a100-40gb",
    "description": "NVIDIA A100 SXM4 40GB in an 8-GPU NVSwitch node (HGX/DGX A100)",
    "parameters": {
        "sm_count": (108, "[S] A100 whitepaper"),
        "clock_min_mhz": (210, "[M] nvidia-smi supported clocks (docs/gpu-data.md section 1)"),
        "clock_max_mhz": (1410, "[S] boost clock"),
        "clock_step_mhz": (15, "[M] 1panel, mert (docs/gpu-data.md section 1)"),
        "clock_default_mhz": (1410, "[M] A100 runs at max boost under load below the power limit"),
        "clock_switch_latency_ms": (15, "[E] docs/kareus.md section 3: 10-20 ms per NVML call"),
        "flop_per_clock_per_sm": (2048, "[D] 312 TFLOP/s / (108 SMs x 1.41 GHz)"),
        "cuda_core_flop_fraction": (0.0625, "[D] A100 datasheet [S]: 19.5 TFLOP/s FP32 / 312 TFLOP/s dense bf16 tensor"),
        "gemm_efficiency": (0.80, "[M] MLE: max achievable bf16 matmul 271 TFLOP/s = 87%; AZ 8192^3 253.7 = 81%"),
        "gemm_tile_m": (128, "[E] cuBLAS bf16 CTA tile on Ampere"),
        "gemm_tile_n": (256, "[E] cuBLAS bf16 CTA tile on Ampere"),
        "gemm_small_k_half": (270, FIT + "; AZ skinny 1024x2145x1024 reaches 43%"),
        "attention_forward_efficiency": (0.33, FIT + "; below FA2's 43-47% [M]: Megatron/TE at 3-6 heads per GPU"),
        "attention_backward_efficiency": (0.428, OVERLAP_FIT + " with the iterations' time and power, in the cited 0.37-0.48: [M] FA2 causal bwd d=128 A100: 145-186 TFLOP/s at 2.5x fwd FLOPs = 0.37-0.48 at 2x"),
        "launch_latency_us": (8.7, FIT + "; kernel launch + inter-kernel gaps of eager PyTorch"),
        "hbm_bandwidth_gbps": (1555, "[S] 1215 MHz x 2 x 5120 bit"),
        "hbm_efficiency": (0.85, "[M] AZ STREAM copy 1.61 of 2.0 TB/s on the 80GB part (0.81-0.85)"),
        "sm_bytes_per_clock": (24, "[E] per-SM HBM throughput; memory-bound time flat down to ~510 MHz"),
        "link_bandwidth_gbps": (300, "[S] NVLink3, 12 links, per direction"),
        "link_efficiency": (0.875, FIT + "; with the CTA limit at 24 channels gives ~224 GB/s busbw, near t175/AZ 232"),
        "link_latency_us": (8, "[E] NCCL ring step latency intra-node"),
        "collective_fill_mib": (20, "[D] fits AZ busbw vs size: 16M 109, 67M 167, 268M 214, 1G 228 GB/s"),
        "cta_bytes_per_clock": (8.0, "[D] ~232 GB/s / 24 channels at 1410 MHz (docs/gpu-data.md section 3) = 6.9, raised so the smooth min meets 232 at 24"),
        "default_comm_ctas": (24, "[M] t100: NCCL default 24 channels on A100"),
        "comm_sm_share": (1.0, "[M] n689: NCCL CTAs do not share an SM with compute"),
        "comm_hbm_bytes_per_byte": (3.0, "[E] ring all-reduce step: read local + read received + write, per bus byte"),
        "comm_overlap_slowdown": (0.93, OVERLAP_FIT + "; beyond its HBM share (the emulator shares HBM in proportion to demand), a collective beside compute contends for L2 and SM issue; fitted in 0..1 (compute beside a collective slows 18.9% on average, 40% at most: Lee et al., arXiv 2507.03114; a send/recv beside a GEMM ran up to 2x longer than alone: n1433)"),
        "partition_sync_us": (52, OVERLAP_FIT + "; GPU-side, per partition: the compute stream's wait on the collective's event, the NCCL kernel's launch and its wait for the group's other ranks; fitted in the cited 30-70 us (NCCL's ring latency model, n1334; kernel launch; docs/gpu-data.md section 3)"),
        "partition_host_us": (831, OVERLAP_FIT + "; host-side: the artifact's executor issues each partition from Python (its 10-40 PyTorch ops, the collective's torch.distributed call, the stream events) at 5-25 us of CPU per PyTorch op (pt-dispatch), so 50-1000 us (docs/gpu-data.md section 3); fitted in that range. Only partitions shorter than it (Qwen3 CP2 TP4: 8k tokens x hidden 2048 per nanobatch) wait for the host"),
        "cp_exchange_ctas": (8, "[M] CP exchanges K/V by NCCL send/recv (ring attention) on its p2p channels, not the collective's: 2 per peer by default (n1189), 8 between two A100s at ~72 GB/s (t331), H100 pair ~80 GB/s (t268): 2-8 CTAs (docs/gpu-data.md section 3); the upper end, which the six ratios prefer"),
        "cp_ring_step_us": (354, OVERLAP_FIT + "; per step of context-parallel attention (CP steps per call): Transformer Engine's ring is a Python loop per call (te-cp) whose every step waits on the last K/V receive, posts the next send/recv, builds the step's views and calls the fused attention and the output corrections, tens of PyTorch ops at 5-25 us of CPU each (pt-dispatch), so 100-1000 us (docs/gpu-data.md section 3); fitted in that range. Charged as GPU idle, a stand-in for a host-bound step: why overlap costs more at CP2, where nanobatching doubles the calls"),
        "power_limit_w": (400, "[M] dock: default 400 W"),
        "static_power_w": (85, "[K] Kareus artifact: A100 blocked in P2P receive"),
        "idle_power_w": (60, "[M] peer: 59-62 W idle, no process"),
        "voltage_min_v": (0.66, FIT + "; with the slope below, V(1080 MHz) = 0.745 V, 5% above dock's 712.5 mV reading [M]"),
        "voltage_max_v": (0.90, FIT + "; VF curve shape from KernelTuner [KT]"),
        "voltage_knee_mhz": (900, FIT + "; KT model: flat floor then linear; Perseus/N+P slowest plans of docs/kareus.md section 9"),
        "sm_dynamic_power_w": (356, FIT),
        "hbm_power_w_per_tbps": (45, FIT),
        "link_power_w": (9, FIT),
        "activity_gemm": (1.0, "[E] reference activity (tensor cores saturated, random data)"),
        "activity_attention": (0.85, "[E] fused attention: tensor cores + softmax"),
        "activity_memory_bound": (0.24, FIT + "; SMs mostly stalled on memory"),
        "activity_comm_cta": (0.27, FIT + "; a copy CTA: load/store, no tensor cores"),
        "noise_time_fraction": (0.01, "[M] TSP: thermally stable 5 s windows repeat within ~1%"),
        "noise_energy_fraction": (0.015, "[M] TSP: +2.4% energy over +18 C; windows repeat within ~1.5%"),
        "energy_counter_period_ms": (100, "[M] TSP: counter updates ~100 ms"),
        "energy_counter_resolution_mj": (1, "[S] nvmlDeviceGetTotalEnergyConsumption is in mJ"),
    },
}


# The A100 values the Hopper presets take unchanged (the overlap fit's).
A100_VALUES = {key: value for key, (value, _) in A100["parameters"].items()}


def hopper(name, description, hbm_gbps, hbm_source, stream_efficiency, stream_source):
    preset = json.loads(json.dumps(A100))
    preset["name"] = name
    preset["description"] = description
    p = preset["parameters"]
    p["sm_count"] = (132, "[S] H100/H200 SXM: 132 SMs")
    p["clock_min_mhz"] = (345, "[M] eks: H200 idle clock 345 MHz (H100 by analogy (?))")
    p["clock_max_mhz"] = (1980, "[M] MLE, dgemm: max SM clock")
    p["clock_step_mhz"] = (15, "[E] (?) not confirmed for Hopper; 15 MHz as on A100")
    p["clock_default_mhz"] = (1980, "[M] eks: 1980 MHz under load")
    p["flop_per_clock_per_sm"] = (4096, "[D] 989 TFLOP/s / (132 x 1.83 GHz)")
    p["cuda_core_flop_fraction"] = (0.0677, "[D] H100/H200 SXM datasheets [S]: 67 TFLOP/s FP32 / 989 TFLOP/s dense bf16 tensor")
    p["gemm_efficiency"] = (0.78, "[M] project: H200 8192^3 bf16 ~788 TFLOP/s of 1070 at 1980 MHz = 0.74; MLE 794.5 at 80%")
    p["gemm_tile_n"] = (256, "[E] cuBLAS Hopper tile 128x256")
    p["attention_forward_efficiency"] = (0.55, "[M] FA3 causal fwd 616 TFLOP/s (of ~1070 at 1980 MHz) ~0.58; cuDNN close")
    p["attention_backward_efficiency"] = (0.45, "[M] FA3 bwd 1.5-1.75x FA2; (?) no causal figure")
    p["hbm_bandwidth_gbps"] = (hbm_gbps, hbm_source)
    p["hbm_efficiency"] = (stream_efficiency, stream_source)
    p["sm_bytes_per_clock"] = (24, "[E] as A100; calibrate on the device")
    p["link_bandwidth_gbps"] = (450, "[S] NVLink4, 18 links, per direction")
    p["link_efficiency"] = (0.82, "[M] n212: NCCL ring ~370 GB/s of 450")
    # Overlap parameters by the A100's rules (estimates until a Hopper device check measures a
    # collective at 4..32 CTAs beside a GEMM): see bench/RESULTS.md, Hopper presets.
    p["cta_bytes_per_clock"] = (8.0, "[E] the A100 rule: a copy CTA moves ~8 B per SM clock (A100: 232 GB/s busbw / 24 channels at 1410 MHz, raised for the smooth min); Hopper's SM load/store path per clock is taken unchanged, so 15.8 GB/s per CTA at 1980 MHz: the smooth min gives 92% of the 369 GB/s ring rate at 30 CTAs, as on the A100 (the ~30-SM knee of the Kareus paper)")
    p["default_comm_ctas"] = (32, "[E] (?) NCCL default channels on H100 NVSwitch")
    p["collective_fill_mib"] = (20, "[E] the A100 value; AZ H100/H200 busbw vs size (16M 235-240, 268M 423-432, 1G 466-468 GB/s) is NVLS, not the ring this models")
    p["comm_sm_share"] = (1.0, "[M] n689: NCCL CTAs do not share an SM with compute (any GPU)")
    p["comm_hbm_bytes_per_byte"] = (3.0, "[E] the A100 rule: ring step reads local + reads received + writes, per bus byte; HBM3/3e does not change the count")
    p["comm_overlap_slowdown"] = (A100_VALUES["comm_overlap_slowdown"], "[E] the A100 fit (L2/SM-issue contention beside compute, beyond the HBM share); Hopper's 50 MB L2 may lower it")
    p["partition_sync_us"] = (A100_VALUES["partition_sync_us"], "[E] the A100 fit: event wait, NCCL launch and rank skew, taken unchanged")
    p["partition_host_us"] = (A100_VALUES["partition_host_us"], "[E] the A100 fit: a host cost (Python and dispatch), not the GPU's")
    p["cp_exchange_ctas"] = (8, "[E] the A100 value: NCCL p2p channels (n1189, t331; t268: ~80 GB/s between two H100s is ~5 CTAs at 15.8 GB/s)")
    p["cp_ring_step_us"] = (A100_VALUES["cp_ring_step_us"], "[E] the A100 fit: a host cost (Transformer Engine's ring loop in Python), not the GPU's")
    p["power_limit_w"] = (700, "[S] 700 W TDP")
    p["static_power_w"] = (110, "[E] (?) between idle ~79 W (slurm) and context-idle ~140 W (burn); calibrate")
    p["idle_power_w"] = (79, "[M] slurm: 78.8 W, 700-W Hopper (?)")
    p["voltage_min_v"] = (0.67, "[E] (?) no public Hopper VF data")
    p["voltage_max_v"] = (0.95, "[E] (?) no public Hopper VF data")
    p["voltage_knee_mhz"] = (1395, "[E] (?) KT model shape; calibrate")
    p["sm_dynamic_power_w"] = (560, "[E] (?) scaled from A100 fit by SMs x FLOP/clk x clock^... so GEMM at 1980 MHz nears 700 W (dgemm: overlap hits the cap)")
    p["hbm_power_w_per_tbps"] = (40, "[E] (?) HBM3/3e per-bit energy a bit below HBM2")
    p["link_power_w"] = (35, "[E] (?) NVLink4")
    return preset


def h200():
    preset = hopper("h200", "NVIDIA H200 SXM 141GB in an 8-GPU NVSwitch node", 4800, "[S] 4.8 TB/s",
                    0.87, "[M] project: device-to-device copy ~4.3 TB/s read+write; AZ STREAM 4.01-4.15")
    # Measured on one H200 (scripts/device-check.sh); the H100 keeps the estimates until measured.
    preset["parameters"]["clock_step_mhz"] = (
        15, "[M] device check 2026-12-04: NVML lists 110 SM clocks, 345-1980 MHz in 15 MHz steps")
    preset["parameters"]["clock_switch_latency_ms"] = (
        90, "[M] device check 2026-12-04 (bench/RESULTS.md): NVML's call 8.6-13.2 ms; under load the new clock "
            "read 44 ms (1980 -> 1140 MHz) and 135 ms (1140 -> 1980) after the call; their mean")
    return preset


PRESETS = [
    A100,
    hopper("h100-sxm", "NVIDIA H100 SXM5 80GB in an 8-GPU NVSwitch node", 3350, "[S] 2619 MHz x 2 x 5120 bit",
           0.87, "[M] AZ STREAM copy 2.90 of 3.35 TB/s"),
    h200(),
]


def main():
    for preset in PRESETS:
        document = {
            "name": preset["name"],
            "description": preset["description"],
            "parameters": {key: {"value": value, "source": source} for key, (value, source) in preset["parameters"].items()},
        }
        path = ROOT / "data" / "gpus" / f"{preset['name']}.json"
        path.write_text(json.dumps(document, indent=2) + "\n")


if __name__ == "__main__":
    main()

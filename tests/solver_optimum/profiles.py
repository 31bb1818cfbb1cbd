"""Seeded random pipeline profiles of many shapes, for checking the solver against the optimum.

One profile: a 1F1B pipeline (stages x microbatches) whose forward and backward instructions of
each stage run at one of `clocks` GPU clocks, with time and energy per clock from a roofline-like
model drawn at random:

    time(f)  = base_s * layers * (fixed + (1 - fixed) * f_max / f)          (fixed-time fraction)
    power(f) = static_w + uncore_w + dynamic_w * (f / f_max) ** exponent
    energy   = power x time, both x (1 + noise) per measurement

Shapes drawn (per the solver's promise, docs/solver.md): fixed-time fractions 0.1-0.6, or a
memory-bound 0.75-0.9; power exponents 1.6-3.2; clocks down to 700-1100 MHz, or to 1150-1300
(nearly linear energy in time); imbalanced stages
(layers per stage differ by up to 40%); 9-35 clocks; measurement noise 0, 0.2% or 1%; solver
units 0.5-10 ms; static power 40-100 W. Every draw comes from random.Random(seed), so a seed
is a profile.
"""
import csv
import dataclasses
import hashlib
import random

F_MAX_MHZ = 1410


@dataclasses.dataclass
class Profile:
    seed: int
    stages: int
    microbatches: int
    unit_time_s: float
    static_power_w: float
    shape: str
    # (stage, "forward" | "backward") -> [(freq_mhz, time_s, energy_j)], fastest clock first
    options: dict

    def write_csv(self, path):
        with open(path, "w", newline="") as file:
            writer = csv.writer(file)
            writer.writerow(["stage", "instruction", "frequency", "time", "energy"])
            for (stage, kind), rows in sorted(self.options.items()):
                for freq, time_s, energy_j in rows:
                    writer.writerow([stage, kind, freq, repr(time_s), repr(energy_j)])


def seeds(label, count):
    """`count` seeds derived from `label` (sha256 of "label:index"): a named, fixed set."""
    return [int.from_bytes(hashlib.sha256(f"{label}:{index}".encode()).digest()[:4], "little")
            for index in range(count)]


def generate(seed, stages=None, microbatches=None):
    rng = random.Random(seed)
    stages = stages or rng.choice([2, 3])
    microbatches = microbatches or rng.randint(4, 8)
    clocks = rng.randint(9, 35)
    nearly_linear = rng.random() < 0.2  # a narrow clock range: energy nearly linear in time
    f_min = rng.uniform(1150, 1300) if nearly_linear else rng.uniform(700, 1100)
    freqs = sorted({round(F_MAX_MHZ - (F_MAX_MHZ - f_min) * k / (clocks - 1)) for k in range(clocks)}, reverse=True)
    memory_bound = rng.random() < 0.2
    fixed = rng.uniform(0.75, 0.9) if memory_bound else rng.uniform(0.1, 0.6)
    exponent = rng.uniform(1.6, 3.2)
    noise = rng.choice([0.0, 0.002, 0.01])
    static_w = rng.uniform(40, 100)
    uncore_w = rng.uniform(0, 80)
    dynamic_w = rng.uniform(150, 320)
    unit_time_s = rng.choice([0.0005, 0.001, 0.002, 0.005, 0.01])
    forward_per_layer_s = rng.uniform(0.001, 0.006)
    backward_ratio = rng.uniform(1.7, 2.3)
    mean_layers = rng.randint(6, 16)
    options = {}
    for stage in range(stages):
        layers = mean_layers * rng.uniform(0.7, 1.3)
        for kind, base_s in (("forward", forward_per_layer_s), ("backward", forward_per_layer_s * backward_ratio)):
            # Forward and backward stress the GPU differently: their dynamic power differs a little.
            kind_dynamic_w = dynamic_w * rng.uniform(0.85, 1.15)
            rows = []
            for freq in freqs:
                time_s = base_s * layers * (fixed + (1 - fixed) * F_MAX_MHZ / freq)
                power_w = static_w + uncore_w + kind_dynamic_w * (freq / F_MAX_MHZ) ** exponent
                energy_j = power_w * time_s
                time_s *= 1 + rng.gauss(0, noise)
                energy_j *= 1 + rng.gauss(0, noise)
                rows.append((freq, time_s, energy_j))
            options[(stage, kind)] = rows
    shape = (f"{stages}x{microbatches} clocks {len(freqs)} fixed {fixed:.2f} exp {exponent:.2f} noise {noise} "
             f"unit {unit_time_s * 1e3:g} ms{' memory-bound' if memory_bound else ''}"
             f"{' nearly-linear' if nearly_linear else ''}")
    return Profile(seed, stages, microbatches, unit_time_s, static_w, shape, options)


def one_f_one_b(stage, stages, microbatches):
    """Synchronous 1F1B order of one stage: warm-up forwards, then alternate, then cool-down backwards."""
    warmup = min(stages - stage - 1, microbatches)
    order = [("forward", mb) for mb in range(warmup)]
    forward, backward = warmup, 0
    while backward < microbatches:
        if forward < microbatches:
            order.append(("forward", forward))
            forward += 1
        order.append(("backward", backward))
        backward += 1
    return order


def dag(profile):
    """Operations [(stage, kind, mb)] and edges [(before, after)] of the profile's 1F1B DAG."""
    ops, index = [], {}
    edges = []
    for stage in range(profile.stages):
        previous = None
        for kind, mb in one_f_one_b(stage, profile.stages, profile.microbatches):
            index[(stage, kind, mb)] = len(ops)
            ops.append((stage, kind, mb))
            if previous is not None:
                edges.append((previous, index[(stage, kind, mb)]))
            previous = index[(stage, kind, mb)]
    for stage in range(profile.stages - 1):
        for mb in range(profile.microbatches):
            edges.append((index[(stage, "forward", mb)], index[(stage + 1, "forward", mb)]))
            edges.append((index[(stage + 1, "backward", mb)], index[(stage, "backward", mb)]))
    return ops, edges

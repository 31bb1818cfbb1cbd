#!/usr/bin/env python3
"""Writes a synthetic Perseus profile CSV shaped like real A100 measurements.

Clocks 1410 down to 990 MHz in 30 MHz steps (15 per instruction). Time follows a mostly
compute-bound roofline, t(f) = t_max * (0.85 * 1410 / f + 0.15); power is static 85 W, 100 W
of clock-independent memory and uncore power, and a dynamic part growing like f^3 (voltage
rises with clock), so energy = power x time is convex in f with its minimum below the maximum
clock (around 1150 MHz) while effective energy (minus 85 W x time) keeps falling with f. Stages differ a little
(the last one carries the loss), and 1% deterministic noise makes the options slightly
non-convex, as real measurements are.

usage: make_profile.py STAGES FORWARD_S BACKWARD_S OUT.csv [SEED]
"""
import random
import sys


def main() -> None:
    stages = int(sys.argv[1])
    forward_s = float(sys.argv[2])
    backward_s = float(sys.argv[3])
    out = sys.argv[4]
    rng = random.Random(int(sys.argv[5]) if len(sys.argv) > 5 else 1)
    clocks = list(range(1410, 989, -30))
    rows = ["stage,instruction,frequency,time,energy"]
    for stage in range(stages):
        scale = 1.0 + 0.04 * stage + (0.15 if stage == stages - 1 else 0.0)
        for name, base, dynamic_w in (("forward", forward_s, 130.0), ("backward", backward_s, 140.0)):
            for clock in clocks:
                ratio = clock / 1410
                time_s = base * scale * (0.85 / ratio + 0.15) * (1 + rng.uniform(-0.01, 0.01))
                power_w = 85.0 + 100.0 + dynamic_w * ratio**3
                energy_j = power_w * time_s * (1 + rng.uniform(-0.01, 0.01))
                rows.append(f"{stage},{name},{clock},{time_s:.6f},{energy_j:.4f}")
    with open(out, "w") as file:
        file.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()

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
           [--compute-fraction F] [--clock-step MHZ] [--uncore-w W] [--dynamic-w FWD,BWD] [--noise N]
Defaults are the shape above (0.85, 30 MHz, 100 W, 130,140 W, 0.01). bench/data/convex_2stages.csv,
the fast-end case of compare_lowtime.sh, is
  make_profile.py 2 0.1529 0.3078 convex_2stages.csv 34 --compute-fraction 0.7 --clock-step 15
      --dynamic-w 86,130 --noise 0
(time 0.3 + 0.7 x f_max/f, no noise; `kareus solve --unit-time 0.005` skipped the times next to
the minimum before the walk from the minimum-time plan).
"""
import argparse
import random


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("stages", type=int)
    parser.add_argument("forward_s", type=float)
    parser.add_argument("backward_s", type=float)
    parser.add_argument("out")
    parser.add_argument("seed", type=int, nargs="?", default=1)
    parser.add_argument("--compute-fraction", type=float, default=0.85)
    parser.add_argument("--clock-step", type=int, default=30)
    parser.add_argument("--uncore-w", type=float, default=100.0)
    parser.add_argument("--dynamic-w", default="130,140")
    parser.add_argument("--noise", type=float, default=0.01)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    dynamic_forward_w, dynamic_backward_w = (float(value) for value in args.dynamic_w.split(","))
    clocks = list(range(1410, 989, -args.clock_step))
    rows = ["stage,instruction,frequency,time,energy"]
    for stage in range(args.stages):
        scale = 1.0 + 0.04 * stage + (0.15 if stage == args.stages - 1 else 0.0)
        for name, base, dynamic_w in (("forward", args.forward_s, dynamic_forward_w),
                                      ("backward", args.backward_s, dynamic_backward_w)):
            for clock in clocks:
                ratio = clock / 1410
                time_s = base * scale * (args.compute_fraction / ratio + round(1 - args.compute_fraction, 10))
                time_s *= 1 + rng.uniform(-args.noise, args.noise)
                power_w = 85.0 + args.uncore_w + dynamic_w * ratio**3
                energy_j = power_w * time_s * (1 + rng.uniform(-args.noise, args.noise))
                rows.append(f"{stage},{name},{clock},{time_s:.6f},{energy_j:.4f}")
    with open(args.out, "w") as file:
        file.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""kareus's solver against lowtime 0.3.0 and the exact optimum on generated profiles, in one run.

For each profile of tests/solver_optimum/profiles.py (seeds from the label "bench", not the
tests' labels): `kareus solve` (median solver CPU of KAREUS_RUNS runs, default 5) and lowtime's
PhillipsDessouky on the same DAG, unit and static power (its plans re-evaluated as they run, as
compare_lowtime.py does); the speed ratio is solver CPU against solver CPU. "above lowtime" is
the worst excess of kareus's least energy at each of lowtime's frontier times over lowtime's;
"above optimum" the worst excess of kareus's least energy by a deadline over the exact optimum
(tests/solver_optimum/exact.py, a MILP; over its proven lower bound, so an upper bound on the
gap) at the eight deadlines of tests/solver_optimum/reference.py. Prints a markdown table.

usage: bench/solver_peers.sh (installs lowtime 0.3.0 into build/lowtime-venv), or
       python bench/solver_peers.py KAREUS_BINARY [COUNT] [LABEL]
"""
import os
import pathlib
import statistics
import sys
import time

root = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(root / "tests" / "solver_optimum"))
sys.path.insert(0, str(root / "bench"))
from profiles import generate, seeds  # noqa: E402
from reference import gaps, least_energy_by, solve_kareus  # noqa: E402
from compare_lowtime import pareto, run_lowtime  # noqa: E402  (reads kareus's 1F1B order beside argv[1])


def main():
    binary = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    label = sys.argv[3] if len(sys.argv) > 3 else "bench"
    runs = int(os.environ.get("KAREUS_RUNS", "5"))
    print(f"| seed | shape | kareus cpu ms | lowtime cpu s | ratio | frontier points kareus / lowtime | "
          f"ratio per point | above lowtime | lowtime above | above optimum | lowtime above optimum |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    ratios, worst_lowtime, worst_optimum = [], 0.0, 0.0
    for seed in seeds(label, count):
        profile = generate(seed)
        cpu = statistics.median(solve_kareus(binary, profile)[1] for _ in range(runs))
        rows, kareus, model, _ = gaps(binary, profile)
        above_optimum = max(row["gap"] for row in rows)
        worst_optimum = max(worst_optimum, above_optimum)
        try:
            lowtime_points, _, _, lowtime_cpu_s = run_lowtime(profile.options, profile.stages, profile.microbatches,
                                                             profile.unit_time_s, profile.static_power_w)
        except (ValueError, TypeError) as error:  # its exponential fit needs 3+ options and a fitting shape
            print(f"| {seed} | {profile.shape} | {cpu * 1e3:.2f} | fails: {error} | | {len(kareus)} / | | | | "
                  f"{100 * above_optimum:.3f}% | |", flush=True)
            continue
        lowtime = pareto(lowtime_points)
        above_lowtime = max(least_energy_by(kareus, t) / e - 1 for t, e in lowtime)
        lowtime_above = max((least_energy_by(lowtime, t) / e - 1 for t, e in kareus
                             if least_energy_by(lowtime, t) < float("inf")), default=float("nan"))
        lowtime_optimum = max((least_energy_by(lowtime, row["deadline_s"]) / row["bound_j"] - 1 for row in rows
                               if least_energy_by(lowtime, row["deadline_s"]) < float("inf")), default=float("nan"))
        ratio = lowtime_cpu_s / max(cpu, 1e-6)
        ratios.append(ratio)
        worst_lowtime = max(worst_lowtime, above_lowtime)
        # kareus's walks fill the steps between PD's plans, so its frontier has more points.
        per_point = ratio * len(kareus) / len(lowtime)
        print(f"| {seed} | {profile.shape} | {cpu * 1e3:.2f} | {lowtime_cpu_s:.3f} | {ratio:.0f}x | "
              f"{len(kareus)} / {len(lowtime)} | {per_point:.0f}x | {100 * max(above_lowtime, 0):.3f}% | "
              f"{100 * max(lowtime_above, 0):.3f}% | "
              f"{100 * above_optimum:.3f}% | {100 * lowtime_optimum:.3f}% |", flush=True)
    print(f"\n{count} profiles: speed ratio min {min(ratios):.0f}x, median {statistics.median(ratios):.0f}x; "
          f"kareus at most {100 * worst_lowtime:.3f}% above lowtime, {100 * worst_optimum:.3f}% above the optimum")


if __name__ == "__main__":
    started = time.time()
    main()
    print(f"({time.time() - started:.0f} s)")

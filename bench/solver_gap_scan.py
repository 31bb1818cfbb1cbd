"""Where kareus's frontier is above the exact optimum on generated profiles, and whether a finer
solver unit closes it (issue 28's hypothesis (a), tested through the CLI's --unit-time).

Usage: KAREUS=build/tools/kareus python bench/solver_gap_scan.py [--label L --count N | --seeds S ...]
       [--unit-divisors 1 4 10] [--units refined exact] [--milp-limit-s 2]
Per profile and unit divisor: the gap at each deadline fraction (tests/solver_optimum/reference.py's
deadlines), the solver CPU, and the options' spread in units (distinct quantized times per
instruction). gap = kareus over the MILP's best plan - 1 when unproven (a lower bound on the true
gap), over its proven bound when proven. --units: the solver's own unit refinement (refined, the
default) and/or exactly the given unit (exact: `kareus solve --exact-unit`) and/or the refined unit
with the eight deadlines asked (asked: `--deadline` each, the solver polishing its plan there), side
by side. MILP results are cached in --cache (they do not depend on
kareus), so a rerun costs only the kareus solves.
"""
import argparse
import dataclasses
import json
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "solver_optimum"))
from exact import ExactModel  # noqa: E402
from profiles import generate, seeds  # noqa: E402
from reference import DEADLINE_FRACTIONS, asked, deadlines, least_energy_by, solve_kareus  # noqa: E402


def milp_at(model, seed, deadline_s, limit_s, cache):
    key = f"{seed}:{deadline_s!r}:{limit_s}"
    if key not in cache:
        cache[key] = model.solve(deadline_s, rel_gap=5e-4, time_limit_s=limit_s)
    return cache[key]


def distinct_quantized(profile, unit_s):
    return sorted({len({math.floor(t / unit_s + 1e-9) for _, t, _ in rows}) for rows in profile.options.values()})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--label", default="holdout-2026-12")
    parser.add_argument("--count", type=int, default=0)
    parser.add_argument("--seeds", type=int, nargs="*", default=[])
    parser.add_argument("--unit-divisors", type=float, nargs="*", default=[1.0])
    parser.add_argument("--units", nargs="*", choices=["refined", "exact", "asked"], default=["refined"])
    parser.add_argument("--milp-limit-s", type=float, default=2.0)
    parser.add_argument("--cache", default="build/solver_gap_milp_cache.json")
    args = parser.parse_args()
    binary = os.environ["KAREUS"]
    cache = json.load(open(args.cache)) if os.path.exists(args.cache) else {}
    chosen = args.seeds or seeds(args.label, args.count)
    variants = [(divisor, units) for divisor in args.unit_divisors for units in args.units]
    summary = {variant: {"worst": [], "cpu_ms": []} for variant in variants}
    for seed in chosen:
        profile = generate(seed)
        model = ExactModel(profile)
        times = deadlines(model, seed)
        optima = [milp_at(model, seed, t, args.milp_limit_s, cache) for t in times]
        print(f"seed {seed}: {profile.shape}")
        for divisor, units in variants:
            run = dataclasses.replace(profile, unit_time_s=profile.unit_time_s / divisor)
            extra = {"exact": ["--exact-unit"], "refined": [], "asked": asked(times)}[units]
            points, cpu_s = solve_kareus(binary, run, extra)
            row = []
            for deadline_s, (found_j, bound_j, proven) in zip(times, optima):
                kareus_j = least_energy_by(points, deadline_s)
                row.append(kareus_j / (bound_j if proven else found_j) - 1)
            summary[(divisor, units)]["worst"].append(max(row))
            summary[(divisor, units)]["cpu_ms"].append(1e3 * cpu_s)
            print(f"  unit {run.unit_time_s * 1e3:g} ms {units} (distinct quantized times {distinct_quantized(run, run.unit_time_s)})"
                  f" cpu {1e3 * cpu_s:.2f} ms, {len(points)} points; gap % by fraction: "
                  + " ".join(f"{f:g}:{100 * g:.3f}" for f, g in zip(DEADLINE_FRACTIONS, row)))
        os.makedirs(os.path.dirname(args.cache) or ".", exist_ok=True)
        json.dump(cache, open(args.cache, "w"))
    for (divisor, units), values in summary.items():
        worst = sorted(values["worst"])
        p95 = worst[min(len(worst) - 1, math.ceil(0.95 * len(worst)) - 1)]
        print(f"unit / {divisor:g} {units}: {len(worst)} profiles, worst gap {100 * worst[-1]:.3f}%, p95 {100 * p95:.3f}%, "
              f"median {100 * statistics.median(worst):.3f}%, above 1.5%: {sum(g > 0.015 for g in worst)}, "
              f"above 0.1%: {sum(g > 0.001 for g in worst)}; solver cpu ms median "
              f"{statistics.median(values['cpu_ms']):.2f}, max {max(values['cpu_ms']):.2f}")


if __name__ == "__main__":
    main()

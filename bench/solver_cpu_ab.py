"""Solver CPU of two kareus binaries on the same profiles, runs interleaved (one machine, one run):
the median of --repeats `kareus solve` runs each, per profile, and their ratio.

Usage: python bench/solver_cpu_ab.py OLD_KAREUS NEW_KAREUS [--label L --count N] [--repeats 5]
Profiles: the label's generated ones (tests/solver_optimum/profiles.py) and the four of bench/data.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "solver_optimum"))
from profiles import generate, seeds  # noqa: E402
from reference import solver_cpu_s as parse_cpu_s  # noqa: E402

BENCH_PROFILES = [("a100 2x8", "a100_2stages.csv", 2, 8, 0.001), ("convex 2x8 5 ms", "convex_2stages.csv", 2, 8, 0.005),
                  ("a100 4x16", "a100_4stages.csv", 4, 16, 0.001), ("a100 8x64", "a100_8stages.csv", 8, 64, 0.001)]


def solver_cpu_s(binary, csv_path, flags):
    with tempfile.TemporaryDirectory() as folder:
        stdout = subprocess.run([binary, "solve", "--profile", csv_path, *flags, "--out", os.path.join(folder, "out")],
                                check=True, capture_output=True, text=True).stdout
    return parse_cpu_s(stdout)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--label", default="holdout-2026-12")
    parser.add_argument("--count", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        cases = []
        for seed in seeds(args.label, args.count):
            profile = generate(seed)
            path = os.path.join(folder, f"{seed}.csv")
            profile.write_csv(path)
            cases.append((str(seed), path, ["--stages", str(profile.stages), "--microbatches", str(profile.microbatches),
                                            "--unit-time", repr(profile.unit_time_s),
                                            "--static-power", repr(profile.static_power_w)], True))
        for name, csv_name, stages, microbatches, unit_s in BENCH_PROFILES:
            cases.append((name, os.path.join(HERE, "data", csv_name),
                          ["--stages", str(stages), "--microbatches", str(microbatches), "--unit-time", str(unit_s),
                           "--static-power", "85"], False))
        generated = []
        for name, path, flags, is_generated in cases:
            old, new = [], []
            for _ in range(args.repeats):
                old.append(solver_cpu_s(args.old, path, flags))
                new.append(solver_cpu_s(args.new, path, flags))
            ratio = statistics.median(new) / statistics.median(old)
            if is_generated:
                generated.append(ratio)
            print(f"{name}: old {1e3 * statistics.median(old):.2f} ms, new {1e3 * statistics.median(new):.2f} ms, "
                  f"new / old {ratio:.2f}", flush=True)
        print(f"generated profiles: new / old median {statistics.median(generated):.2f}, "
              f"min {min(generated):.2f}, max {max(generated):.2f}")


if __name__ == "__main__":
    main()

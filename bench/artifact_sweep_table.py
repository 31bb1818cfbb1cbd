"""The table of bench/artifact_sweep.sh from its summary.json files (one folder per configuration)."""

import json
import pathlib
import sys

TOLERANCE = 1e-3  # the solver's time unit and the plan simulator's rounding


def dominates(ours, theirs):
    """Every point of `theirs` has one of `ours` no slower with at most its energy."""
    return all(
        any(p["time_s"] <= q["time_s"] * (1 + TOLERANCE) and p["energy_j"] <= q["energy_j"] * (1 + TOLERANCE) for p in ours)
        for q in theirs
    )


def pct(value):
    return "-" if value is None else f"{value:+.1f}%"


def main():
    root = pathlib.Path(sys.argv[1])
    elapsed = sys.argv[2] if len(sys.argv) > 2 else "?"
    print("| configuration | Megatron T / E | Perseus T / E | N+P T / E | Kareus T / E | Kareus iso-time E | "
          "Kareus iso-E T | N+P iso-time E | N+P iso-E T | Kareus dominates P, N+P |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    all_dominate = True
    for summary_path in sorted(root.glob("*/summary.json")):
        summary = json.loads(summary_path.read_text())
        methods = summary["methods"]
        cells = [summary_path.parent.name]
        for name in ("megatron", "perseus", "nanobatch_perseus", "kareus"):
            fastest = methods[name]["frontier"][0]
            cells.append(f"{fastest['time_s']:.3f} s / {fastest['energy_j'] / 1000:.2f} kJ")
        comparison = summary["comparison"]
        for name in ("kareus", "nanobatch_perseus"):
            cells.append(pct(comparison[name]["iso_time_energy_reduction_pct"]))
            cells.append(pct(comparison[name]["iso_energy_time_reduction_pct"]))
        kareus = methods["kareus"]["frontier"]
        ok = dominates(kareus, methods["perseus"]["frontier"]) and dominates(kareus, methods["nanobatch_perseus"]["frontier"])
        all_dominate &= ok
        cells.append("yes" if ok else "**no**")
        print("| " + " | ".join(cells) + " |")
    print(f"\nsweep wall time: {elapsed} s; kareus dominates both baselines on every configuration: "
          f"{'yes' if all_dominate else 'no'}")
    return 0 if all_dominate else 1


if __name__ == "__main__":
    sys.exit(main())

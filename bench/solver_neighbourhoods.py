"""How far from the exact optimum local moves stay in the middle of the frontier (issue 28): at a
deadline, the MILP's optimum (tests/solver_optimum/exact.py), its LP relaxation (each operation's
options mixed: the convex hull Phillips-Dessouky plans on), the LP's plan rounded (each mixed
operation to its fastest option used, so the deadline holds), that plan's slack reclaimed (one
operation one option slower while the plan still finishes by the deadline and costs less, to a
local optimum), then pairwise exchanges from there (one operation one option slower and another
one or two options faster, to a local optimum), beside kareus's frontier (`kareus solve`) and the
better of kareus and the exchanges.

Usage: KAREUS=build/tools/kareus python bench/solver_neighbourhoods.py [--label L --count N]
       [--fractions 0.15 0.3 0.5] [--milp-limit-s 10]
Gaps are over the MILP's best plan (proven within 1e-4 unless the time limit is printed).
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "solver_optimum"))
from exact import ExactModel  # noqa: E402
from profiles import generate, seeds  # noqa: E402
from reference import DEADLINE_FRACTIONS, deadlines, least_energy_by, solve_kareus  # noqa: E402


class Plans:
    """A profile's DAG, timed and priced for option picks (one index per operation into
    ExactModel.choices), under one deadline."""

    def __init__(self, model, deadline_s):
        self.model = model
        self.deadline_s = deadline_s
        self.static_w = model.profile.static_power_w * model.profile.stages

    def fits(self, picks):
        return self.model.makespan(picks) <= self.deadline_s * (1 + 1e-12)

    def energy(self, picks):
        return (sum(self.model.choices[op][k][1] for op, k in enumerate(picks))
                + self.static_w * self.model.makespan(picks))

    def improve(self, picks, exchanges):
        """First-improvement local search to a local optimum: one operation one option slower,
        and with `exchanges` also paired with another one or two options faster."""
        picks, now_j = list(picks), self.energy(picks)
        improved = True
        while improved:
            improved = False
            for slower in range(len(picks)):
                if picks[slower] + 1 >= len(self.model.choices[slower]):
                    continue
                partners = [(None, 0)] + ([(op, -d) for op in range(len(picks)) if op != slower for d in (1, 2)]
                                          if exchanges else [])
                for faster, step in partners:
                    trial = list(picks)
                    trial[slower] += 1
                    if faster is not None:
                        if trial[faster] + step < 0:
                            continue
                        trial[faster] += step
                    if self.fits(trial):
                        trial_j = self.energy(trial)
                        if trial_j < now_j - 1e-9:
                            picks, now_j, improved = trial, trial_j, True
                            break
        return picks


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--label", default="holdout-2026-12")
    parser.add_argument("--count", type=int, default=12)
    parser.add_argument("--fractions", type=float, nargs="*", default=[0.15, 0.3, 0.5])
    parser.add_argument("--milp-limit-s", type=float, default=10.0)
    args = parser.parse_args()
    binary = os.environ["KAREUS"]
    columns = ["kareus", "lp", "rounded", "reclaimed", "exchanged", "either"]
    gaps = {column: [] for column in columns}
    print("| seed | fraction | ops | mixed in LP | MILP J | kareus | LP | LP rounded | + reclaimed | + pair exchanges | better of kareus and exchanges |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for seed in seeds(args.label, args.count):
        profile = generate(seed)
        model = ExactModel(profile)
        points, _ = solve_kareus(binary, profile)
        times = deadlines(model, seed)
        for fraction in args.fractions:
            deadline_s = times[DEADLINE_FRACTIONS.index(fraction)]
            exact = model.run_milp(deadline_s, 1e-4, args.milp_limit_s)
            relaxed = model.run_milp(deadline_s, 1e-4, args.milp_limit_s, integral=False)
            plans = Plans(model, deadline_s)
            rounded, mixed = [], 0
            for op, choice in enumerate(model.choices):
                weights = relaxed.x[model.x_first[op]:model.x_first[op] + len(choice)]
                used = [k for k, weight in enumerate(weights) if weight > 1e-6]
                mixed += len(used) > 1
                rounded.append(min(used))
            reclaimed = plans.improve(rounded, exchanges=False)
            exchanged = plans.improve(reclaimed, exchanges=True)
            values = {"kareus": least_energy_by(points, deadline_s), "lp": relaxed.fun, "rounded": plans.energy(rounded),
                      "reclaimed": plans.energy(reclaimed), "exchanged": plans.energy(exchanged)}
            values["either"] = min(values["kareus"], values["exchanged"])
            row = {column: values[column] / exact.fun - 1 for column in columns}
            for column in columns:
                gaps[column].append(row[column])
            limit = "" if exact.status == 0 else " (time limit)"
            print(f"| {seed} | {fraction:g} | {len(model.ops)} | {mixed} | {exact.fun:.3f}{limit} | "
                  + " | ".join(f"{100 * row[column]:+.3f}%" for column in columns) + " |", flush=True)
    print()
    for column in columns:
        values = gaps[column]
        print(f"{column}: worst {100 * max(values):+.3f}%, median {100 * statistics.median(values):+.3f}%, "
              f"within 0.1%: {sum(v <= 0.001 for v in values)} of {len(values)}")


if __name__ == "__main__":
    main()

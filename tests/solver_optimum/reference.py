"""kareus's frontier for a generated profile (through `kareus solve`, as a user runs it) and its gap
to the exact optimum (exact.py) at chosen deadlines."""
import json
import os
import random
import subprocess
import tempfile
import time

from exact import ExactModel

# Deadlines as fractions of the way from the all-fastest to the all-slowest makespan, each
# jittered per profile: the fast end, where quantization bites most, and the middle.
DEADLINE_FRACTIONS = [0.0, 0.01, 0.03, 0.07, 0.15, 0.3, 0.5, 0.8]


def solve_kareus(binary, profile, extra_args=()):
    """(frontier [(time_s, energy_j)] time ascending, solver cpu seconds)."""
    with tempfile.TemporaryDirectory() as folder:
        csv_path = os.path.join(folder, "profile.csv")
        profile.write_csv(csv_path)
        out = os.path.join(folder, "out")
        completed = subprocess.run(
            [binary, "solve", "--profile", csv_path, "--stages", str(profile.stages), "--microbatches",
             str(profile.microbatches), "--unit-time", repr(profile.unit_time_s), "--static-power",
             repr(profile.static_power_w), "--out", out, *extra_args], check=True, capture_output=True, text=True)
        with open(os.path.join(out, "frontier.json")) as file:
            points = [(p["time_s"], p["energy_j"]) for p in json.load(file)["points"]]
        cpu_s = solver_cpu_s(completed.stdout)
    return sorted(points), cpu_s


def solver_cpu_s(stdout):
    """The solver's CPU seconds from `kareus solve`'s summary line ("... in T s (C s cpu), ...")."""
    return float(stdout.split(" s cpu)")[0].rsplit("(", 1)[1])


def least_energy_by(points, deadline_s):
    values = [energy for time_s, energy in points if time_s <= deadline_s * (1 + 1e-12)]
    return min(values) if values else float("inf")


def deadlines(model, seed):
    rng = random.Random(seed ^ 0x5EED)
    fastest, slowest = model.fastest_s(), model.slowest_s()
    return [fastest + (slowest - fastest) * min(1.0, fraction * (1 if fraction == 0 else rng.uniform(0.8, 1.2)))
            for fraction in DEADLINE_FRACTIONS]


def asked(deadline_times_s):
    """`kareus solve`'s flags asking for plans at these deadlines."""
    return [arg for deadline_s in deadline_times_s for arg in ("--deadline", repr(deadline_s))]


def gaps(binary, profile, rel_gaps=(5e-4,) * len(DEADLINE_FRACTIONS), time_limit_s=5, ask=False):
    """Per deadline: dict(deadline_s, kareus_j, optimum_j, bound_j, proven, gap, gap_to_found) with
    gap = kareus over the MILP's proven lower bound - 1 (an upper bound on the true gap) and
    gap_to_found = kareus over the best plan the MILP found - 1 (a lower bound on it; the two meet
    within that deadline's rel_gaps entry when the MILP proved its plan, `proven`). Also kareus's
    frontier, the model and kareus's solver CPU seconds. With `ask`, the same for kareus asked for
    plans at the deadlines (`--deadline`), as a user who knows the times they want runs it:
    asked_j, asked_gap, asked_gap_to_found."""
    model = ExactModel(profile)
    times = deadlines(model, profile.seed)
    points, cpu_s = solve_kareus(binary, profile)
    asked_points = solve_kareus(binary, profile, asked(times))[0] if ask else None
    rows = []
    for deadline_s, rel_gap in zip(times, rel_gaps, strict=True):
        started = time.perf_counter()
        solved = model.solve(deadline_s, rel_gap=rel_gap, time_limit_s=time_limit_s)
        assert solved is not None, f"seed {profile.seed}: no plan finishes by {deadline_s} s"
        optimum_j, bound_j, proven = solved
        kareus_j = least_energy_by(points, deadline_s)
        row = {"deadline_s": deadline_s, "kareus_j": kareus_j, "optimum_j": optimum_j, "bound_j": bound_j,
               "proven": proven, "gap": kareus_j / bound_j - 1, "gap_to_found": kareus_j / optimum_j - 1,
               "milp_s": time.perf_counter() - started}
        if ask:
            asked_j = least_energy_by(asked_points, deadline_s)
            row.update(asked_j=asked_j, asked_gap=asked_j / bound_j - 1, asked_gap_to_found=asked_j / optimum_j - 1)
        rows.append(row)
    return rows, points, model, cpu_s

#!/usr/bin/env python3
"""Runs lowtime 0.3.0 and `kareus solve` on the same Perseus profile and compares them.

Both get the same DAG (synchronous 1F1B, no transfers), unit time and static power. lowtime's
frontier is re-evaluated as its plans would really run (each instruction at the knob lowtime
assigned: makespan from the real times, energy = sum of effective energies + static power x
makespan x stages), not from its fitted exponential costs; kareus's frontier.json already is.
Prints the wall times, the speed ratio, and at every frontier time which solver is lower.

usage: compare_lowtime.py KAREUS_BINARY PROFILE.csv STAGES MICROBATCHES [UNIT_TIME_S] [STATIC_POWER_W]
"""
import csv
import json
import logging
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict

import networkx as nx
from lowtime.operation import CandidateExecutionOptions, ExecutionOption, OperationSpec
from lowtime.cost_model import ExponentialModel
from lowtime.graph_utils import add_source_node, add_sink_node
from lowtime.perseus.instruction import Forward, Backward
from lowtime.solver import PhillipsDessouky

logging.disable(logging.CRITICAL)
# The 1F1B order is kareus's own (the build's kareus._runtime, beside the binary given).
sys.path.insert(0, str(pathlib.Path(sys.argv[1]).resolve().parents[1] / "python"))
from kareus._runtime import one_f_one_b  # noqa: E402


def read_profile(path):
    rows = defaultdict(list)  # (stage, type) -> [(freq, time, energy)]
    with open(path) as file:
        for row in csv.DictReader(file):
            rows[(int(row["stage"]), row["instruction"])].append(
                (int(row["frequency"]), float(row["time"]), float(row["energy"])))
    return rows


def evaluate(instructions, edges, choice, static_power_w, stages):
    """Real makespan and energy of a plan: choice[(stage, type, mb)] = (time, energy)."""
    order = list(nx.topological_sort(edges))
    finish = {}
    for node in order:
        start = max((finish[pred] for pred in edges.predecessors(node)), default=0.0)
        finish[node] = start + choice[node][0]
    makespan = max(finish.values())
    effective = sum(energy - static_power_w * t for t, energy in choice.values())
    return makespan, effective + static_power_w * makespan * stages


def run_lowtime(rows, stages, microbatches, unit_time_s, static_power_w):
    fit_started = time.perf_counter()
    specs = {}
    for (stage, kind), options in rows.items():
        candidates = CandidateExecutionOptions(options=[
            ExecutionOption(real_time=t, unit_time=unit_time_s, cost=e - static_power_w * t, knob=f)
            for f, t, e in options])
        specs[(stage, kind)] = OperationSpec(options=candidates, cost_model=ExponentialModel(candidates))
    dag = nx.DiGraph()
    ops = {}
    node = 0
    for stage in range(stages):
        previous = None
        for kind, mb in one_f_one_b(stage, stages, microbatches):
            cls = Forward if kind == "forward" else Backward
            op = cls(spec=specs[(stage, kind)], stage_id=stage, micro_batch_id=mb)
            dag.add_node(node, op=op)
            ops[(stage, kind, mb)] = node
            if previous is not None:
                dag.add_edge(previous, node)
            previous = node
            node += 1
    for stage in range(stages - 1):
        for mb in range(microbatches):
            dag.add_edge(ops[(stage, "forward", mb)], ops[(stage + 1, "forward", mb)])
            dag.add_edge(ops[(stage + 1, "backward", mb)], ops[(stage, "backward", mb)])
    fit_s = time.perf_counter() - fit_started
    structure = dag.copy()
    add_source_node(dag, "source")
    add_sink_node(dag, "sink")
    dag = nx.relabel_nodes(dag, {"source": node, "sink": node + 1})
    dag.graph["source_node"] = node
    dag.graph["sink_node"] = node + 1
    real = {(stage, kind): {f: (t, e) for f, t, e in options} for (stage, kind), options in rows.items()}
    keys = {index: key for key, index in ops.items()}

    def current_point():
        choice = {}
        for index, (stage, kind, mb) in keys.items():
            choice[index] = real[(stage, kind)][dag.nodes[index]["op"].assigned_knob]
        return evaluate(None, structure, choice, static_power_w, stages)

    started = time.perf_counter()
    cpu_started = time.process_time()
    solver = PhillipsDessouky(dag)
    points = [current_point()]
    eval_s = eval_cpu_s = 0.0
    for _ in solver.run():
        mark, cpu_mark = time.perf_counter(), time.process_time()
        points.append(current_point())
        eval_s += time.perf_counter() - mark
        eval_cpu_s += time.process_time() - cpu_mark
    solve_s = time.perf_counter() - started - eval_s
    solve_cpu_s = time.process_time() - cpu_started - eval_cpu_s
    return points, fit_s, solve_s, solve_cpu_s


class KareusRun:
    def __init__(self, points, report, solver_s, cpu_s, process_s):
        self.points, self.report, self.solver_s, self.cpu_s, self.process_s = points, report, solver_s, cpu_s, process_s


def solve_kareus(binary, profile, stages, microbatches, unit_time_s, static_power_w):
    with tempfile.TemporaryDirectory() as out:
        started = time.perf_counter()
        output = subprocess.run([binary, "solve", "--profile", profile, "--stages", str(stages), "--microbatches",
                                 str(microbatches), "--unit-time", str(unit_time_s), "--static-power",
                                 str(static_power_w), "--out", out], check=True, capture_output=True, text=True).stdout
        process_s = time.perf_counter() - started
        with open(f"{out}/frontier.json") as file:
            points = [(p["time_s"], p["energy_j"]) for p in json.load(file)["points"]]
        with open(f"{out}/solve.json") as file:
            report = json.load(file)
    match = re.search(r"in ([0-9.]+) s \(([0-9.]+) s cpu\)", output)
    return KareusRun(points, report, float(match.group(1)), float(match.group(2)), process_s)


def pareto(points):
    frontier = []
    for t, e in sorted(points):
        if not frontier or e < frontier[-1][1]:
            frontier.append((t, e))
    return frontier


def best_at(frontier, t):
    values = [e for time_s, e in frontier if time_s <= t + 1e-12]
    return min(values) if values else float("inf")


def main():
    binary, profile, stages, microbatches = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    unit_time_s = float(sys.argv[5]) if len(sys.argv) > 5 else 0.001
    static_power_w = float(sys.argv[6]) if len(sys.argv) > 6 else 85.0
    rows = read_profile(profile)

    # A 2 ms solve's CPU time varies by +-30% from one process to the next: each kareus build runs
    # KAREUS_RUNS times (default 9), alternating with KAREUS_BEFORE's when given, and its median
    # is compared; every run must give the same frontier.
    runs = int(os.environ.get("KAREUS_RUNS", "9"))
    kareus_runs, before_runs = [], []
    for _ in range(runs):
        kareus_runs.append(solve_kareus(binary, profile, stages, microbatches, unit_time_s, static_power_w))
        if os.environ.get("KAREUS_BEFORE"):
            before_runs.append(solve_kareus(os.environ["KAREUS_BEFORE"], profile, stages, microbatches, unit_time_s,
                                            static_power_w))
    kareus, report = kareus_runs[0].points, kareus_runs[0].report
    if any(run.points != kareus for run in kareus_runs):
        sys.exit("compare_lowtime.py: kareus solve gave different frontiers from one run to the next")
    kareus_solver_s = statistics.median(run.solver_s for run in kareus_runs)
    kareus_cpu_s = statistics.median(run.cpu_s for run in kareus_runs)
    kareus_cpu_range = (min(run.cpu_s for run in kareus_runs), max(run.cpu_s for run in kareus_runs))
    kareus_s = statistics.median(run.process_s for run in kareus_runs)
    before = before_runs[0].points if before_runs else None
    if before_runs:
        before_cpu_s = statistics.median(run.cpu_s for run in before_runs)
        before_s = statistics.median(run.process_s for run in before_runs)

    # LOWTIME_CACHE_DIR=DIR: lowtime's result for this case is read from DIR when it is there,
    # else computed and written there (its 8 x 64 solve takes minutes of CPU; the cache lets a
    # loaded machine run it once, apart from the timed kareus runs). The times printed are then
    # the cached run's.
    cache = None
    if os.environ.get("LOWTIME_CACHE_DIR"):
        cache = os.path.join(os.environ["LOWTIME_CACHE_DIR"],
                             f"{pathlib.Path(profile).stem}-{stages}x{microbatches}-{unit_time_s}-{static_power_w}.json")
    if cache and os.path.exists(cache):
        with open(cache) as file:
            saved = json.load(file)
        asked = [profile, stages, microbatches, unit_time_s, static_power_w]
        cached = [saved[key] for key in ("profile", "stages", "microbatches", "unit_time_s", "static_power_w")]
        if cached != asked:
            sys.exit(f"compare_lowtime.py: {cache} holds {cached}, not {asked}")
        lowtime_points = [tuple(point) for point in saved["points"]]
        lowtime_fit_s, lowtime_s, lowtime_cpu_s = saved["fit_s"], saved["solve_s"], saved["solve_cpu_s"]
        print(f"lowtime 0.3.0 result read from {cache}")
    else:
        lowtime_points, lowtime_fit_s, lowtime_s, lowtime_cpu_s = run_lowtime(rows, stages, microbatches, unit_time_s,
                                                                               static_power_w)
        # A solve under a second varies as much as ours: the median of five.
        if lowtime_cpu_s < 1.0:
            repeats = [run_lowtime(rows, stages, microbatches, unit_time_s, static_power_w) for _ in range(4)]
            lowtime_s = statistics.median([lowtime_s] + [repeat[2] for repeat in repeats])
            lowtime_cpu_s = statistics.median([lowtime_cpu_s] + [repeat[3] for repeat in repeats])
        if cache:
            with open(cache, "w") as file:
                json.dump({"profile": profile, "stages": stages, "microbatches": microbatches, "unit_time_s": unit_time_s,
                           "static_power_w": static_power_w, "points": lowtime_points, "fit_s": lowtime_fit_s,
                           "solve_s": lowtime_s, "solve_cpu_s": lowtime_cpu_s}, file)
    lowtime = pareto(lowtime_points)

    times = sorted({t for t, _ in kareus} | {t for t, _ in lowtime})
    kareus_lower = lowtime_lower = ties = 0
    worst_kareus = worst_lowtime = 0.0
    for t in times:
        k, l = best_at(kareus, t), best_at(lowtime, t)
        if k == float("inf") and l == float("inf"):
            continue
        if abs(k - l) <= 1e-9 * max(abs(k), abs(l), 1.0):
            ties += 1
        elif k < l:
            kareus_lower += 1
            if l != float("inf"):
                worst_lowtime = max(worst_lowtime, (l - k) / k)
        else:
            lowtime_lower += 1
            if k != float("inf"):
                worst_kareus = max(worst_kareus, (k - l) / l)
    print(f"profile {profile}: {stages} stages x {microbatches} microbatches, unit {unit_time_s} s, static {static_power_w} W")
    print(f"kareus solve : {kareus_solver_s:8.4f} s solver wall, {kareus_cpu_s:.4f} s cpu, median of {runs} runs "
          f"(cpu {kareus_cpu_range[0]:.4f}-{kareus_cpu_range[1]:.4f} s; {kareus_s:.3f} s whole process incl. CSV, "
          f"writes of {len(kareus)} plans), {report['iterations']} PD iterations, {len(kareus)} frontier points")
    print(f"lowtime 0.3.0: {lowtime_s:8.3f} s solver wall, {lowtime_cpu_s:.3f} s cpu (median of 5 when under 1 s) (+{lowtime_fit_s:.3f} s exponential fits; plan re-evaluation "
          f"excluded), {len(lowtime_points)} iterations, {len(lowtime)} frontier points")
    print(f"speed ratio  : {lowtime_cpu_s / max(kareus_cpu_s, 1e-6):8.1f}x solver cpu vs cpu, {lowtime_s / kareus_solver_s:.1f}x wall, "
          f"{(lowtime_s + lowtime_fit_s) / kareus_s:.1f}x lowtime fits+solver vs whole kareus process")
    if before is not None:
        worst_before = max((best_at(before, t) - best_at(lowtime, t)) / best_at(lowtime, t) for t in times
                           if best_at(before, t) < float("inf") and best_at(lowtime, t) < float("inf"))
        shared = [t for t in times if best_at(before, t) < float("inf") and best_at(kareus, t) < float("inf")]
        after_above = max(best_at(kareus, t) / best_at(before, t) - 1 for t in shared)
        before_above = max(best_at(before, t) / best_at(kareus, t) - 1 for t in shared)
        print(f"before build : {before_cpu_s:.4f} s cpu ({lowtime_cpu_s / max(before_cpu_s, 1e-6):.1f}x), {before_s:.3f} s whole "
              f"process, {len(before)} frontier points, worst excess over lowtime {100 * max(worst_before, 0):.3f}%; "
              f"after above before by up to {100 * max(after_above, 0):.4f}%, below by up to {100 * max(before_above, 0):.4f}%")
    print(f"fastest      : kareus {kareus[0][0]:.4f} s / {kareus[0][1]:.1f} J, lowtime {lowtime[0][0]:.4f} s / {lowtime[0][1]:.1f} J")
    print(f"least energy : kareus {kareus[-1][0]:.4f} s / {kareus[-1][1]:.1f} J, lowtime {lowtime[-1][0]:.4f} s / {lowtime[-1][1]:.1f} J")
    print(f"at {len(times)} frontier times: kareus lower {kareus_lower}, lowtime lower {lowtime_lower}, equal {ties}; "
          f"worst lowtime excess {100 * worst_lowtime:.2f}%, worst kareus excess {100 * worst_kareus:.2f}%")


if __name__ == "__main__":
    main()

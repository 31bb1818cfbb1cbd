"""The exact minimum-energy plan of a profile for a deadline, by a MILP (scipy's milp, HiGHS).

For each operation v of the 1F1B DAG and each of its options k, a binary x[v,k] (exactly one per
operation); a start time s[v] >= 0 per operation; the makespan M. Precedence: for every edge
u -> v, s[v] >= s[u] + sum_k time[u,k] x[u,k]; M >= s[v] + sum_k time[v,k] x[v,k] for every v;
M <= deadline. Minimize sum effective_energy[v,k] x[v,k] + static_power_w x stages x M, the
solver's energy convention (effective energy = energy - static power x time: a GPU pays static
power over the whole makespan, busy or idle). Options dominated in (time, effective energy) are
dropped first: replacing one by the option that dominates it never breaks a deadline nor costs
more, so the optimum is unchanged.
"""
import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_matrix

from profiles import dag


def pareto_options(rows, static_power_w):
    """[(time_s, effective_j)] of the options no other is as fast and as cheap as, time ascending."""
    points = sorted((t, e - static_power_w * t) for _, t, e in rows)
    kept = []
    for t, effective in points:
        if not kept or effective < kept[-1][1]:
            kept.append((t, effective))
    return kept


def topological_order(preds):
    """Operations with every predecessor first (depth first; preds[op] lists op's predecessors)."""
    order, seen = [], [False] * len(preds)

    def visit(op):
        if not seen[op]:
            seen[op] = True
            for pred in preds[op]:
                visit(pred)
            order.append(op)

    for op in range(len(preds)):
        visit(op)
    return order


class ExactModel:
    def __init__(self, profile):
        self.profile = profile
        self.ops, self.edges = dag(profile)
        self.preds = [[] for _ in self.ops]
        for before, after in self.edges:
            self.preds[after].append(before)
        self.order = topological_order(self.preds)
        self.options = {key: pareto_options(rows, profile.static_power_w) for key, rows in profile.options.items()}
        self.choices = [self.options[(stage, kind)] for stage, kind, _ in self.ops]
        self.x_first = []
        column = 0
        for choice in self.choices:
            self.x_first.append(column)
            column += len(choice)
        self.x_count = column
        n_ops = len(self.ops)
        self.s_first = column
        self.m_index = column + n_ops
        self.columns = self.m_index + 1
        rows, cols, vals, lower, upper = [], [], [], [], []
        row = 0

        def duration_terms(op, sign):
            for k, (t, _) in enumerate(self.choices[op]):
                rows.append(row)
                cols.append(self.x_first[op] + k)
                vals.append(sign * t)

        for op in range(n_ops):  # one option each
            for k in range(len(self.choices[op])):
                rows.append(row)
                cols.append(self.x_first[op] + k)
                vals.append(1.0)
            lower.append(1.0)
            upper.append(1.0)
            row += 1
        for before, after in self.edges:  # s[after] - s[before] - d[before] >= 0
            rows += [row, row]
            cols += [self.s_first + after, self.s_first + before]
            vals += [1.0, -1.0]
            duration_terms(before, -1.0)
            lower.append(0.0)
            upper.append(np.inf)
            row += 1
        for op in range(n_ops):  # M - s[op] - d[op] >= 0
            rows += [row, row]
            cols += [self.m_index, self.s_first + op]
            vals += [1.0, -1.0]
            duration_terms(op, -1.0)
            lower.append(0.0)
            upper.append(np.inf)
            row += 1
        self.matrix = coo_matrix((vals, (rows, cols)), shape=(row, self.columns)).tocsr()
        self.lower, self.upper = np.array(lower), np.array(upper)
        cost = np.zeros(self.columns)
        for op, choice in enumerate(self.choices):
            for k, (_, effective) in enumerate(choice):
                cost[self.x_first[op] + k] = effective
        cost[self.m_index] = profile.static_power_w * profile.stages
        self.cost = cost
        self.integrality = np.zeros(self.columns)
        self.integrality[: self.x_count] = 1

    def fastest_s(self):
        return self.makespan([0] * len(self.ops))

    def slowest_s(self):
        return self.makespan([len(choice) - 1 for choice in self.choices])

    def makespan(self, picks):
        finish = [0.0] * len(self.ops)
        for op in self.order:
            start = max((finish[pred] for pred in self.preds[op]), default=0.0)
            finish[op] = start + self.choices[op][picks[op]][0]
        return max(finish)

    def run_milp(self, deadline_s, rel_gap, time_limit_s, integral=True, presolve=True):
        """scipy's result of one HiGHS run for deadline_s: the MILP, or with integral=False its LP
        relaxation (each operation's options mixed)."""
        upper_bounds = np.full(self.columns, np.inf)
        upper_bounds[: self.x_count] = 1
        upper_bounds[self.m_index] = deadline_s
        return milp(self.cost, integrality=self.integrality if integral else np.zeros(self.columns),
                    bounds=Bounds(np.zeros(self.columns), upper_bounds),
                    constraints=LinearConstraint(self.matrix, self.lower, self.upper),
                    options={"mip_rel_gap": rel_gap, "time_limit": time_limit_s, "presolve": presolve})

    def solve(self, deadline_s, rel_gap=1e-4, time_limit_s=60):
        """(energy_j, lower_bound_j, proven) of the least-energy plan finishing by deadline_s: the best
        plan HiGHS found, its proven lower bound on the optimum, and whether it stopped within rel_gap
        (not at the time limit); None when no plan finishes by deadline_s."""
        # HiGHS's limit is wall-clock: on a loaded machine it may stop before its first plan. Then
        # the limit doubles, up to 16x, so that what is checked does not depend on the load.
        # HiGHS's presolve (scipy 1.17) has called deadlines the all-fastest plan meets infeasible
        # (seeds 4236869861 and 3309130457 of the label "fresh-2026-12-07"); there it runs again
        # without presolve.
        presolve = True
        limit_s = time_limit_s
        while True:
            result = self.run_milp(deadline_s, rel_gap, limit_s, presolve=presolve)
            if result.status == 2 and presolve and deadline_s >= self.fastest_s():
                presolve = False
                continue
            if result.x is not None or result.status != 1 or limit_s >= 16 * time_limit_s:
                break
            limit_s *= 2
        if result.status == 2:  # infeasible
            return None
        if result.x is None:
            raise RuntimeError(f"milp failed on seed {self.profile.seed} at {deadline_s} s after {limit_s} s: "
                               f"{result.message}")
        return result.fun, result.mip_dual_bound, result.status == 0

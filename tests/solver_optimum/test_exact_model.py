"""The exact reference itself (exact.py) against exhaustive search, and the generator's DAG
against the 1F1B order written out by hand."""
import itertools
import os
import sys

import pytest

pytest.importorskip("scipy.optimize", reason="the exact reference needs scipy (scripts/setup.sh --all)")

sys.path.insert(0, os.path.dirname(__file__))
from exact import ExactModel  # noqa: E402
from profiles import generate, one_f_one_b  # noqa: E402


def test_one_f_one_b_order_by_hand():
    # Stage 0 of 3 with 4 microbatches: two warm-up forwards, then F B alternating, then B B.
    assert one_f_one_b(0, 3, 4) == [("forward", 0), ("forward", 1), ("forward", 2), ("backward", 0),
                                    ("forward", 3), ("backward", 1), ("backward", 2), ("backward", 3)]
    assert one_f_one_b(2, 3, 2) == [("forward", 0), ("backward", 0), ("forward", 1), ("backward", 1)]


@pytest.mark.parametrize("seed", [3, 8, 21])
def test_milp_matches_exhaustive_search(seed):
    # 2 stages x 2 microbatches, three clocks per instruction kept: 3^8 plans, all evaluated.
    profile = generate(seed, stages=2, microbatches=2)
    for key, rows in profile.options.items():
        profile.options[key] = [rows[0], rows[len(rows) // 2], rows[-1]]
    model = ExactModel(profile)
    plans = []
    for picks in itertools.product(*[range(len(choice)) for choice in model.choices]):
        effective = sum(model.choices[op][k][1] for op, k in enumerate(picks))
        makespan = model.makespan(list(picks))
        plans.append((makespan, effective + profile.static_power_w * profile.stages * makespan))
    fastest, slowest = model.fastest_s(), model.slowest_s()
    for fraction in [0.0, 0.1, 0.25, 0.5, 0.75, 1.0]:
        deadline_s = fastest + fraction * (slowest - fastest)
        truth = min(energy for makespan, energy in plans if makespan <= deadline_s * (1 + 1e-12))
        optimum_j, bound_j, proven = model.solve(deadline_s, rel_gap=1e-9)
        assert proven
        assert optimum_j == pytest.approx(truth, rel=1e-7)
        assert bound_j <= truth * (1 + 1e-9)
    assert model.solve(fastest * (1 - 1e-3)) is None  # nothing finishes before the all-fastest plan


def test_a_deadline_the_fastest_plan_meets_is_never_infeasible():
    # HiGHS's presolve called these infeasible (scipy 1.17): the all-fastest plan meets both, at
    # its own makespan and 2.3% above it. The reference then solves without presolve.
    for seed, fraction in [(4236869861, 0.0), (3309130457, 0.0227)]:
        model = ExactModel(generate(seed))
        deadline_s = model.fastest_s() + fraction * (model.slowest_s() - model.fastest_s())
        solved = model.solve(deadline_s, rel_gap=5e-4, time_limit_s=2)
        assert solved is not None, f"seed {seed} at {deadline_s} s"
        assert solved[1] <= solved[0] * (1 + 1e-9)

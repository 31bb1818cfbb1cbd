"""kareus's frontier against the exact optimum (a MILP, exact.py) on generated profiles.

At every deadline checked, the least energy of kareus's frontier points finishing by it is at
most GAP_BOUND above the optimum: asserted against the MILP's proven lower bound, and never
below it. HiGHS stops once its plan is proven within a sixth of the bound being checked
(MILP_GAP_SHARE), so the check is stricter than the bound by at most that: proving the optimum
to 5e-4 whatever the bound cost the slow tier 7x the time and left a fifth of its MILPs at their
time limit, unproven. A MILP that hits its time limit (5 s; the slow tier 2 s) proves less: there
kareus is asserted within GAP_BOUND of the best plan HiGHS found (a necessary condition), and the
deadline is reported as unproven (printed with -s).

GAP_BOUND is what the solver achieves today, not the aim: the aim is 0.1% (issue 28, open). On
the 14 profiles of the label "dev" the worst gap measured 1.12% (12 of 14 above 0.1%), 1.00%
since the unit is refined where options collapse (11 of 14); the bound is the first rounded up, so a solver that loses more fails here; lower it as the solver improves.
The slow tier's 200 profiles reach further into the shapes' tails, and its bound
(KAREUS_SOLVER_GAP_BOUND, set in tests/CMakeLists.txt) is the worst gap measured there, rounded
up: a regression guard on the tail, not the promise (docs/solver.md).

Which profiles: seeds derived from a label (profiles.seeds: sha256 of "label:index"). The
committed label is KAREUS_SOLVER_SEEDS' default, "fresh-2026-12-07". The solver was developed
against the label "dev", and the asked deadlines' random search had its parameters chosen on the
hardest deadlines of "holdout-2026-12" (CI's label until then); "fresh-2026-12-07" was only ever
measured, so the profiles CI checks are ones the solver was not tuned to. The gaps quoted below
are those measured on "holdout-2026-12" when each bound was set; on "fresh-2026-12-07" the same
build measured a frontier worst of 2.30%, 0.28% at the minimum time and 0.17% at asked deadlines
(over the 5e-4 bound; bench/RESULTS.md). KAREUS_SOLVER_PROFILES sets how many (the fast tier's
default 4; the slow tier, ctest label slow, runs 200, 8 deadlines each).
"""
import os
import sys

import pytest

pytest.importorskip("scipy.optimize", reason="the exact reference needs scipy (scripts/setup.sh --all)")
from scipy.optimize import milp  # noqa: E402,F401  (scipy >= 1.9 has milp)

sys.path.insert(0, os.path.dirname(__file__))
from profiles import generate, seeds  # noqa: E402
from reference import DEADLINE_FRACTIONS, gaps  # noqa: E402

GAP_BOUND = float(os.environ.get("KAREUS_SOLVER_GAP_BOUND", "0.015"))
# At the minimum time (the first deadline), where a plan at the same speed as the fastest is
# asked for, the solver re-chooses each stage's options exactly with the others pinned
# (src/pipeline/stage_reassignment.h): there the bound is tighter. Worst measured on the slow
# tier's 200 profiles 0.29% (with the unit refined where options collapse; 1.72% before, 7.14%
# before the re-choice), so both tiers hold the minimum time to 0.5%.
MINIMUM_TIME_GAP_BOUND = float(os.environ.get("KAREUS_SOLVER_MINIMUM_TIME_GAP_BOUND", "0.005"))
# Asked for plans at the deadlines (`kareus solve --deadline`), the solver searches on at each
# (src/pipeline/deadline_polish.h), and there the bound is tighter: on the slow tier's 200
# profiles the worst gap over the MILP's 5e-4 bound was 0.142% (2.23% unasked), above 0.1% at 6 of
# the 1,600 deadlines (one of them truly: 0.136% over a plan proven within 1e-4); on the first
# four, at most 0.105% (0.055% over the optimum). The fast tier holds asked deadlines to 0.25%;
# the slow tier to 0.5% (KAREUS_SOLVER_ASKED_GAP_BOUND), which holds its MILPs to 8.3e-4.
ASKED_GAP_BOUND = float(os.environ.get("KAREUS_SOLVER_ASKED_GAP_BOUND", "0.0025"))
LABEL = os.environ.get("KAREUS_SOLVER_SEEDS", "fresh-2026-12-07")
COUNT = int(os.environ.get("KAREUS_SOLVER_PROFILES", "4"))
BINARY = os.environ.get("KAREUS")
# "K/N": the K-th of N interleaved shards of the profiles (ctest runs the slow tier's shards side by side).
SHARD, SHARDS = (int(part) for part in os.environ.get("KAREUS_SOLVER_SHARD", "0/1").split("/"))
MILP_LIMIT_S = float(os.environ.get("KAREUS_SOLVER_MILP_LIMIT_S", "5"))
MILP_GAP_SHARE = 1 / 6


@pytest.mark.skipif(not BINARY, reason="KAREUS (the kareus binary) not set; ctest sets it")
@pytest.mark.parametrize("seed", seeds(LABEL, COUNT)[SHARD::SHARDS])
def test_frontier_within_promise_of_the_optimum(seed):
    profile = generate(seed)
    bounds = [MINIMUM_TIME_GAP_BOUND] + [GAP_BOUND] * (len(DEADLINE_FRACTIONS) - 1)
    asked_bounds = [min(bound, ASKED_GAP_BOUND) for bound in bounds]
    rel_gaps = [MILP_GAP_SHARE * bound for bound in asked_bounds]
    rows, points, model, _ = gaps(BINARY, profile, rel_gaps=rel_gaps, time_limit_s=MILP_LIMIT_S, ask=True)
    assert abs(points[0][0] - model.fastest_s()) <= 1e-9 * model.fastest_s(), "kareus misses the minimum time"
    for row, bound, asked_bound in zip(rows, bounds, asked_bounds, strict=True):
        context = f"seed {seed} ({profile.shape}) at {row['deadline_s']:.6f} s"
        for label, energy_j, gap, gap_to_found, check in (
                (context, row["kareus_j"], row["gap"], row["gap_to_found"], bound),
                (f"{context} asked", row["asked_j"], row["asked_gap"], row["asked_gap_to_found"], asked_bound)):
            assert energy_j >= row["bound_j"] * (1 - 1e-9), f"{label}: below the optimum's bound: {row}"
            assert gap_to_found <= check, f"{label}: {100 * gap_to_found:.4f}% above a plan: {row}"
            if row["proven"]:
                assert gap <= check, f"{label}: {100 * gap:.4f}% above the optimum: {row}"
            elif gap > check:
                print(f"{label}: unproven (MILP time limit), {100 * gap:.4f}% above its lower bound")
        assert row["asked_j"] <= row["kareus_j"] * (1 + 1e-12), f"{context}: asking made it worse: {row}"

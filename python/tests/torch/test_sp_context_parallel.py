"""Sequence and context parallelism together: an SP + CP stage computes what the plain TP layer
does over the whole sequence.

Four gloo ranks, TP 2 x CP 2 with --sequence-parallel, one stage of the 4-layer tiny model, fp32.
The reference is the plain TP layer over the whole sequence (neither SP nor CP), so it cannot
share a mistake with either. As in Megatron, CP shards the sequence first (rank r holds chunks r
and 3-r of four) and SP splits that CP-local sequence over TP: TP rank t holds the t-th half of
its CP rank's positions. Its output and input gradient must equal the reference's at those
positions, its parameter gradients summed over CP (and the norms' over TP too) the reference's,
within 1e-5 relative: for the plain SP + CP layer, and nanobatched for every slot of every key
(SP and CP collectives alike) plus none, with full recompute; a launch trace matching the plan.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import helpers  # noqa: E402

TP, CP = 2, 2
SEQ = 16
MBS = 2
TOLERANCE = 1e-5


def _worker(rank, world, port, out_dir):
    from kareus import torch as kt
    from kareus._runtime import Workload

    tp_rank, cp_rank, groups, full_rope, rope, x, grad = helpers.start_tp_cp_test(rank, world, port, TP, CP, SEQ, MBS)
    local = SEQ // CP // TP
    positions = kt.layer.cp_positions(SEQ, CP, cp_rank)[tp_rank * local:(tp_rank + 1) * local]
    results = {"positions": positions.tolist()}
    workload = Workload(helpers.TINY_MODEL, tp=TP, cp=CP, pp=1, mbs=MBS, seq=SEQ, microbatches=1,
                        recompute="full", sequence_parallel=True)
    sharded = helpers.ShardedStage(kt, workload, tp_rank, groups, full_rope, rope, x, grad, positions, cp=True,
                                   sequence_parallel=True)
    results["plain"] = sharded.plain()
    results["cases"] = sharded.cases(f"{out_dir}/plan_{rank}.json")
    helpers.finish_worker(rank, out_dir, results)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return helpers.run_workers(_worker, TP * CP, tmp_path_factory.mktemp("sp_cp"))


def test_rank_zero_holds_the_first_half_of_its_chunks(results):
    # Rank 0 is tp 0, cp 0: CP chunks 0 and 3 of four (positions 0-3, 12-15), its TP half the first.
    assert results["positions"] == [0, 1, 2, 3]


def test_plain_sp_cp_layer_matches_the_whole_sequence(results):
    errors = results["plain"]
    worst = max(errors, key=errors.get)
    assert errors[worst] < TOLERANCE, (worst, errors[worst])
    assert len(errors) == 2 + 4 * 6


CP_COLLECTIVES = {"kv_all_gather", "kv_regather", "dkv_reduce_scatter"}
SP_COLLECTIVES = {"attn_all_gather", "attn_reduce_scatter", "mlp_all_gather", "mlp_reduce_scatter",
                  "mlp_grad_all_gather", "fc1_input_all_gather", "fc1_grad_reduce_scatter", "attn_grad_all_gather",
                  "qkv_input_all_gather", "qkv_grad_reduce_scatter"}


def test_every_slot_matches_the_whole_sequence(results):
    cases = results["cases"]
    keys = {case["key"] for case in cases}
    assert len(keys) == 23 and len(cases) > len(keys), sorted(keys)
    # No all-reduce is left on TP: SP replaces every one; CP's collectives run beside them.
    helpers.check_sharded_cases(cases, TOLERANCE, SP_COLLECTIVES | CP_COLLECTIVES)
    print(f"worst relative error over {len(cases)} cases: "
          f"{max(max(c['errors'].values()) for c in cases):.3g}; plain {max(results['plain'].values()):.3g}")

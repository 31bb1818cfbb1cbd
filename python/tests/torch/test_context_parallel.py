"""Context parallelism: a CP-sharded stage computes what the whole sequence does on one rank.

Four gloo ranks, TP 2 x CP 2, one stage of the 4-layer tiny model, fp32. The reference is the
plain layer over the whole sequence (no CP) on each TP group, so it cannot share a mistake with
the CP code. Each CP rank holds chunks r and 3-r of four (load-balanced causal sharding); its
output and input gradient must equal the reference's at its positions, and its parameter
gradients summed over the CP group must equal the reference's, within 1e-5 relative: for the
plain CP layer, and nanobatched for every slot of every key that carries a CP collective
(kv_all_gather, kv_regather, dkv_reduce_scatter) plus none, with and without full recompute.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import helpers  # noqa: E402

TP, CP = 2, 2
SEQ = 16
MBS = 2
TOLERANCE = 1e-5
CP_COLLECTIVES = {"kv_all_gather", "kv_regather", "dkv_reduce_scatter"}


def _worker(rank, world, port, out_dir):
    from kareus import torch as kt
    from kareus._runtime import Workload

    tp_rank, cp_rank, groups, full_rope, rope, x, grad = helpers.start_tp_cp_test(rank, world, port, TP, CP, SEQ, MBS)
    positions = kt.layer.cp_positions(SEQ, CP, cp_rank)
    results = {"positions": positions.tolist(), "cases": []}
    for recompute in (True, False):
        workload = Workload(helpers.TINY_MODEL, tp=TP, cp=CP, pp=1, mbs=MBS, seq=SEQ, microbatches=1,
                            recompute="full" if recompute else "none")
        # Sharded by kareus's own shard_sequence, so that comparing at ``positions`` checks it too.
        sharded = helpers.ShardedStage(kt, workload, tp_rank, groups, full_rope, rope, x, grad, positions,
                                       shard=lambda tensor: kt.shard_sequence(tensor, CP, cp_rank), cp=True)
        if recompute:
            results["plain"] = sharded.plain()
        results["cases"] += sharded.cases(f"{out_dir}/plan_{rank}.json", CP_COLLECTIVES)
    results["groups"] = kt.describe_groups(groups)
    helpers.finish_worker(rank, out_dir, results)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return helpers.run_workers(_worker, TP * CP, tmp_path_factory.mktemp("cp"))


def test_rank_zero_holds_the_first_and_last_chunk(results):
    # Rank 0 is tp 0, cp 0: chunks 0 and 3 of 4 chunks of 4 tokens.
    assert results["positions"] == [0, 1, 2, 3, 12, 13, 14, 15]


def test_plain_cp_layer_matches_the_whole_sequence(results):
    errors = results["plain"]
    worst = max(errors, key=errors.get)
    assert errors[worst] < TOLERANCE, worst
    assert len(errors) == 2 + 4 * 6


def test_every_cp_slot_matches_the_whole_sequence(results):
    cases = results["cases"]
    # Keys with a CP collective: fwd_qkv_ag (norm_0 linear_0 rope_0), fwd_ao_ag (attn_0
    # linear_0), bwd_o_ag (norm_0 linear_0), bwd_a_ag (attn_0), bwd_a_rs (attn_0), bwd_qkv_rs
    # (rope_0 linear_0), each + none: 4 + 3 + 3 + 2 + 2 + 3 = 17 per recompute setting.
    assert len(cases) == 2 * 17
    helpers.check_sharded_cases(cases, TOLERANCE, CP_COLLECTIVES | {"attn_all_reduce", "qkv_grad_all_reduce"},
                                at_least=True)


def test_tp_and_cp_groups_are_made_for_every_cta_count(results):
    # The first plan uses 3 CTAs and the trails' default 16 (made ascending); a later one adds 6.
    made = [(g["group"], g["ctas"]) for g in results["groups"]]
    assert made == [("tp", None), ("cp", None), ("tp", 3), ("cp", 3), ("tp", 16), ("cp", 16), ("tp", 6), ("cp", 6)]

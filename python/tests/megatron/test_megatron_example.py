"""examples/megatron/train_gpt.py end to end under torchrun, 4 gloo ranks (TP 2 x PP 2).

The model .json comes from kareus.megatron.workload (the example's --write-model), the plan from
`kareus plan --model` of it. 10 training steps with --check: the same losses as the stock
GPTModel from the same seed (within 1e-5 relative), every rank's recorded clocks and launch
trace equal to the plan's; and a plan of another workload exits 2 on every rank before the first
step. With --sequence-parallel (and with --vpp 2 too)
the same job trains with the losses of stock Megatron without SP at the same TP (the local spec's
norms take no SP in stock Megatron), clocks and launch traces the plan's on every rank.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import mhelpers
from mhelpers import helpers

WORKLOAD = ["--tp", "2", "--pp", "2", "--microbatches", "4", "--mbs", "2", "--seq", "32"]
STEPS = 10


def _example(args, ranks=4, timeout=300):
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(ranks),
               str(mhelpers.EXAMPLE), "--model", helpers.TINY_MODEL] + WORKLOAD + args
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=helpers.python_env(),
                          cwd=helpers.REPO)


def _plan(model_json, out, extra=()):
    binary = helpers.kareus_binary()
    if not binary.exists():
        pytest.skip(f"{binary} is not built")
    written = subprocess.run([sys.executable, str(mhelpers.EXAMPLE), "--model", helpers.TINY_MODEL, *WORKLOAD,
                              *extra, "--write-model", str(model_json)], capture_output=True, text=True,
                             env=helpers.python_env(), cwd=helpers.REPO, timeout=120)
    assert written.returncode == 0, written.stderr[-3000:]
    flags = written.stdout.split(f"--model {model_json} ")[1].split(" --out")[0].split()
    # A quick plan (5% searches): what is tested is that the job follows it, not its quality.
    subprocess.run([str(binary), "plan", "--model", str(model_json), *flags, "--methods", "kareus",
                    "--always-nanobatch", "--max-plans", "2", "--search-budget", "0.05", "--out", str(out)],
                   check=True, capture_output=True, timeout=180)
    return sorted((out / "plans" / "kareus").glob("*.json"))[0], flags


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    mhelpers.require_megatron()
    tmp = tmp_path_factory.mktemp("megatron_example")
    plan, flags = _plan(tmp / "tiny-gpt.json", tmp / "plan")
    out = tmp / "out.json"
    run = _example(["--steps", str(STEPS), "--kareus-plan", str(plan), "--check", "--json", str(out)])
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-6000:]
    return json.loads(out.read_text()), json.loads(plan.read_text()), flags, tmp


def test_the_workload_round_trips_through_the_model_json(trained):
    _, plan, flags, tmp = trained
    written = json.loads((tmp / "tiny-gpt.json").read_text())
    tiny = json.loads(open(helpers.TINY_MODEL).read())
    for field in ("hidden", "heads", "kv_groups", "head_dim", "ffn", "layers", "vocab", "qk_norm", "mlp",
                  "tied_embeddings"):
        assert written[field] == tiny[field], field
    assert flags == ["--tp", "2", "--cp", "1", "--pp", "2", "--dp", "1", "--mbs", "2", "--seq", "32",
                     "--microbatches", "4", "--recompute", "full", "--layers-per-stage", "2,2"]
    assert len(plan["stages"]) == 2


def test_ten_steps_train_as_the_stock_gptmodel(trained):
    result, _, _, _ = trained
    assert result["steps"] == STEPS and len(result["loss"]) == STEPS
    assert result["max_rel_loss_diff"] < 1e-5
    assert result["max_rel_loss_diff"] == pytest.approx(
        max(abs(a - b) / b for a, b in zip(result["loss"], result["reference_loss"])))
    # Random tokens over a 256-word vocabulary start near ln(256) = 5.545 and the loss falls.
    assert abs(result["loss"][0] - 5.545) < 0.1
    assert result["loss"][-1] < result["loss"][0] - 0.1
    assert result["megatron_core_version"].startswith("0.")


def test_clocks_and_launch_trace_follow_the_plan_on_every_rank(trained):
    result, plan, _, _ = trained
    assert result["clocks_match_plan"] is True
    assert result["trace_matches_plan"] is True, result["trace_problems"]
    freqs = [i["freq_mhz"] for i in plan["stages"][0]["instructions"]] * STEPS
    collapsed = [f for index, f in enumerate(freqs) if index == 0 or f != freqs[index - 1]]
    assert result["rank0_clocks_mhz"] == collapsed
    # One plain TP group, then one per distinct CTA count of the plan (and the trail's default).
    from kareus._runtime import load_gpu

    planned = {c["ctas"] for stage in plan["stages"] for i in stage["instructions"] for c in i["partitions"].values()}
    counts = [g["ctas"] for g in result["comm_groups"]]
    assert counts == [None] + sorted(planned | {load_gpu("a100-40gb")["default_comm_ctas"]})


def test_a_plan_of_another_workload_exits_2_on_every_rank(trained):
    _, _, _, tmp = trained
    other, _ = _plan(tmp / "other.json", tmp / "other-plan", ["--microbatches", "8"])
    # Each rank alone (helpers.each_rank_alone): one that reached its rendezvous before checking
    # the plan would wait there until the timeout.
    command = [sys.executable, str(mhelpers.EXAMPLE), "--model", helpers.TINY_MODEL] + WORKLOAD + [
        "--steps", "1", "--kareus-plan", str(other)]
    for rank, (code, stdout, stderr) in enumerate(helpers.each_rank_alone(command, 4)):
        assert code == 2, f"rank {rank} exited {code}: {stderr[-3000:]}"
        assert f"error: rank {rank}:" in stderr and "microbatches 8" in stderr, stderr[-3000:]
        assert "loss" not in stdout


def _train(tmp, extra, steps):
    plan, _ = _plan(tmp / "model.json", tmp / "plan", extra)
    out = tmp / "out.json"
    run = _example([*extra, "--steps", str(steps), "--kareus-plan", str(plan), "--check", "--json", str(out)])
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-6000:]
    return json.loads(out.read_text()), json.loads(plan.read_text())


def _check_follows_stock_megatron(result, plan, steps):
    assert len(result["loss"]) == steps and result["max_rel_loss_diff"] < 1e-5
    assert result["loss"][-1] < result["loss"][0]
    assert result["clocks_match_plan"] is True
    assert result["trace_matches_plan"] is True, result["trace_problems"]
    keys = {k for stage in plan["stages"] for i in stage["instructions"] for k in i["partitions"]}
    assert any(key.endswith("_ag") for key in keys) and any(key.endswith("_rs") for key in keys), sorted(keys)


def test_sequence_parallel_trains_as_stock_megatron_without_it(tmp_path):
    mhelpers.require_megatron()
    result, plan = _train(tmp_path, ["--sequence-parallel"], 5)
    _check_follows_stock_megatron(result, plan, 5)


def test_interleaved_sequence_parallel_trains_as_stock_megatron(tmp_path):
    mhelpers.require_megatron()
    result, plan = _train(tmp_path, ["--sequence-parallel", "--vpp", "2"], 5)
    _check_follows_stock_megatron(result, plan, 5)
    assert {i["chunk"] for i in plan["stages"][0]["instructions"]} == {0, 1}

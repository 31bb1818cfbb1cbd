"""examples/train_llama.py end to end: torchrun, 4 gloo ranks (TP 2 x PP 2), a plan from
`kareus plan` for examples/tiny-llama.json, 20 steps with --check, switching plans at step 10;
8 ranks with data parallelism (TP 2 x PP 2 x DP 2); 4 with context parallelism (CP 2 x PP 2)
against 2 without, and TP 2 against TP 1; and a wrong plan failing on every rank without a hang."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

import helpers  # noqa: E402

WORKLOAD = ["--tp", "2", "--pp", "2", "--microbatches", "4", "--mbs", "2", "--seq", "256"]


def _torchrun(args, timeout, ranks=4, workload=WORKLOAD):
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(ranks),
               str(helpers.REPO / "examples" / "train_llama.py"), "--model", helpers.TINY_MODEL] + workload + args
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=helpers.python_env(),
                          cwd=helpers.REPO)


def _each_rank_alone(args, ranks, workload=WORKLOAD):
    """The stderr of every rank of a ``ranks``-rank train_llama.py job run alone
    (helpers.each_rank_alone), after checking that each exited 2."""
    command = [sys.executable, str(helpers.REPO / "examples" / "train_llama.py"), "--model",
               helpers.TINY_MODEL] + workload + args
    errors = []
    for rank, (code, _, stderr) in enumerate(helpers.each_rank_alone(command, ranks)):
        assert code == 2, f"rank {rank} exited {code}: {stderr[-3000:]}"
        errors.append(stderr)
    return errors


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    binary = helpers.kareus_binary()
    if not binary.exists():
        pytest.skip(f"{binary} is not built")
    out = tmp_path_factory.mktemp("plan")
    subprocess.run([str(binary), "plan", "--model", helpers.TINY_MODEL, *WORKLOAD, "--gpu", "a100-40gb",
                    "--methods", "kareus", "--always-nanobatch", "--max-plans", "2", "--out", str(out)], check=True, capture_output=True,
                   timeout=120)
    first = sorted((out / "plans" / "kareus").glob("*.json"))[0]
    # A second plan: every collective after the compute (slot none) on 9 CTAs.
    document = json.loads(first.read_text())
    for stage in document["stages"]:
        for instruction in stage["instructions"]:
            for config in instruction["partitions"].values():
                config.update({"slot": "none", "ctas": 9})
    second = out / "second.json"
    second.write_text(json.dumps(document))
    return first, second


def test_without_recompute_on_an_uneven_split(tmp_path):
    binary = helpers.kareus_binary()
    if not binary.exists():
        pytest.skip(f"{binary} is not built")
    extra = ["--recompute", "none", "--layers-per-stage", "3,1"]
    subprocess.run([str(binary), "plan", "--model", helpers.TINY_MODEL, *WORKLOAD, *extra, "--methods", "kareus",
                    "--always-nanobatch", "--max-plans", "2", "--out", str(tmp_path / "plan")], check=True, capture_output=True, timeout=120)
    plan = sorted((tmp_path / "plan" / "plans" / "kareus").glob("*.json"))[0]
    out = tmp_path / "out.json"
    run = _torchrun(["--steps", "3", "--plan", str(plan), "--check", "--json", str(out), *extra], timeout=180)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    result = json.loads(out.read_text())
    assert result["max_rel_loss_diff"] < 1e-4 and result["trace_matches_plan"] is True
    assert len(result["loss"]) == 3 and result["loss"][2] < result["loss"][0]


def test_data_parallel_replicas_train_in_step(plans, tmp_path):
    # Each DP replica trains on its own batches; gradients are averaged over the replicas, so the
    # replicas' weights stay equal and the loss is their mean. Stage neighbours are tp x dp = 4
    # ranks apart in Megatron's order.
    binary = helpers.kareus_binary()
    if not binary.exists():
        pytest.skip(f"{binary} is not built")
    subprocess.run([str(binary), "plan", "--model", helpers.TINY_MODEL, *WORKLOAD, "--dp", "2", "--methods", "kareus",
                    "--always-nanobatch", "--max-plans", "2", "--out", str(tmp_path / "plan")], check=True,
                   capture_output=True, timeout=120)
    plan = sorted((tmp_path / "plan" / "plans" / "kareus").glob("*.json"))[0]
    out = tmp_path / "out.json"
    run = _torchrun(["--dp", "2", "--steps", "3", "--plan", str(plan), "--check", "--json", str(out)], timeout=240,
                    ranks=8)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    result = json.loads(out.read_text())
    assert result["max_rel_loss_diff"] < 1e-4 and result["trace_matches_plan"] is True
    assert result["dp_replica_max_diff"] == 0.0
    assert len(result["loss"]) == 3 and result["loss"][2] < result["loss"][0]
    # A plan made for --dp 1 is refused for a --dp 2 job, on every rank.
    for rank, stderr in enumerate(_each_rank_alone(["--dp", "2", "--steps", "1", "--plan", str(plans[0])], ranks=8)):
        assert f"error: rank {rank}:" in stderr and "made for dp 1, this run has dp 2" in stderr, stderr[-3000:]
    # Every field of the workload is checked: a plan made for --seq 256 does not train --seq 128.
    for rank, stderr in enumerate(_each_rank_alone(["--seq", "128", "--steps", "1", "--plan", str(plans[0])], ranks=4)):
        assert f"error: rank {rank}:" in stderr and "made for seq 256, this run has seq 128" in stderr, stderr[-3000:]


def _quick_train(tmp_path, name, workload, ranks, steps=3):
    """A quick plan (three clocks, 5% searches: with TP 1 the partitions are large and the default
    search takes a minute) for ``workload``, then ``steps`` steps with --check; the result JSON."""
    binary = helpers.kareus_binary()
    if not binary.exists():
        pytest.skip(f"{binary} is not built")
    plan_dir = tmp_path / f"plan_{name}"
    subprocess.run([str(binary), "plan", "--model", helpers.TINY_MODEL, *workload, "--methods", "kareus",
                    "--always-nanobatch", "--max-plans", "2", "--clocks", "1230:1410:90", "--search-budget", "0.05",
                    "--out", str(plan_dir)], check=True, capture_output=True, timeout=120)
    plan = sorted((plan_dir / "plans" / "kareus").glob("*.json"))[0]
    out = tmp_path / f"out_{name}.json"
    run = _torchrun(["--steps", str(steps), "--plan", str(plan), "--check", "--json", str(out)], timeout=240,
                    ranks=ranks, workload=workload)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    result = json.loads(out.read_text())
    assert result["max_rel_loss_diff"] < 1e-4 and result["trace_matches_plan"] is True
    return result


def _max_relative(a, b):
    return max(abs(x - y) / y for x, y in zip(a, b, strict=True))


def test_context_parallel_trains_like_the_whole_sequence(tmp_path):
    # CP 2 x PP 2 (each CP rank holds two of four sequence chunks; K and V gathered, their
    # gradients reduce-scattered at the plan's slots) against CP 1 x PP 2 from the same seed: the
    # same losses, step by step.
    base = ["--tp", "1", "--pp", "2", "--microbatches", "4", "--mbs", "2", "--seq", "256"]
    split = _quick_train(tmp_path, "cp2", base + ["--cp", "2"], ranks=4)
    whole = _quick_train(tmp_path, "cp1", base, ranks=2)
    assert split["dp_replica_max_diff"] == 0.0  # the CP ranks' weights stay equal
    assert {g["group"] for g in split["comm_groups"]} == {"tp", "cp"}
    assert _max_relative(split["loss"], whole["loss"]) < 1e-5, (split["loss"], whole["loss"])
    assert split["loss"][2] < split["loss"][0]


def test_tensor_parallel_trains_like_one_rank(tmp_path):
    # TP 2 (layers split by heads and MLP columns, embedding, output layer and cross-entropy split
    # by vocabulary) against TP 1 from the same seed: the same losses, step by step.
    base = ["--pp", "2", "--microbatches", "4", "--mbs", "2", "--seq", "256"]
    split = _quick_train(tmp_path, "tp2", base + ["--tp", "2"], ranks=4)
    whole = _quick_train(tmp_path, "tp1", base + ["--tp", "1"], ranks=2)
    assert _max_relative(split["loss"], whole["loss"]) < 1e-5, (split["loss"], whole["loss"])


def _distinct_ctas(path):
    document = json.loads(path.read_text())
    return {c["ctas"] for s in document["stages"] for i in s["instructions"] for c in i["partitions"].values()}


def test_training_follows_the_plan_and_matches_the_reference(plans, tmp_path):
    first, second = plans
    out = tmp_path / "out.json"
    run = _torchrun(["--steps", "20", "--plan", str(first), "--switch-plan", str(second), "--switch-at", "10",
                     "--check", "--json", str(out)], timeout=240)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    result = json.loads(out.read_text())
    assert result["steps"] == 20 and len(result["loss"]) == 20 and len(result["reference_loss"]) == 20
    assert result["max_rel_loss_diff"] < 1e-4
    assert result["max_rel_loss_diff"] == pytest.approx(
        max(abs(a - b) / b for a, b in zip(result["loss"], result["reference_loss"])))
    assert result["trace_matches_plan"] is True
    # Random tokens over a 256-word vocabulary start near ln(256) = 5.545 and the loss falls.
    assert abs(result["loss"][0] - 5.545) < 0.1
    assert result["loss"][-1] < result["loss"][0] - 0.3
    # One plain group, then one per distinct CTA count of both plans (and the trail partitions'
    # default, the GPU's), ascending.
    from kareus._runtime import load_gpu

    counts = [g["ctas"] for g in result["comm_groups"]]
    assert counts[0] is None
    assert counts[1:] == sorted(_distinct_ctas(first) | {9, load_gpu("a100-40gb")["default_comm_ctas"]})
    # The frequency optimizer applied stage 0's planned clocks in order (repeats are not re-sent).
    freqs = [i["freq_mhz"] for i in json.loads(first.read_text())["stages"][0]["instructions"]] * 20
    collapsed = [f for index, f in enumerate(freqs) if index == 0 or f != freqs[index - 1]]
    assert [c for c in result["rank0_clocks_mhz"] if c != 0] == collapsed


def _another_split(document):
    document["workload"]["layers_per_stage"] = [3, 1]
    return "made for layers_per_stage [3, 1], this run has layers_per_stage [2, 2]"


def _unknown_key(document):
    document["stages"][1]["instructions"][0]["partitions"]["fwd_qkv_ag"] = {"slot": "norm_0", "ctas": 3}
    return "stage 1 instruction 0 (forward microbatch 0): unknown partition key 'fwd_qkv_ag'"


def _too_many_ctas(document):
    document["stages"][0]["instructions"][-1]["partitions"]["bwd_mlp"]["ctas"] = 109
    return "partition 'bwd_mlp': ctas 109 is outside 1..108 (one CTA per SM)"


@pytest.mark.parametrize("edit", [_another_split, _unknown_key, _too_many_ctas])
def test_a_wrong_plan_fails_on_every_rank_at_start(plans, tmp_path, edit):
    first, _ = plans
    document = json.loads(first.read_text())
    message = edit(document)
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps(document))
    for rank, stderr in enumerate(_each_rank_alone(["--steps", "1", "--plan", str(wrong)], ranks=4)):
        assert f"error: rank {rank}: {wrong}: " in stderr and message in stderr, stderr[-3000:]


def test_sequence_parallel_trains_like_the_tp_all_reduce(tmp_path):
    # TP 2 x PP 2 with --sequence-parallel (residual stream, norms and the stage boundary on half
    # the sequence; all-gathers and reduce-scatters at the plan's slots) against the same job
    # without it from the same seed: the same losses, step by step. --check compares it with the
    # plain sequence-parallel layers and the plan's launch trace.
    base = ["--tp", "2", "--pp", "2", "--microbatches", "4", "--mbs", "2", "--seq", "256"]
    split = _quick_train(tmp_path, "sp", base + ["--sequence-parallel"], ranks=4)
    whole = _quick_train(tmp_path, "nosp", base, ranks=4)
    assert _max_relative(split["loss"], whole["loss"]) < 1e-5, (split["loss"], whole["loss"])
    assert split["loss"][2] < split["loss"][0]
    # --vpp is refused by name on every rank.
    for rank, stderr in enumerate(_each_rank_alone(["--vpp", "2", "--steps", "1", "--plan", "unused.json"], ranks=4)):
        assert f"error: rank {rank}: --vpp 2: kareus.torch's driver runs non-interleaved 1F1B only" in stderr, stderr

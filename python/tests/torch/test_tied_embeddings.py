"""Tied embeddings are one table in kareus.torch.

With one stage the output layer is the embedding parameter itself. With PP 2 (two gloo ranks,
TP 1) the first stage's table and the last stage's copy start equal and stay exactly equal over
several SGD steps (their gradients summed over the embedding group), and the run trains the same
model as the one-stage run: the same losses and the same table after every step. Each stage's
state dict holds the table once.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

import helpers  # noqa: E402

PP = 2
MBS = 2
SEQ = 8
MICROBATCHES = 2
STEPS = 4
LR = 0.5
SEED = 3


def _tied_model(path) -> str:
    document = json.loads(open(helpers.TINY_MODEL).read())
    document.update(name="tiny-tied", tied_embeddings=True)
    path.write_text(json.dumps(document))
    return str(path)


def _one_stage_run(model: dict):
    """The same model trained on one stage without collectives: losses and table per step."""
    from kareus import torch as kt

    stage = kt.LlamaStage(model, [model["layers"]], 0, 1, 0, SEED)
    rope = kt.Rope(model, SEQ, torch.device("cpu"), torch.float32)
    optimizer = torch.optim.SGD(stage.parameters(), lr=LR)
    losses, tables = [], []
    for step in range(STEPS):
        tokens, labels = kt.synthetic_batch(model["vocab"], MICROBATCHES, MBS, SEQ, step, SEED)
        optimizer.zero_grad()
        total = 0.0
        for microbatch in range(MICROBATCHES):
            h = kt.reference_stack(stage.layers, rope, stage.embed(tokens[microbatch]), None, 1)
            loss = stage.loss(h, labels[microbatch], MBS * SEQ) / MICROBATCHES
            loss.backward()
            total += float(loss)
        optimizer.step()
        losses.append(total)
        tables.append(stage.embedding.detach().clone())
    return losses, tables


def _worker(rank, world, port, out_dir, model_path):
    import torch.distributed as dist

    from kareus import InputError
    from kareus import torch as kt
    from kareus._runtime import Workload

    helpers.init_gloo(rank, world, port)
    workload = Workload(model_path, tp=1, pp=PP, mbs=MBS, seq=SEQ, microbatches=MICROBATCHES, recompute="none")
    model, split = workload.model, list(workload.stage_layers)
    groups = kt.CommGroups(kt.tp_groups(1, PP), rank, "gloo")
    embedding_group = kt.make_embedding_group(rank, "gloo", tp=1, pp=PP)
    stage = kt.LlamaStage(model, split, rank, 1, 0, SEED)
    mine = {"names": [name for name, _ in stage.named_parameters()], "state": list(stage.state_dict())}
    per_stage = [None] * world
    dist.all_gather_object(per_stage, mine)
    results = {"per_stage": per_stage}
    try:
        kt.PipelineDriver(stage, None, groups, rank, 1, PP, MBS, SEQ, torch.optim.SGD(stage.parameters(), lr=LR))
        results["missing_group"] = ""
    except InputError as error:
        results["missing_group"] = str(error)
    driver = kt.PipelineDriver(stage, None, groups, rank, 1, PP, MBS, SEQ,
                               torch.optim.SGD(stage.parameters(), lr=LR), embedding_group=embedding_group)

    def tables():
        both = [torch.empty_like(stage.embedding) for _ in range(world)]
        dist.all_gather(both, stage.embedding.detach().contiguous())
        return both

    start = tables()
    results["start_diff"] = (start[0] - start[1]).abs().max().item()
    results["losses"], results["copy_diffs"], results["table_errors"] = [], [], []
    one_stage_losses, one_stage_tables = _one_stage_run(model)
    for step in range(STEPS):
        tokens, labels = kt.synthetic_batch(model["vocab"], MICROBATCHES, MBS, SEQ, step, SEED)
        results["losses"].append(kt.step_loss_everywhere(driver.train_step(tokens, labels), PP, 1,
                                                         torch.device("cpu")))
        first, last = tables()
        results["copy_diffs"].append((first - last).abs().max().item())
        results["table_errors"].append(helpers.relative(first, one_stage_tables[step]))
    results["moved"] = helpers.relative(tables()[0], start[0])
    results["one_stage_losses"] = one_stage_losses
    helpers.finish_worker(rank, out_dir, results)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("tied")
    return helpers.run_workers(_worker, PP, out, _tied_model(out / "tiny-tied.json"))


def test_one_stage_has_one_table(tmp_path):
    from kareus import torch as kt
    from kareus._runtime import load_model

    tied = load_model(_tied_model(tmp_path / "tiny-tied.json"))
    untied = load_model(helpers.TINY_MODEL)
    stage = kt.LlamaStage(tied, [4], 0, 1, 0, SEED)
    names = [name for name, _ in stage.named_parameters()]
    assert "embedding" in names and "output" not in names
    assert sum(p.numel() for p in stage.parameters()) == sum(
        p.numel() for name, p in kt.LlamaStage(untied, [4], 0, 1, 0, SEED).named_parameters() if name != "output")
    assert not stage.holds_embedding_copy
    assert "output" in [name for name, _ in kt.LlamaStage(untied, [4], 0, 1, 0, SEED).named_parameters()]


def test_both_stages_hold_the_table_once(results):
    first, last = results["per_stage"]
    for stage in (first, last):
        assert stage["names"].count("embedding") == 1 and "output" not in stage["names"]
        assert stage["state"].count("embedding") == 1
    assert "final_norm" in last["names"] and "final_norm" not in first["names"]


def test_a_copy_without_its_embedding_group_is_refused(results):
    assert results["missing_group"] == ("PipelineDriver: stage 0 holds a copy of the tied embedding over pp 2: it "
                                        "needs its embedding group (kareus.torch.make_embedding_group)")


def test_the_copies_stay_equal_and_train_the_one_stage_model(results):
    assert results["start_diff"] == 0.0
    assert results["copy_diffs"] == [0.0] * STEPS
    assert results["moved"] > 1e-3  # the table trained
    assert results["losses"] == pytest.approx(results["one_stage_losses"], rel=1e-5)
    assert max(results["table_errors"]) < 1e-5

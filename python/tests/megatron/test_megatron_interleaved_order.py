"""Megatron's real interleaved 1F1B order, recorded, against the order derived from its schedule
and against kareus's own (kareus._runtime.interleaved_one_f_one_b, the order plans are made in).

``forward_backward_pipelining_with_interleaving`` of the installed Megatron-Core runs here once
per pipeline rank of each (pp, vpp, microbatches) case, in one gloo process of world 1: a stand-in
P2P communicator answers the pipeline group's rank and size and hands out the received
activations and gradients locally, so the schedule runs exactly the branches rank r runs in a
real job (its order depends only on rank, pp, vpp, microbatches and the group size, never on the
data). Each model chunk is a one-weight module that knows its ``vp_stage``; the recorder notes
every forward as (chunk, microbatch) from the chunk whose forward is called and the microbatch its
data iterator hands out, and every backward from a hook on that forward's output. It also notes
the starts and stops of config.timers' 'forward-compute' / 'backward-compute', the only signal
kareus.megatron's timers hook sees: every step must sit inside its own timer, so the k-th timer
start on a rank is the rank's k-th step.

The derived order (``interleaved_order``) is written from the schedule's rules: the lookup table
of microbatch groups (group size pp; the last group takes the remainder), chunk c's backwards
running the table's chunks mirrored (vpp - 1 - c), warmup 2 (pp - rank - 1) + (vpp - 1) pp
forwards capped at all of them, then one forward and one backward each, then the cool-down.

The recorded timer calls, replayed into kareus.megatron's timers hook (``InstructionTimers`` over
``InstructionHook`` with ``StepOrder``), must reach the frequency optimizer as exactly the steps
Megatron ran, (type, chunk, microbatch) each, on every rank of every case.
"""

from __future__ import annotations

import pytest

import mhelpers
from mhelpers import helpers

CASES = [(pp, vpp, m) for pp in (2, 3, 4) for vpp in (2, 3) for m in (pp, 2 * pp)] + [(2, 2, 6)]


def interleaved_order(rank: int, pp: int, vpp: int, microbatches: int) -> list:
    """Rank ``rank``'s steps, as [kind, chunk, microbatch], in Megatron's interleaved 1F1B."""
    group = pp
    table = []  # (microbatch, chunk) of the k-th forward
    for first in range(0, microbatches, group):
        last = microbatches if first + group >= microbatches else first + group
        table += [(m, c) for c in range(vpp) for m in range(first, last)]
    forwards = [["forward", c, m] for m, c in table]
    backwards = [["backward", vpp - 1 - c, m] for m, c in table]
    total = len(table)
    warmup = min(total, 2 * (pp - rank - 1) + (vpp - 1) * group)
    order = forwards[:warmup]
    for k in range(total - warmup):
        order += [forwards[warmup + k], backwards[k]]
    return order + backwards[total - warmup:]


def _record_worker(rank, world, port, out_dir, cases):
    import torch

    helpers.init_gloo(rank, world, port)
    import cpu_shim

    cpu_shim.install()
    from megatron.core.enums import ModelType
    from megatron.core.pipeline_parallel.p2p_communication import P2PCommunicator
    from megatron.core.pipeline_parallel.schedules import forward_backward_pipelining_with_interleaving
    from megatron.core.process_groups_config import ProcessGroupCollection
    from megatron.core.transformer.transformer_config import TransformerConfig

    class Group:
        """The pipeline (or a size-1) group as far as the schedule asks: its rank and size."""

        def __init__(self, rank, size):
            self._rank, self._size = rank, size

        def rank(self):
            return self._rank

        def size(self):
            return self._size

    class LocalP2P(P2PCommunicator):
        """Sends nothing; every receive is a fresh tensor of the asked shape."""

        def __init__(self, pp_group, config):
            self.pp_group, self.config = pp_group, config
            self.next_rank = self.prev_rank = None
            self.virtual_pipeline_model_parallel_size = config.virtual_pipeline_model_parallel_size

        def _communicate(self, *, tensor_send_next, tensor_send_prev, recv_prev, recv_next, tensor_shape,
                         wait_on_reqs=True):
            prev = torch.ones(tensor_shape, requires_grad=True) if recv_prev else None
            nxt = torch.ones(tensor_shape) if recv_next else None
            return prev, nxt, None

    class Chunk(torch.nn.Module):
        def __init__(self, config, vp_stage):
            super().__init__()
            self.config, self.vp_stage = config, vp_stage
            self.model_type = ModelType.encoder_or_decoder
            self.weight = torch.nn.Parameter(torch.ones(()))
            self.input = None

        def set_input_tensor(self, tensor):
            self.input = tensor[0] if isinstance(tensor, list) else tensor

    seq, mbs, hidden = 4, 1, 8
    results = []
    for pp, vpp, microbatches in cases:
        config = TransformerConfig(num_layers=pp * vpp, hidden_size=hidden, num_attention_heads=1,
                                   pipeline_model_parallel_size=pp, virtual_pipeline_model_parallel_size=vpp,
                                   pipeline_dtype=torch.float32, use_cpu_initialization=True)
        for pp_rank in range(pp):
            events = []

            class Timers:
                def __call__(self, name, log_level=None):
                    class Timer:
                        def start(self, barrier=False):
                            events.append(["start", name])

                        def stop(self, barrier=False):
                            events.append(["stop", name])

                    return Timer()

            config.timers = Timers()
            chunks = [Chunk(config, c) for c in range(vpp)]

            def forward_step(data_iterator, model):
                microbatch = next(data_iterator)
                source = model.input if model.input is not None else torch.ones(seq, mbs, hidden)
                output = source * model.weight
                events.append(["forward", model.vp_stage, microbatch])
                output.register_hook(
                    lambda grad, c=model.vp_stage, m=microbatch: events.append(["backward", c, m]))
                return output, lambda out: (out.sum(), {})

            pg = ProcessGroupCollection()
            pg.tp = pg.cp = pg.dp_cp = Group(0, 1)
            pg.embd = pg.pos_embd = None
            pg.pp = Group(pp_rank, pp)
            forward_backward_pipelining_with_interleaving(
                forward_step_func=forward_step, data_iterator=[iter(range(microbatches)) for _ in chunks],
                model=chunks, num_microbatches=microbatches, seq_length=seq, micro_batch_size=mbs,
                p2p_communicator=LocalP2P(pg.pp, config), pg_collection=pg)
            results.append({"case": [pp, vpp, microbatches, pp_rank], "events": events})
    helpers.finish_worker(rank, out_dir, {"runs": results})


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    out = tmp_path_factory.mktemp("interleaved")
    mhelpers.require_megatron()
    helpers.spawn(_record_worker, 1, str(out), CASES)
    import json

    runs = json.loads((out / "results.json").read_text())["runs"]
    return {tuple(run["case"]): run["events"] for run in runs}


def steps_of(events) -> list:
    """The recorded steps, each checked to sit alone inside its own compute timer."""
    steps = []
    compute = [e for e in events if e[0] in ("forward", "backward") or e[1].endswith("-compute")]
    for i in range(0, len(compute), 3):
        start, step, stop = compute[i:i + 3]
        timer = f"{step[0]}-compute"
        assert start == ["start", timer] and stop == ["stop", timer], compute[i:i + 3]
        steps.append(step)
    return steps


def test_a_hand_written_case_pp2_vpp2_four_microbatches():
    f = lambda c, m: ["forward", c, m]  # noqa: E731
    b = lambda c, m: ["backward", c, m]  # noqa: E731
    # rank 0 warms up 2 (2 - 0 - 1) + (2 - 1) 2 = 4 forwards; rank 1 warms up 2.
    assert interleaved_order(0, 2, 2, 4) == [f(0, 0), f(0, 1), f(1, 0), f(1, 1),
                                             f(0, 2), b(1, 0), f(0, 3), b(1, 1), f(1, 2), b(0, 0), f(1, 3), b(0, 1),
                                             b(1, 2), b(1, 3), b(0, 2), b(0, 3)]
    assert interleaved_order(1, 2, 2, 4)[:6] == [f(0, 0), f(0, 1), f(1, 0), b(1, 0), f(1, 1), b(1, 1)]


@pytest.mark.parametrize("pp, vpp, microbatches", CASES)
def test_megatron_runs_the_derived_interleaved_order(recorded, pp, vpp, microbatches):
    for rank in range(pp):
        steps = steps_of(recorded[(pp, vpp, microbatches, rank)])
        assert steps == interleaved_order(rank, pp, vpp, microbatches), (pp, vpp, microbatches, rank)
        assert len(steps) == 2 * vpp * microbatches


def test_all_forwards_in_warmup_when_the_warmup_covers_every_microbatch(recorded):
    # pp 4, vpp 2, 4 microbatches: rank 0's warmup 2 * 3 + 4 = 10 exceeds the 8 forwards.
    steps = steps_of(recorded[(4, 2, 4, 0)])
    assert [s[0] for s in steps] == ["forward"] * 8 + ["backward"] * 8


@pytest.mark.parametrize("pp, vpp, microbatches", CASES)
def test_the_planner_s_interleaved_order_is_megatron_s(recorded, pp, vpp, microbatches):
    from kareus._runtime import interleaved_one_f_one_b

    for rank in range(pp):
        planned = [list(step) for step in interleaved_one_f_one_b(rank, pp, vpp, microbatches)]
        assert planned == steps_of(recorded[(pp, vpp, microbatches, rank)]), (pp, vpp, microbatches, rank)


class _RecordingOptimizer:
    """The frequency optimizer as the hook drives it: every instruction as (type, chunk, microbatch)."""

    def __init__(self):
        self.instructions = []

    def on_step_begin(self):
        pass

    def on_step_end(self):
        pass

    def on_instruction_begin(self, kind, microbatch, chunk=0):
        self.instructions.append([kind, chunk, microbatch])

    def on_instruction_end(self, kind):
        pass


@pytest.mark.parametrize("pp, vpp, microbatches", CASES)
def test_the_timers_hook_names_each_step_s_chunk_and_microbatch_as_megatron_ran_it(recorded, pp, vpp, microbatches):
    # kareus.megatron sees only the timers: replayed into its hook, every rank's k-th compute step
    # must reach the optimizer (whose plan cursor checks it) as the step Megatron really ran.
    from kareus.megatron import InstructionHook, InstructionTimers, StepOrder

    for rank in range(pp):
        events = recorded[(pp, vpp, microbatches, rank)]
        optimizer, seen = _RecordingOptimizer(), []
        hook = InstructionHook(optimizer, rank, seen.append, StepOrder(pp, vpp, microbatches))
        timers = InstructionTimers(None, hook)
        for event in events:
            if event[0] in ("start", "stop"):
                getattr(timers(event[1]), event[0])()
        assert optimizer.instructions == steps_of(events), (pp, vpp, microbatches, rank)
        assert [list(s) for s in seen if s is not None] == optimizer.instructions

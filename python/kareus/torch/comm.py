"""Process groups per CTA count, the collective launcher and the launch trace.

One TP process group per distinct CTA count of the plan, created in ascending order on every
rank (``dist.new_group`` is collective over the world, so every rank creates every TP group of
every stage and data-parallel replica, in the same order).
With NCCL each group is bounded by ``ProcessGroupNCCL.Options().config.min_ctas = max_ctas = k``;
the collective is enqueued from a communication stream that first waits on an event recorded on
the compute stream just before the slot's first op, and ``wait()`` at the partition end makes the
compute stream wait on it (REFERENCE.md section 10). Gloo has no streams or CTA bound: the groups
are still made per count and the same calls run (gloo's async work runs on its own thread).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import torch
import torch.distributed as dist


class LaunchTrace:
    """What the engine did, in order: ("op", name, layer, nanobatch), ("enqueue", key, collective,
    layer, nanobatch, slot, ctas), ("wait", key, collective, layer, nanobatch) and
    ("pass", instruction type, microbatch, direction) markers. ``enabled`` False records nothing."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.events: List[tuple] = []

    def clear(self) -> None:
        self.events.clear()


class CommGroups:
    """This rank's TP groups: the plain one and one per CTA count.

    Args:
        tp_groups: the global ranks of every TP group (``tp_groups``: the same list on every rank).
        mine: the index of this rank's group in ``tp_groups``.
        backend: "gloo" or "nccl".
    """

    def __init__(self, tp_groups: Sequence[Sequence[int]], mine: int, backend: str) -> None:
        self.tp_groups = [list(ranks) for ranks in tp_groups]
        self.mine = mine
        self.backend = backend
        self.cuda = backend == "nccl"
        self.plain = self._make_groups(None)
        self.bounded: Dict[int, object] = {}
        self.comm_stream = torch.cuda.Stream() if self.cuda else None
        self.created: List[dict] = [{"ctas": None, "backend": backend, "bounded": False}]

    def ensure(self, ctas_counts: Sequence[int]) -> None:
        """Creates the groups of the counts not made yet, ascending (call on every rank)."""
        for ctas in sorted(set(ctas_counts) - set(self.bounded)):
            self.bounded[ctas] = self._make_groups(ctas)
            self.created.append({"ctas": ctas, "backend": self.backend, "bounded": self.cuda})

    def group(self, ctas: int):
        return self.bounded[ctas]

    def _make_groups(self, ctas: Optional[int]):
        mine = None
        for index, ranks in enumerate(self.tp_groups):
            options = None
            if self.cuda and ctas is not None:
                options = dist.ProcessGroupNCCL.Options()
                options.config.min_ctas = ctas
                options.config.max_ctas = ctas
            group = dist.new_group(ranks, backend=self.backend, pg_options=options)
            if index == self.mine:
                mine = group
        return mine

    def launch(self, tensor: torch.Tensor, ctas: int):
        """Enqueues the all-reduce of ``tensor`` (in place) on the group of ``ctas`` CTAs (0: the
        plain group, NCCL's own choice)."""
        group = self.bounded[ctas] if ctas else self.plain
        if self.comm_stream is None:
            return dist.all_reduce(tensor, group=group, async_op=True)
        ready = torch.cuda.Event()
        ready.record()
        with torch.cuda.stream(self.comm_stream):
            self.comm_stream.wait_event(ready)
            return dist.all_reduce(tensor, group=group, async_op=True)

    @staticmethod
    def wait(work) -> None:
        """Joins the collective (on CUDA: the compute stream waits on it, the host does not)."""
        work.wait()


def describe_groups(groups: CommGroups) -> List[dict]:
    return [dict(entry) for entry in groups.created]


# Megatron's rank order with cp = 1 (kareus._runtime.map_rank): TP fastest, then DP, then PP, so
# global rank = tp_rank + tp x (dp_rank + dp x stage).


def tp_groups(tp: int, pp: int, dp: int = 1) -> List[List[int]]:
    """Every TP group's ranks, by stage then DP rank; this rank's is at stage x dp + dp_rank."""
    return [[(stage * dp + replica) * tp + index for index in range(tp)] for stage in range(pp)
            for replica in range(dp)]


def dp_groups(tp: int, pp: int, dp: int) -> List[List[int]]:
    """Every DP group's ranks (one per stage and TP rank), by stage then TP rank; this rank's is
    at stage x tp + tp_rank."""
    return [[(stage * dp + replica) * tp + index for replica in range(dp)] for stage in range(pp)
            for index in range(tp)]


def make_dp_group(tp: int, pp: int, dp: int, stage: int, tp_rank: int, backend: str):
    """This rank's data-parallel group (every rank creates every DP group, in the same order),
    or None when dp is 1."""
    if dp == 1:
        return None
    mine = None
    for index, ranks in enumerate(dp_groups(tp, pp, dp)):
        group = dist.new_group(ranks, backend=backend)
        if index == stage * tp + tp_rank:
            mine = group
    return mine

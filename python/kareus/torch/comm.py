"""Process groups per CTA count, the collective launcher and the launch trace.

One TP process group (and, with context parallelism, one CP group) per distinct CTA count of the
plan, created in ascending order on every rank (``dist.new_group`` is collective over the world,
so every rank creates every group of every stage and data-parallel replica, in the same order).
With NCCL each group is bounded by ``ProcessGroupNCCL.Options().config.min_ctas = max_ctas = k``;
the collective is enqueued from a communication stream that first waits on an event recorded on
the compute stream just before the slot's first op, and ``wait()`` at the partition end makes the
compute stream wait on it (docs/kareus.md section 10). Gloo has no streams or CTA bound: the groups
are still made per count and the same calls run (gloo's async work runs on its own thread).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import torch
import torch.distributed as dist

from kareus._runtime import parallel_groups


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
    """This rank's TP groups (and, with context parallelism, CP groups): the plain one of each and
    one per CTA count.

    Args:
        tp_groups: the global ranks of every TP group (``tp_groups``: the same list on every rank).
        rank: this process's global rank (its groups are the ones holding it).
        backend: "gloo" or "nccl".
        cp_groups: the same for the CP groups (``cp_groups``); empty without CP.
    """

    def __init__(self, tp_groups: Sequence[Sequence[int]], rank: int, backend: str,
                 cp_groups: Sequence[Sequence[int]] = ()) -> None:
        self.families = {"tp": ([list(r) for r in tp_groups], group_index(tp_groups, rank))}
        if cp_groups:
            self.families["cp"] = ([list(r) for r in cp_groups], group_index(cp_groups, rank))
        self.backend = backend
        self.cuda = backend == "nccl"
        self._plain = {family: self._make_group(family, None) for family in self.families}
        self.plain = self._plain["tp"]
        self.plain_cp = self._plain.get("cp")
        self.bounded: Dict[int, Dict[str, object]] = {}
        self.comm_stream = torch.cuda.Stream() if self.cuda else None
        self.created: List[dict] = [{"group": family, "ctas": None, "backend": backend, "bounded": False}
                                    for family in self.families]

    def ensure(self, ctas_counts: Sequence[int]) -> None:
        """Creates the groups of the counts not made yet, ascending, TP then CP (call on every
        rank)."""
        for ctas in sorted(set(ctas_counts) - set(self.bounded)):
            self.bounded[ctas] = {family: self._make_group(family, ctas) for family in self.families}
            self.created += [{"group": family, "ctas": ctas, "backend": self.backend, "bounded": self.cuda}
                             for family in self.families]

    def group(self, ctas: int, family: str = "tp"):
        """The group of ``ctas`` CTAs (0: the plain one, NCCL's own choice)."""
        return self.bounded[ctas][family] if ctas else self._plain[family]

    def _make_group(self, family: str, ctas: Optional[int]):
        all_groups, index_mine = self.families[family]
        mine = None
        for index, ranks in enumerate(all_groups):
            options = None
            if self.cuda and ctas is not None:
                options = dist.ProcessGroupNCCL.Options()
                options.config.min_ctas = ctas
                options.config.max_ctas = ctas
            group = dist.new_group(ranks, backend=self.backend, pg_options=options)
            if index == index_mine:
                mine = group
        return mine

    def _enqueue(self, collective):
        """Runs ``collective()`` (an async torch.distributed call) from the communication stream
        once the compute stream's work so far is done (on CPU: at once)."""
        if self.comm_stream is None:
            return collective()
        ready = torch.cuda.Event()
        ready.record()
        with torch.cuda.stream(self.comm_stream):
            self.comm_stream.wait_event(ready)
            return collective()

    def launch(self, tensor: torch.Tensor, ctas: int, family: str = "tp"):
        """Enqueues the all-reduce of ``tensor`` (in place) on the group of ``ctas`` CTAs."""
        group = self.group(ctas, family)
        return self._enqueue(lambda: dist.all_reduce(tensor, group=group, async_op=True))

    def all_gather(self, tensor: torch.Tensor, ctas: int, dim: int, family: str = "cp") -> "Pending":
        """Enqueues the all-gather of ``tensor`` along ``dim``; ``wait()`` returns every rank's
        parts concatenated in rank order."""
        group = self.group(ctas, family)
        tensor = tensor.contiguous()
        parts = [torch.empty_like(tensor) for _ in range(dist.get_world_size(group))]
        work = self._enqueue(lambda: dist.all_gather(parts, tensor, group=group, async_op=True))
        return Pending(work, lambda: torch.cat(parts, dim=dim))

    def reduce_scatter(self, tensor: torch.Tensor, ctas: int, dim: int, family: str = "cp") -> "Pending":
        """Enqueues the reduce-scatter of ``tensor`` along ``dim``; ``wait()`` returns this rank's
        part of the sum over ranks. NCCL runs a reduce-scatter; gloo has none, so there it is an
        all-reduce and a slice (the same numbers)."""
        group = self.group(ctas, family)
        size, rank = dist.get_world_size(group), dist.get_rank(group)
        part = tensor.shape[dim] // size
        if self.cuda:
            inputs = [chunk.contiguous() for chunk in tensor.split(part, dim=dim)]
            output = torch.empty_like(inputs[rank])
            work = self._enqueue(lambda: dist.reduce_scatter(output, inputs, group=group, async_op=True))
            return Pending(work, lambda: output)
        total = tensor.contiguous().clone()
        work = self._enqueue(lambda: dist.all_reduce(total, group=group, async_op=True))
        return Pending(work, lambda: total.narrow(dim, rank * part, part))

    @staticmethod
    def wait(work) -> None:
        """Joins the collective (on CUDA: the compute stream waits on it, the host does not)."""
        work.wait()


class Pending:
    """An enqueued collective whose result needs a last step (concatenation, slicing) once done."""

    def __init__(self, work, result) -> None:
        self._work = work
        self._result = result

    def wait(self) -> torch.Tensor:
        self._work.wait()
        return self._result()


def describe_groups(groups: CommGroups) -> List[dict]:
    return [dict(entry) for entry in groups.created]


# The groups come from the C++ rank mapping (kareus._runtime.parallel_groups: Megatron's
# tp-cp-dp-pp order), the same lists on every rank, in the order every rank must create them.


def group_index(groups: Sequence[Sequence[int]], rank: int) -> int:
    """The index of the group of ``groups`` that holds ``rank``."""
    for index, ranks in enumerate(groups):
        if rank in ranks:
            return index
    raise ValueError(f"rank {rank} is in none of the groups {list(groups)}")


def tp_groups(tp: int, pp: int, dp: int = 1, cp: int = 1) -> List[List[int]]:
    """Every TP group's ranks."""
    return parallel_groups("tp", tp=tp, cp=cp, pp=pp, dp=dp)


def cp_groups(tp: int, pp: int, dp: int, cp: int) -> List[List[int]]:
    """Every CP group's ranks; empty when cp is 1."""
    return parallel_groups("cp", tp=tp, cp=cp, pp=pp, dp=dp) if cp > 1 else []


def dp_groups(tp: int, pp: int, dp: int, cp: int = 1) -> List[List[int]]:
    """Every gradient group's ranks: the DP x CP ranks of one stage and TP rank (their gradients
    are summed over CP, averaged over DP)."""
    return parallel_groups("gradient", tp=tp, cp=cp, pp=pp, dp=dp)


def embedding_groups(tp: int, pp: int, dp: int = 1, cp: int = 1) -> List[List[int]]:
    """Every embedding group's ranks: the first and last stage of one TP, CP and DP rank (the two
    copies of a tied embedding)."""
    return parallel_groups("embedding", tp=tp, cp=cp, pp=pp, dp=dp)


def make_group_of(groups: Sequence[Sequence[int]], rank: int, backend: str):
    """Creates every group of ``groups`` (``dist.new_group`` is collective: every rank creates
    every group, in the same order) and returns the one holding ``rank``."""
    mine = None
    for ranks in groups:
        group = dist.new_group(list(ranks), backend=backend)
        if rank in ranks:
            mine = group
    return mine


def make_dp_group(rank: int, backend: str, tp: int = 1, pp: int = 1, dp: int = 1, cp: int = 1):
    """This rank's gradient group (``dp_groups``), or None when dp x cp is 1."""
    if dp * cp == 1:
        return None
    return make_group_of(dp_groups(tp, pp, dp, cp), rank, backend)


def make_embedding_group(rank: int, backend: str, tp: int = 1, pp: int = 1, dp: int = 1, cp: int = 1):
    """This rank's embedding group (``embedding_groups``; call on every rank, a collective), or
    None when pp is 1 (one stage holds the one table) or the rank is on a middle stage."""
    if pp == 1:
        return None
    return make_group_of(embedding_groups(tp, pp, dp, cp), rank, backend)

"""A synchronous 1F1B pipeline driver that follows a kareus plan.

Each rank runs its stage's instructions in the plan's order (the plan is validated to be 1F1B),
calls ``PipelineFrequencyOptimizer``'s ``on_step_begin/end`` and ``on_instruction_begin/end``
around the step and every instruction (the GPU clock half of the plan), and hands the
instruction's partition configs to the ``StageRunner`` (the comm half). Activations go forward
and gradients backward between the same TP rank of neighbouring stages by P2P: sends are
asynchronous and joined at the end of the step, receives block. With data parallelism every
parameter gradient is averaged over the rank's DP group before the optimizer steps (each
replica trains on its own batch; the DP reduction is outside the plan's instructions, as in
the plan's model of an iteration). With context parallelism each CP rank runs its shard of the
sequence (``shard_sequence``), its loss is its tokens' share of the microbatch's, and the
gradients are summed over CP in the same reduction (Megatron's DP x CP gradient group). A
model with tied embeddings over several stages has a copy of the table on the first and last
stage: their gradients are summed over the embedding group before the step, so both copies take
the same step (Megatron's embedding group).
With sequence parallelism (the stage module's ``sequence_parallel``) every activation and gradient
between stages is the TP rank's slice of the sequence, and the norms' gradients are summed over
TP before the step. Interleaved 1F1B (a plan with --vpp > 1) is refused: this driver runs one
model chunk per rank.
``switch_plan`` changes plans between steps (new CTA counts get their groups, made on every
rank in the same order).
"""

from __future__ import annotations

from typing import List, Optional

import torch
import torch.distributed as dist

from kareus._runtime import InputError, global_rank, map_rank, one_f_one_b
from kareus.torch.comm import CommGroups
from kareus.torch.engine import StageRunner
from kareus.torch.layer import Rope, reference_stack, shard_sequence, tp_reduce_norm_grads
from kareus.torch.model import LlamaStage
from kareus.plan import ExecutionPlan


class PipelineDriver:
    """Trains one stage on one rank.

    Args:
        stage_module: this rank's ``LlamaStage``.
        plan: the validated plan, or None for the reference run (plain layers, no kareus).
        groups: this rank's process groups.
        rank, tp, pp: global rank and degrees (Megatron's order, comm.py).
        mbs, seq: microbatch size and sequence length.
        optimizer: steps the stage's parameters.
        frequency_optimizer: a kareus.PipelineFrequencyOptimizer, or None.
        runner: the StageRunner (built here if None and a plan is given).
        dp, dp_group: the data-parallel degree and this rank's gradient group (``make_dp_group``).
        cp: the context-parallel degree (the CP groups are in ``groups``).
        embedding_group: this rank's embedding group (``make_embedding_group``), needed on the
            first and last stage of a tied model with pp > 1.
    """

    def __init__(
        self,
        stage_module: LlamaStage,
        plan: Optional[ExecutionPlan],
        groups: CommGroups,
        rank: int,
        tp: int,
        pp: int,
        mbs: int,
        seq: int,
        optimizer: torch.optim.Optimizer,
        frequency_optimizer=None,
        runner: Optional[StageRunner] = None,
        device: torch.device = torch.device("cpu"),
        dp: int = 1,
        dp_group=None,
        cp: int = 1,
        embedding_group=None,
    ) -> None:
        if dp * cp > 1 and dp_group is None:
            raise InputError(f"PipelineDriver: dp {dp} x cp {cp} needs its gradient group (kareus.torch.make_dp_group)")
        if stage_module.holds_embedding_copy and embedding_group is None:
            raise InputError(f"PipelineDriver: stage {stage_module.stage} holds a copy of the tied embedding over pp "
                             f"{pp}: it needs its embedding group (kareus.torch.make_embedding_group)")
        self.module = stage_module
        self.plan = plan
        self.groups = groups
        self.rank = rank
        self.tp = tp
        self.pp = pp
        self.dp = dp
        self.dp_group = dp_group
        self.cp = cp
        self.embedding_group = embedding_group if stage_module.holds_embedding_copy else None
        where = map_rank(rank, tp=tp, cp=cp, pp=pp, dp=dp)
        self.cp_rank = where["cp_rank"]
        self.stage = stage_module.stage
        # The same TP, CP and DP rank of the neighbouring stages (activations and gradients).
        neighbour = {"tp_rank": where["tp_rank"], "cp_rank": where["cp_rank"], "dp_rank": where["dp_rank"]}
        degrees = {"tp": tp, "cp": cp, "pp": pp, "dp": dp}
        self.next_rank = global_rank(**neighbour, stage=self.stage + 1, **degrees) if self.stage + 1 < pp else None
        self.previous_rank = global_rank(**neighbour, stage=self.stage - 1, **degrees) if self.stage > 0 else None
        self.mbs = mbs
        self.seq = seq
        self.local_seq = seq // cp
        self.optimizer = optimizer
        self.pfo = frequency_optimizer
        self.runner = runner
        self.device = device
        self.hidden = stage_module.shape.hidden
        self._rope_cache: Optional[Rope] = None
        self.sequence_parallel = stage_module.sequence_parallel
        if self.sequence_parallel:
            self.local_seq //= tp
        if runner is not None and runner.sequence_parallel != self.sequence_parallel:
            raise InputError(f"PipelineDriver: the stage is {'' if self.sequence_parallel else 'not '}sequence-"
                             f"parallel, its StageRunner is {'' if runner.sequence_parallel else 'not '}(pass "
                             f"sequence_parallel to both, as --sequence-parallel says)")
        if plan is not None:
            self._check_plan(plan)
            groups.ensure(plan.distinct_ctas())

    def _check_plan(self, plan: ExecutionPlan) -> None:
        if plan.vpp > 1:
            raise InputError(f"{plan.path}: made with --vpp {plan.vpp} (interleaved 1F1B); kareus.torch's "
                             f"PipelineDriver runs one model chunk per rank (--vpp 1)")

    def switch_plan(self, plan: ExecutionPlan) -> None:
        """Follows ``plan`` from the next step on (call on every rank between the same steps)."""
        if self.plan is None:
            raise InputError("switch_plan: the reference run follows no plan")
        self._check_plan(plan)
        self.groups.ensure(plan.distinct_ctas())
        if self.pfo is not None:
            self.pfo.switch_plan(plan.path)
        self.plan = plan

    def schedule(self, microbatches: int) -> List[tuple]:
        """(type, microbatch, InstructionPlan or None) of this stage, in execution order: the
        plan's, or synchronous 1F1B for the reference run."""
        if self.plan is not None:
            return [(i.type, i.microbatch, i) for i in self.plan.stages[self.stage]]
        return [(kind, microbatch, None) for kind, microbatch in one_f_one_b(self.stage, self.pp, microbatches)]

    def train_step(self, tokens: torch.Tensor, labels: torch.Tensor) -> Optional[float]:
        """One iteration over ``tokens``/``labels`` [microbatches, mbs, seq]; returns the loss
        (mean over microbatches) on the last stage, else None."""
        microbatches = tokens.shape[0]
        if self.plan is not None and len(self.plan.stages[self.stage]) != 2 * microbatches:
            raise InputError(f"the plan runs {len(self.plan.stages[self.stage]) // 2} microbatches per step, the data "
                             f"has {microbatches}")
        self.optimizer.zero_grad(set_to_none=True)
        if self.pfo is not None:
            self.pfo.on_step_begin()
        inputs, outputs, sends = {}, {}, []
        total = 0.0
        for kind, microbatch, instruction in self.schedule(microbatches):
            if self.pfo is not None:
                self.pfo.on_instruction_begin(kind, microbatch)
            if instruction is not None:
                self.runner.set_instruction(instruction)
            if kind == "forward":
                x = self._stage_input(tokens[microbatch])
                y = self._run_layers(x, microbatch)
                inputs[microbatch] = x
                if self.module.last:
                    mine = shard_sequence(labels[microbatch], self.cp, self.cp_rank).to(self.device)
                    loss = self.module.loss(y, mine, self.mbs * self.seq, self.groups.plain) / microbatches
                    outputs[microbatch] = loss
                    total += float(loss.detach())
                else:
                    outputs[microbatch] = y
                    payload = y.detach().contiguous()
                    sends.append((payload, dist.isend(payload, self.next_rank)))
            else:
                out = outputs.pop(microbatch)
                if self.module.last:
                    out.backward()
                else:
                    grad = torch.empty(self.mbs, self.local_seq, self.hidden, device=self.device)
                    dist.recv(grad, self.next_rank)
                    out.backward(grad)
                x = inputs.pop(microbatch)
                if not self.module.first:
                    payload = x.grad.contiguous()
                    sends.append((payload, dist.isend(payload, self.previous_rank)))
            if self.pfo is not None:
                self.pfo.on_instruction_end(kind)
        for _, work in sends:
            work.wait()
        final_norm = [self.module.final_norm] if self.module.last else []
        tp_reduce_norm_grads(self.module.layers, self.groups.plain, self.tp, self.sequence_parallel, final_norm)
        self._reduce_embedding_gradient()
        self._reduce_gradients()
        self.optimizer.step()
        if self.pfo is not None:
            self.pfo.on_step_end()
        return total if self.module.last else None

    def _reduce_embedding_gradient(self) -> None:
        """Sums the tied table's gradient over its two copies (first and last stage): the
        table's gradient is the sum of the lookup's and the output layer's."""
        if self.embedding_group is None:
            return
        weight = self.module.embedding
        if weight.grad is None:
            weight.grad = torch.zeros_like(weight)
        dist.all_reduce(weight.grad, group=self.embedding_group)

    def _reduce_gradients(self) -> None:
        """Sums every gradient over the DP x CP group and divides by dp: the mean over replicas of
        the sum over a replica's sequence shards."""
        if self.dp_group is None:
            return
        for param in self.module.parameters():
            if param.grad is not None:
                dist.all_reduce(param.grad, group=self.dp_group)
                param.grad /= self.dp

    def _stage_input(self, tokens: torch.Tensor) -> torch.Tensor:
        if self.module.first:
            return self.module.embed(shard_sequence(tokens, self.cp, self.cp_rank).to(self.device), self.groups.plain)
        x = torch.empty(self.mbs, self.local_seq, self.hidden, device=self.device)
        dist.recv(x, self.previous_rank)
        return x.requires_grad_()

    def _run_layers(self, x: torch.Tensor, microbatch: int) -> torch.Tensor:
        if self.runner is not None:
            return self.runner(x, microbatch)
        return reference_stack(self.module.layers, self._rope(), x, self.groups.plain, self.tp, self.groups.plain_cp,
                               self.sequence_parallel)

    def _rope(self) -> Rope:
        if self._rope_cache is None:
            self._rope_cache = Rope(self.module.model, self.seq, self.device, torch.float32, self.cp, self.cp_rank)
        return self._rope_cache


def step_loss_everywhere(loss: Optional[float], pp: int, tp: int, device: torch.device, dp: int = 1,
                         cp: int = 1) -> float:
    """The step's loss on every rank, the mean over DP replicas: the last stage's first TP rank
    of each replica and CP rank contributes its loss / dp (CP ranks' losses add up)."""
    where = map_rank(dist.get_rank(), tp=tp, cp=cp, pp=pp, dp=dp)
    value = torch.zeros(1, dtype=torch.float64, device=device)
    if loss is not None and where["stage"] == pp - 1 and where["tp_rank"] == 0:
        value += loss / dp
    dist.all_reduce(value)
    return float(value.item())

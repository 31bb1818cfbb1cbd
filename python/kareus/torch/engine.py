"""The nanobatched executor of one pipeline stage's layers.

``StageRunner`` runs a stage's layers for one microbatch either nanobatched (the plan's
partitions, in the C++ builder's order, each enqueuing its collective just before its slot's
first op and joining it at the partition end) or plain (the unsplit reference layer with
blocking collectives), as the current instruction of the plan says. It plugs into autograd as
one function over (stage input, parameters), like the artifact's block: the forward pass builds a
small autograd graph per op (or none with full recompute), and the backward pass runs the
backward partitions op by op, recomputing the forward partitions first under full recompute.
Parameter gradients of both nanobatches are summed before they are returned.

With context parallelism the forward keeps no gathered K and V: attention's graph is rebuilt in
the backward from its saved queries and the keys and values kv_regather brings back. With
sequence parallelism (``sequence_parallel``: the stage's input and output are this TP rank's slice
of the sequence) the forward keeps no gathered input of QKV and FC1 either: their backward takes
the input qkv_input_all_gather / fc1_input_all_gather re-gathers and computes the two gradients
of the linear directly (grad @ weight, grad^T @ input), as Megatron's column-parallel backward
does, without recomputing the forward.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch

from kareus.torch.comm import CommGroups, LaunchTrace
from kareus.torch.layer import (
    COLLECTIVES,
    CP_OPS,
    OPS,
    REGATHERED,
    LayerShard,
    OpSpec,
    Rope,
    param_list,
    reference_stack,
    sequence_parallel_ops,
)
from kareus.plan import InstructionPlan, PlannedPartition

TensorKey = Tuple[str, int]  # (tensor name, stage-local layer)


class _Saved:
    """What one microbatch's forward left for its backward."""

    def __init__(self) -> None:
        self.stage_input: Optional[torch.Tensor] = None
        # Nanobatched, no recompute: per nanobatch, (op, layer) -> (input leaves, outputs).
        self.op_graphs: Optional[List[Dict[TensorKey, tuple]]] = None
        # Plain, no recompute: (input leaf, output) of the reference graph.
        self.plain_graph: Optional[Tuple[torch.Tensor, torch.Tensor]] = None


class StageRunner:
    """Runs ``layers`` (this stage's, stage-local order) under a plan's current instruction.

    ``sequence_parallel``: the plan's workload is sequence-parallel (its partitions carry the
    all-gathers and reduce-scatters); the ops run under ``sequence_parallel_ops``' tensor names and
    the stage's input and output are this TP rank's slice of the sequence. ``batch_dim`` is the
    activations' batch dimension (0: [batch, seq, ...]; 1: Megatron's [seq, batch, ...]); the
    sequence dimension is the other one of the two.
    """

    def __init__(
        self,
        layers: Sequence[LayerShard],
        rope: Rope,
        groups: CommGroups,
        tp: int,
        recompute: bool,
        trace: Optional[LaunchTrace] = None,
        ops: Optional[Dict[str, OpSpec]] = None,
        plain: Optional[Callable[[torch.Tensor], torch.Tensor]] = None,
        batch_dim: int = 0,
        sequence_parallel: bool = False,
    ) -> None:
        self.layers = list(layers)
        self.rope = rope
        self.groups = groups
        self.tp = tp
        self.recompute = recompute
        self.trace = trace if trace is not None else LaunchTrace(enabled=False)
        # Another model's layers (kareus.megatron's) bring their own ops under the op graph's
        # names, their own plain stack and their own batch dimension.
        self.ops = ops if ops is not None else (CP_OPS if rope is not None and rope.cp > 1 else OPS)
        self.sequence_parallel = sequence_parallel
        if sequence_parallel:
            self.ops = sequence_parallel_ops(self.ops)
        # The forward op that produces each tensor a "regather" collective gathers again.
        self._producers = {name: (op, index) for op, spec in self.ops.items()
                           for index, (name, offset) in enumerate(spec.outputs) if offset == 0}
        self._plain_stack = plain
        self.batch_dim = batch_dim
        self.sequence_dim = 1 - batch_dim
        self.instruction: Optional[InstructionPlan] = None
        self._saved: Dict[int, _Saved] = {}
        self.params: List[torch.nn.Parameter] = [p for layer in self.layers for p in layer.parameters()]
        self._param_index = {id(p): index for index, p in enumerate(self.params)}

    def set_instruction(self, instruction: InstructionPlan) -> None:
        self.instruction = instruction

    # -- autograd entry ------------------------------------------------------------------------
    def __call__(self, x: torch.Tensor, microbatch: int) -> torch.Tensor:
        return _StageFunction.apply(self, microbatch, x, *self.params)

    def forward(self, microbatch: int, x: torch.Tensor) -> torch.Tensor:
        instruction = self._current("forward")
        saved = _Saved()
        saved.stage_input = x.detach()
        self._saved[microbatch] = saved
        if not instruction.nanobatched:
            if self.recompute:
                with torch.no_grad():
                    return self._plain(x.detach())
            leaf = x.detach().requires_grad_()
            with torch.enable_grad():
                out = self._plain(leaf)
            saved.plain_graph = (leaf, out)
            return out.detach()
        self._mark("forward", instruction)
        states = self._split(x.detach())
        if self.recompute:
            with torch.no_grad():
                self._forward_pass(instruction.passes[0], states, None)
        else:
            saved.op_graphs = [{}, {}]
            self._forward_pass(instruction.passes[0], states, saved.op_graphs)
        last = len(self.layers)
        return torch.cat([states[0][("h", last)], states[1][("h", last)]], dim=self.batch_dim)

    def backward(self, microbatch: int, grad: torch.Tensor) -> Tuple[torch.Tensor, List[torch.Tensor]]:
        instruction = self._current("backward")
        saved = self._saved.pop(microbatch)
        if not instruction.nanobatched:
            if saved.plain_graph is None:
                leaf = saved.stage_input.requires_grad_()
                with torch.enable_grad():
                    out = self._plain(leaf)
            else:
                leaf, out = saved.plain_graph
            grads = torch.autograd.grad(out, [leaf] + self.params, grad, allow_unused=True)
            return grads[0], [g if g is not None else torch.zeros_like(p) for g, p in zip(grads[1:], self.params)]
        graphs = saved.op_graphs
        backward_pass = instruction.passes[-1]
        if graphs is None:
            # Full recompute (or a plain forward): rerun the forward partitions with this
            # instruction's recompute configs, keeping each op's graph.
            self._mark("recompute", instruction)
            graphs = [{}, {}]
            self._forward_pass(instruction.recompute_pass, self._split(saved.stage_input), graphs)
        self._mark("backward", instruction)
        last = len(self.layers)
        grads = self._split_grads(grad, last)
        param_grads: List[Optional[torch.Tensor]] = [None] * len(self.params)
        self._backward_pass(backward_pass, grads, graphs, param_grads)
        grad_input = torch.cat([grads[0].pop(("h", 0)), grads[1].pop(("h", 0))], dim=self.batch_dim)
        return grad_input, [g if g is not None else torch.zeros_like(p) for g, p in zip(param_grads, self.params)]

    # -- partitions ----------------------------------------------------------------------------
    def _forward_pass(self, partitions: Sequence[PlannedPartition], states, graphs) -> None:
        def run_op(op, layer, nanobatch):
            self._run_op(op, layer, states[nanobatch], graphs[nanobatch] if graphs is not None else None)

        self._run_partitions(partitions, states, run_op, graphs)

    def _backward_pass(self, partitions: Sequence[PlannedPartition], grads, graphs, param_grads) -> None:
        def run_op(op, layer, nanobatch):
            self._run_op_backward(op, layer, grads[nanobatch], graphs[nanobatch], param_grads)

        self._run_partitions(partitions, grads, run_op, graphs)

    def _run_partitions(self, partitions: Sequence[PlannedPartition], tensors, run_op, graphs) -> None:
        """Runs each partition's ops in order with run_op(op, layer, nanobatch), launching its
        collective on `tensors` (kv_regather: on the forward's `graphs`) before the op at its
        launch index (or after the last op) and waiting for it at the partition's end."""
        events = self.trace.events if self.trace.enabled else None
        for partition in partitions:
            collective = partition.collective
            work = None
            launch_at = partition.launch_index
            nanobatch = partition.nanobatch
            for index, (op, layer) in enumerate(partition.ops):
                if index == launch_at:
                    work = self._launch(partition, tensors, graphs, events)
                run_op(op, layer, nanobatch)
                if events is not None:
                    events.append(("op", op, layer, nanobatch))
            if collective is not None:
                if work is None:
                    work = self._launch(partition, tensors, graphs, events)
                self.groups.wait(work)
                if events is not None:
                    events.append(("wait", partition.key, collective[0], collective[2], collective[1]))

    def _launch(self, partition: PlannedPartition, tensors, graphs, events):
        name, nanobatch, layer = partition.collective
        spec = COLLECTIVES[name]
        choice = partition.choice
        if events is not None:
            events.append(("enqueue", partition.key, name, layer, nanobatch, choice.slot, choice.ctas))
        state = tensors[nanobatch]
        source, target = (spec.source, layer), (spec.target, layer)
        dim = self.sequence_dim + (1 if spec.stacked else 0)
        if spec.kind == "all_reduce":
            return self.groups.launch(state[source], choice.ctas, spec.group)
        if spec.kind == "regather":
            # The backward's copy of every rank's slice, from this nanobatch's forward output; the
            # op that reads it takes it from the graphs (_run_op_backward).
            op, index = self._producers[spec.source]
            _, outputs = graphs[nanobatch][(op, layer)]
            pending = self.groups.all_gather(outputs[index].detach(), choice.ctas, dim, spec.group)
            return _Store(pending, graphs[nanobatch], target)
        if spec.kind == "all_gather":
            return _Store(self.groups.all_gather(state[source], choice.ctas, dim, spec.group), state, target)
        pending = self.groups.reduce_scatter(state.pop(source), choice.ctas, dim, spec.group)
        return _Store(pending, state, target)

    # -- ops -----------------------------------------------------------------------------------
    def _run_op(self, op: str, layer_index: int, state: Dict[TensorKey, torch.Tensor], graph) -> None:
        spec = self.ops[op]
        layer = self.layers[layer_index]
        inputs = [state[(name, layer_index)] for name in spec.inputs]
        if graph is None:
            outputs = spec.fn(layer, self.rope, *inputs)
        elif any(name in REGATHERED for name in spec.inputs):
            # Keep no graph over a gathered input (attention's K and V under CP, QKV's and FC1's
            # input under SP): the backward takes it re-gathered (None marks its place).
            outputs = spec.fn(layer, self.rope, *inputs)
            graph[(op, layer_index)] = ([None if name in REGATHERED else t.detach().requires_grad_()
                                         for name, t in zip(spec.inputs, inputs)], None)
        else:
            leaves = [t.detach().requires_grad_() for t in inputs]
            with torch.enable_grad():
                outputs = spec.fn(layer, self.rope, *leaves)
            graph[(op, layer_index)] = (leaves, outputs)
            outputs = [t.detach() for t in outputs]
        for (name, offset), tensor in zip(spec.outputs, outputs):
            state[(name, layer_index + offset)] = tensor

    def _run_op_backward(self, op: str, layer_index: int, grads, graph, param_grads) -> None:
        base = op[: -len("_bwd")]
        spec = self.ops[base]
        leaves, outputs = graph.pop((base, layer_index))
        grad_outputs = [grads.pop((name, layer_index + offset)) for name, offset in spec.outputs]
        params = param_list(self.layers[layer_index], spec.params)
        if outputs is None:  # an input comes re-gathered (kv_regather, qkv/fc1_input_all_gather)
            leaves = [leaf if leaf is not None else graph.pop((name, layer_index))
                      for name, leaf in zip(spec.inputs, leaves)]
        if outputs is None and spec.linear:
            (x,), (weight,), (grad,) = leaves, params, grad_outputs
            results = [grad.matmul(weight),
                       grad.reshape(-1, grad.shape[-1]).t().matmul(x.reshape(-1, x.shape[-1]))]
        else:
            if outputs is None:
                leaves = [leaf.requires_grad_() for leaf in leaves]
                with torch.enable_grad():
                    outputs = spec.fn(self.layers[layer_index], self.rope, *leaves)
            results = torch.autograd.grad(outputs, leaves + params, grad_outputs)
        for name, value in zip(spec.inputs, results[: len(leaves)]):
            key = (name, layer_index)
            previous = grads.get(key)
            grads[key] = value if previous is None else previous + value
        for param, value in zip(params, results[len(leaves) :]):
            index = self._param_index[id(param)]
            previous = param_grads[index]
            param_grads[index] = value if previous is None else previous + value

    # -- helpers -------------------------------------------------------------------------------
    def _plain(self, x: torch.Tensor) -> torch.Tensor:
        if self._plain_stack is not None:
            return self._plain_stack(x)
        return reference_stack(self.layers, self.rope, x, self.groups.plain, self.tp, self.groups.plain_cp,
                               self.sequence_parallel)

    def _split(self, x: torch.Tensor) -> List[Dict[TensorKey, torch.Tensor]]:
        first, second = x.chunk(2, dim=self.batch_dim)
        return [{("h", 0): first}, {("h", 0): second}]

    def _split_grads(self, grad: torch.Tensor, last: int) -> List[Dict[TensorKey, torch.Tensor]]:
        first, second = grad.chunk(2, dim=self.batch_dim)
        return [{("h", last): first.contiguous()}, {("h", last): second.contiguous()}]

    def _current(self, kind: str) -> InstructionPlan:
        instruction = self.instruction
        if instruction is None or instruction.type != kind:
            raise RuntimeError(f"kareus.torch: a {kind} ran outside a planned {kind} instruction")
        return instruction

    def _mark(self, direction: str, instruction: InstructionPlan) -> None:
        if self.trace.enabled:
            self.trace.events.append(("pass", instruction.type, instruction.microbatch, direction))


class _Store:
    """A gather or scatter in flight: ``wait()`` joins it and stores its result under ``key`` of
    ``tensors`` (adding to a gradient already there)."""

    def __init__(self, pending, tensors: Dict[TensorKey, torch.Tensor], key: TensorKey) -> None:
        self.pending, self.tensors, self.key = pending, tensors, key

    def wait(self) -> None:
        value = self.pending.wait()
        previous = self.tensors.get(self.key)
        self.tensors[self.key] = value if previous is None else previous + value


class _StageFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, runner: StageRunner, microbatch: int, x: torch.Tensor, *params):
        ctx.runner = runner
        ctx.microbatch = microbatch
        return runner.forward(microbatch, x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        grad_input, param_grads = ctx.runner.backward(ctx.microbatch, grad.contiguous())
        return (None, None, grad_input, *param_grads)

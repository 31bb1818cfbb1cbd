"""kareus.torch: execute the comm half of a kareus plan inside a PyTorch training step.

A kareus plan chooses, per pipeline instruction, a GPU clock (applied by
``kareus.PipelineFrequencyOptimizer``) and, per partition of the nanobatched layers, the CTA
count and launch slot of the collective that overlaps the compute. This package runs the second
half: ``ExecutionPlan`` checks a plan against the C++ partition builder's partitions,
``StageRunner`` executes a tensor-parallel Llama stage partition by partition with each
collective launched at its planned slot on a process group of its planned CTA count, and
``PipelineDriver`` runs synchronous 1F1B over pipeline stages around them. Needs torch.
"""

from kareus._runtime import SLOT_NONE, CommConfig
from kareus.torch.comm import (
    CommGroups,
    LaunchTrace,
    cp_groups,
    describe_groups,
    dp_groups,
    embedding_groups,
    group_index,
    make_dp_group,
    make_embedding_group,
    make_group_of,
    tp_groups,
)
from kareus.torch.engine import StageRunner
from kareus.torch.layer import (
    LayerShape,
    LayerShard,
    Rope,
    check_supported,
    reference_layer,
    reference_stack,
    rope_frequencies,
    shard_sequence,
    tp_reduce_norm_grads,
)
from kareus.torch.model import LlamaStage, synthetic_batch
from kareus.torch.pipeline import PipelineDriver, step_loss_everywhere
from kareus.plan import ExecutionPlan, InstructionPlan, PlannedPartition
from kareus.torch.trace import check_trace

__all__ = [
    "SLOT_NONE",
    "CommConfig",
    "CommGroups",
    "ExecutionPlan",
    "InstructionPlan",
    "LaunchTrace",
    "LayerShape",
    "LayerShard",
    "LlamaStage",
    "PipelineDriver",
    "PlannedPartition",
    "Rope",
    "StageRunner",
    "check_supported",
    "check_trace",
    "cp_groups",
    "describe_groups",
    "dp_groups",
    "embedding_groups",
    "group_index",
    "make_dp_group",
    "make_embedding_group",
    "make_group_of",
    "reference_layer",
    "reference_stack",
    "rope_frequencies",
    "shard_sequence",
    "step_loss_everywhere",
    "synthetic_batch",
    "tp_groups",
    "tp_reduce_norm_grads",
]

"""kareus.megatron: a Megatron-Core GPT training job follows a kareus plan, without patching Megatron.

The clock half (``InstructionTimers``/``InstructionHook``, schedule.py) stands in for
``config.timers`` and applies the plan's clock per pipeline instruction through
``kareus.PipelineFrequencyOptimizer``; the comm half (``KareusTransformerBlock``, block.py) runs
each layer's forward and backward as the plan's nanobatched partitions over the parameters of
Megatron's own modules, through kareus.torch's partition engine. ``workload(config, ...)`` gives
the kareus workload (and the model .json for ``kareus plan --model``) of a job, and
``MegatronJob`` ties the three together on one rank. See docs/megatron.md. Needs torch and, for
the comm half, megatron-core (tested with 0.16.1).
"""

from kareus.megatron.job import MegatronJob
from kareus.megatron.schedule import InstructionHook, InstructionTimers, StepOrder, refuse_unsupported_schedule
from kareus.megatron.workload import MegatronWorkload, gpt_model_rope_args, workload

__all__ = [
    "InstructionHook",
    "InstructionTimers",
    "MegatronJob",
    "MegatronWorkload",
    "gpt_model_rope_args",
    "StepOrder",
    "refuse_unsupported_schedule",
    "workload",
]

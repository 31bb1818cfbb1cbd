"""Runs Megatron-Core on CPU (gloo) for the example's --cpu path and the tests; not for training.

Megatron-Core 0.16 calls CUDA in a few places even when the model is built on CPU
(``use_cpu_initialization=True``, local spec): ``torch.cuda.current_device()`` as the device of
the global memory buffer, the P2P shape exchange and RoPE's frequencies; ``device="cuda"``
tensors in the pipeline schedules and in the attention's default causal mask;
``torch.cuda.synchronize()`` around P2P; the CUDA RNG tracker that attention dropout forks and
the CUDA RNG state that activation checkpointing saves and restores. ``install()`` maps each of these to the CPU: a
TorchFunctionMode rewrites CUDA devices of tensor factories and ``.to``/``.cuda`` to CPU,
``current_device`` answers the CPU, ``synchronize`` does nothing and the
RNG tracker's ``fork`` and the CUDA RNG state's save and restore do nothing (the layers run
without dropout); the causal mask, which
recompute also builds inside autograd's backward (where the mode is not active), is made on
the CPU. Sequence parallelism needs apex's or TransformerEngine's norms (the local spec's
``WrappedTorchNorm`` refuses it); here the torch norm is built anyway and its parameters marked
``sequence_parallel`` as apex and TransformerEngine mark theirs, so that the finalize step sums
their gradients over TP (a norm is per token: on a slice of the sequence it computes what it
computes on the whole). Nothing here is part of the kareus package.
"""

from __future__ import annotations

import contextlib

import torch
from torch.overrides import TorchFunctionMode


def _cpu_device(device):
    if isinstance(device, bool):
        return device
    if isinstance(device, int):
        return torch.device("cpu")
    if isinstance(device, (str, torch.device)):
        try:
            parsed = torch.device(device)
        except (RuntimeError, TypeError):
            return device
        return torch.device("cpu") if parsed.type == "cuda" else device
    return device


class _CpuDevices(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if "device" in kwargs:
            kwargs["device"] = _cpu_device(kwargs["device"])
        if func is torch.Tensor.cuda:
            return args[0]
        if func is torch.Tensor.to:
            args = (args[0],) + tuple(_cpu_device(a) for a in args[1:])
        return func(*args, **kwargs)


_installed = []


def allow_sequence_parallel_norms() -> None:
    """WrappedTorchNorm under sequence_parallel=True: the torch norm, its parameters marked."""
    import copy

    from megatron.core.transformer import torch_norm

    build = torch_norm.WrappedTorchNorm.__new__

    def new(cls, config, hidden_size, *args, **kwargs):
        plain = config
        if config.sequence_parallel:
            plain = copy.copy(config)  # the same settings, without re-running the config's checks
            plain.sequence_parallel = False
        norm = build(cls, plain, hidden_size, *args, **kwargs)
        for param in norm.parameters():
            param.sequence_parallel = config.sequence_parallel
        return norm

    torch_norm.WrappedTorchNorm.__new__ = new


def install() -> None:
    """Maps Megatron-Core's CUDA calls to the CPU for the rest of this process (idempotent)."""
    if _installed:
        return
    from megatron.core.tensor_parallel import random as megatron_random

    # The CPU itself, not index 0: with sequence parallelism Megatron's autograd functions also
    # allocate with device=current_device() in their backward, where the mode below is not active.
    torch.cuda.current_device = lambda: torch.device("cpu")
    torch.cuda.synchronize = lambda *args, **kwargs: None

    @contextlib.contextmanager
    def fork(self, name=None):
        yield

    megatron_random.CudaRNGStatesTracker.fork = fork
    # Megatron's activation checkpointing saves and restores the CUDA RNG state.
    megatron_random._get_cuda_rng_state = lambda *args, **kwargs: torch.get_rng_state()
    megatron_random._set_cuda_rng_state = lambda *args, **kwargs: None
    # The attention's default causal mask is built with device="cuda" and, with recompute, from
    # inside autograd's backward, where the mode below is not active: build it on the CPU.
    from megatron.core.fusions import fused_softmax

    def causal_mask(sq: int) -> torch.Tensor:
        return torch.triu(torch.ones(sq, sq, dtype=torch.bool), diagonal=1)

    fused_softmax.get_default_causal_mask = causal_mask
    allow_sequence_parallel_norms()
    mode = _CpuDevices()
    mode.__enter__()
    _installed.append(mode)

"""Megatron's DistributedDataParallel with overlap_grad_reduce, under kareus: the stock losses.

Four gloo ranks (TP 2 x DP 2, one stage, full recompute). The tiny GPTModel inside Megatron's
``DistributedDataParallel`` (``overlap_grad_reduce=True``, small buckets so that several reduce
during the backward; the non-distributed optimizer: Megatron-Core's distributed optimizer and its
``overlap_param_gather`` take CUDA tensors only) trains 3 steps with Megatron's Adam under
Megatron's schedule, with Megatron's ``finalize_model_grads``, once stock and once following a
plan (every searchable key at its first slot). Each replica reads its own batches, so the losses
agree only if every gradient was reduced over DP: they must within 1e-5 relative, and every
step's launch trace must be the plan's.
"""

from __future__ import annotations

import mhelpers
from mhelpers import helpers

SEQ, MBS, MICROBATCHES, STEPS = 16, 2, 2, 3


def _worker(rank, world, port, out_dir):
    import torch
    import torch.distributed as dist
    from megatron.core import parallel_state
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig, finalize_model_grads
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
    from megatron.core.pipeline_parallel.schedules import get_forward_backward_func

    import kareus.megatron as km
    from kareus.torch import synthetic_batch

    mhelpers.init_megatron(rank, world, port, tp=2)
    recompute = dict(recompute_granularity="full", recompute_method="uniform", recompute_num_layers=1)

    def run(plan_dir):
        config = mhelpers.tiny_config(tp=2, **recompute)
        torch.manual_seed(1)
        gpt = GPTModel(config=config, transformer_layer_spec=get_gpt_layer_local_spec(normalization="RMSNorm"),
                       vocab_size=256, max_sequence_length=SEQ, position_embedding_type="rope")
        model = DistributedDataParallel(config, DistributedDataParallelConfig(overlap_grad_reduce=True,
                                                                              bucket_size=4096), gpt)
        optimizer = get_megatron_optimizer(OptimizerConfig(optimizer="adam", lr=1e-3, clip_grad=0.0), [model])
        config.no_sync_func, config.grad_sync_func = model.no_sync, model.start_grad_sync
        config.finalize_model_grads_func = finalize_model_grads
        schedule, job, traces = get_forward_backward_func(), None, []
        if plan_dir is not None:
            workload = km.workload(config, vocab_size=256, seq_length=SEQ, micro_batch_size=MBS,
                                   num_microbatches=MICROBATCHES, data_parallel_size=2, name="tiny-llama")
            plan = mhelpers.write_job_plan(f"{plan_dir}/plan_{rank}.json", workload)
            job = km.MegatronJob(plan, config, workload, rank=rank, trace=True)
            job.attach(model)  # through DDP's .module
            schedule = job.forward_backward(schedule)

        forward_step = mhelpers.gpt_forward_step(SEQ)
        losses = []
        for step in range(STEPS):
            tokens, labels = synthetic_batch(256, MICROBATCHES, MBS, SEQ, 2 * step + parallel_state.get_data_parallel_rank(), 1)
            model.zero_grad_buffer()
            optimizer.zero_grad()
            stored = schedule(forward_step_func=forward_step, data_iterator=iter(list(zip(tokens, labels))),
                              model=[model], num_microbatches=MICROBATCHES, seq_length=SEQ, micro_batch_size=MBS,
                              forward_only=False)
            optimizer.step()
            if job is not None:
                traces.append(job.check_trace())
            mean = torch.tensor([sum(float(e["loss"]) for e in stored) / MICROBATCHES / 2], dtype=torch.float64)
            dist.all_reduce(mean, group=parallel_state.get_data_parallel_group())
            losses.append(float(mean))
        if job is not None:
            job.close()
        return losses, traces

    stock, _ = run(None)
    kareus, traces = run(out_dir)
    helpers.finish_worker(rank, out_dir, {"stock": stock, "kareus": kareus, "traces": traces})


def test_ddp_with_overlapped_grad_reduce_trains_as_stock_under_kareus(tmp_path):
    results = mhelpers.run_megatron_workers(_worker, 4, tmp_path)
    stock, kareus = results["stock"], results["kareus"]
    assert len(stock) == 3 and stock[-1] < stock[0]
    for a, b in zip(kareus, stock):
        assert abs(a - b) / b < 1e-5, (kareus, stock)
    assert all(ok for ok, _ in results["traces"]), results["traces"]

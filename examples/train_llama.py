#!/usr/bin/env python3
"""Train a small Llama-shaped model following a kareus plan, with kareus.torch.

    torchrun --standalone --nproc-per-node 4 examples/train_llama.py --model examples/tiny-llama.json \
        --tp 2 --pp 2 --microbatches 4 --mbs 2 --seq 256 --steps 20 --plan PLAN --check --json OUT.json

Random init and synthetic tokens from --seed (each data-parallel replica its own batches, the
gradients averaged over --dp replicas; with --cp each context-parallel rank runs its shard of the
sequence). Each rank runs its stage under synchronous 1F1B;
the layers run nanobatched, partition by partition, each collective launched at its planned
slot through the process group of its planned CTA count (NCCL on GPUs; gloo on CPU, where the
same code records the launch order). --check also trains the same model without kareus (no
nanobatching, plain collectives) from the same seed and compares the loss curves and the
recorded launch trace with the plan, and checks the DP replicas hold the same weights. Exits 2
for bad input (every rank, before any collective), 1 when --check fails.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from training_support import add_training_flags, report  # beside this file


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_training_flags(parser, seq=256, steps=20)
    parser.add_argument("--plan", required=True, help="kareus.plan/1 file made by `kareus plan` for this workload")
    parser.add_argument("--switch-plan", default="", help="a second plan to switch to at --switch-at")
    parser.add_argument("--switch-at", type=int, default=0, help="step at which --switch-plan takes over")
    parser.add_argument("--sequence-parallel", action="store_true",
                        help="Megatron's sequence parallelism (the plan must be made with it too)")
    parser.add_argument("--vpp", type=int, default=1, help="virtual pipeline stages: only 1 (refused otherwise)")
    return parser.parse_args(argv)


def main(argv) -> int:
    args = parse_args(argv)
    import torch
    import torch.distributed as dist

    import kareus
    from kareus import _runtime
    from kareus import torch as kt

    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    # Everything a user can get wrong is checked here, on every rank, before any collective.
    try:
        ranks = args.tp * args.cp * args.pp * args.dp
        if world != ranks:
            raise kareus.InputError(f"--tp {args.tp} x --cp {args.cp} x --pp {args.pp} x --dp {args.dp} = {ranks} "
                                    f"ranks, but torchrun started {world}")
        if args.vpp != 1:
            raise kareus.InputError(f"--vpp {args.vpp}: kareus.torch's driver runs non-interleaved 1F1B only "
                                    f"(one model chunk per rank); interleaving runs under kareus.megatron")
        layers = [int(v) for v in args.layers_per_stage.split(",")] if args.layers_per_stage else []
        workload = _runtime.Workload(args.model, tp=args.tp, cp=args.cp, pp=args.pp, dp=args.dp, mbs=args.mbs,
                                     seq=args.seq,
                                     microbatches=args.microbatches, nanobatches=2, recompute=args.recompute,
                                     layers_per_stage=layers, sequence_parallel=args.sequence_parallel)
        reason = kt.check_supported(workload.model, args.cp, args.seq, args.tp)
        if reason:
            raise kareus.InputError(reason)
        gpu = _runtime.load_gpu(args.gpu)
        sm_count = torch.cuda.get_device_properties(device).multi_processor_count if cuda else gpu["sm_count"]
        plans = [kt.ExecutionPlan(path, workload, sm_count, gpu["default_comm_ctas"], gpu["name"])
                 for path in [args.plan] + ([args.switch_plan] if args.switch_plan else [])]
        pfo = kareus.PipelineFrequencyOptimizer(args.plan, rank=rank, tp=args.tp, cp=args.cp, pp=args.pp, dp=args.dp,
                                                device_id=local_rank,
                                                clock_backend=args.clock_backend, install_signal_handlers=False)
    except ValueError as error:  # kareus.InputError is a ValueError
        print(f"error: rank {rank}: {error}", file=sys.stderr)
        return 2

    torch.manual_seed(args.seed)
    if cuda:
        torch.cuda.set_device(device)
    backend = "nccl" if cuda else "gloo"
    dist.init_process_group(backend, rank=rank, world_size=world)
    where = _runtime.map_rank(rank, tp=args.tp, cp=args.cp, pp=args.pp, dp=args.dp)
    stage, tp_rank, cp_rank, dp_rank = where["stage"], where["tp_rank"], where["cp_rank"], where["dp_rank"]
    groups = kt.CommGroups(kt.tp_groups(args.tp, args.pp, args.dp, args.cp), rank, backend,
                           kt.cp_groups(args.tp, args.pp, args.dp, args.cp))
    dp_group = kt.make_dp_group(rank, backend, tp=args.tp, pp=args.pp, dp=args.dp, cp=args.cp)
    # The first and last stage's copies of a tied embedding (every rank creates every group).
    embedding_group = kt.make_embedding_group(rank, backend, tp=args.tp, pp=args.pp, dp=args.dp, cp=args.cp)
    # Every CTA count of every plan this run may follow, ascending, the same on every rank.
    groups.ensure(sorted(set().union(*(plan.distinct_ctas() for plan in plans))))
    model = workload.model
    recompute = args.recompute == "full"
    stage_layers = list(workload.stage_layers)

    def build():
        return kt.LlamaStage(model, stage_layers, stage, args.tp, tp_rank, args.seed,
                             args.sequence_parallel).to(device)

    def batches(step):
        return kt.synthetic_batch(model["vocab"], args.microbatches, args.mbs, args.seq, step * args.dp + dp_rank,
                                  args.seed)

    def step_loss(loss):
        return kt.step_loss_everywhere(loss, args.pp, args.tp, device, args.dp, args.cp)

    # The kareus run.
    module = build()
    trace = kt.LaunchTrace(enabled=args.check)
    rope = kt.Rope(model, args.seq, device, torch.float32, args.cp, cp_rank)
    runner = kt.StageRunner(module.layers, rope, groups, args.tp, recompute, trace,
                            sequence_parallel=args.sequence_parallel)
    driver = kt.PipelineDriver(module, plans[0], groups, rank, args.tp, args.pp, args.mbs, args.seq,
                               torch.optim.SGD(module.parameters(), lr=args.lr), pfo, runner, device, args.dp, dp_group,
                               args.cp, embedding_group)
    losses, trace_ok, problems = [], True, []
    start = time.perf_counter()
    for step in range(args.steps):
        if args.switch_plan and step == args.switch_at:
            driver.switch_plan(plans[1])
        tokens, labels = batches(step)
        loss = driver.train_step(tokens, labels)
        losses.append(step_loss(loss))
        if args.check:
            ok, found = kt.check_trace(trace.events, driver.plan, stage, recompute)
            trace_ok &= ok
            problems += [f"step {step}: {p}" for p in found]
            trace.clear()
    kareus_time_s = time.perf_counter() - start
    pfo.flush()
    clocks_mhz = [sample.requested_mhz for sample in pfo.timeline()]
    pfo.close()

    result = {"steps": args.steps, "loss": losses, "comm_groups": kt.describe_groups(groups),
              "kareus_time_s": kareus_time_s, "backend": backend, "rank0_clocks_mhz": clocks_mhz}
    status = 0
    if args.check:
        reference = build()
        reference_driver = kt.PipelineDriver(reference, None, groups, rank, args.tp, args.pp, args.mbs, args.seq,
                                             torch.optim.SGD(reference.parameters(), lr=args.lr), None, None, device,
                                             args.dp, dp_group, args.cp, embedding_group)
        reference_losses = []
        for step in range(args.steps):
            tokens, labels = batches(step)
            loss = reference_driver.train_step(tokens, labels)
            reference_losses.append(step_loss(loss))
        flag = torch.tensor([1 if trace_ok else 0], device=device)
        dist.all_reduce(flag, op=dist.ReduceOp.MIN)
        trace_ok = bool(flag.item())
        max_rel = max(abs(a - b) / abs(b) for a, b in zip(losses, reference_losses))
        # The DP replicas and CP ranks of a (stage, TP rank) must hold the same weights: the
        # largest difference of any weight from their mean, over all ranks.
        spread = torch.zeros(1, dtype=torch.float64, device=device)
        if dp_group is not None:
            for param in module.parameters():
                mean = param.detach().clone()
                dist.all_reduce(mean, group=dp_group)
                mean /= args.dp * args.cp
                spread = torch.maximum(spread, (param.detach() - mean).abs().max().double().reshape(1))
        dist.all_reduce(spread, op=dist.ReduceOp.MAX)
        result.update({"reference_loss": reference_losses, "max_rel_loss_diff": max_rel,
                       "trace_matches_plan": trace_ok, "trace_problems": problems[:5],
                       "dp_replica_max_diff": float(spread.item())})
        if max_rel > 1e-4 or not trace_ok or not losses[-1] < losses[0] or spread.item() > 1e-6:
            status = 1
    report(rank, args, result, ("max_rel_loss_diff", "trace_matches_plan", "dp_replica_max_diff"), problems)
    dist.destroy_process_group()
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

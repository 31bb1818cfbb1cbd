# kareus models / gpus / partitions: listings, the partition table and the workload flags' errors.
# shellcheck shell=bash

# models: every preset with its shape and parameter count.
expect 0 'llama3.2-3b +3072 +24 +8 +128 +8192 +28 +128256' -- models
expect 0 'qwen3-1.7b +2048 +16 +8 +128 +6144 +28 +151936 +1\.72B' -- models
expect 0 '"name": "llama3.3-70b"' -- models --json
expect 0 '"kv_groups": 96' -- models --json
# ... with each model's published numerics (qwen3's base and epsilon, llama3.3's scaling factor).
expect 0 '"rotary_base": 1000000\.0' -- models --json
expect 0 '"norm_eps": 1e-06' -- models --json
expect 0 '"factor": 8\.0' -- models --json

# gpus: peak at the max clock derived from FLOP/clock/SM (A100: 311.9 TFLOP/s).
expect 0 'a100-40gb +108 +210\.\.1410/15 +311\.9 +1555 +300 +400 +85' -- gpus
expect 0 'h200 +132 +345\.\.1980/15' -- gpus
expect 0 '"bf16_peak_tflops": 311\.8' -- gpus --json
expect 0 '"static_power_w": 85' -- gpus --json

# partitions: one layer in execution order, payloads and space sizes (docs/kareus.md sections 2-3).
expect 0 'fwd_attn +0 +tp all_reduce 96\.0 MiB +norm_0 linear_0 rope_0 attn_0 linear_1 +900 ' -- partitions
expect 0 'bwd_attn +1 +tp all_reduce 96\.0 MiB' -- partitions
expect 0 'fwd_attn +1 +tp all_reduce 96\.0 MiB +norm_0 linear_0 rope_0 attn_0 +720 ' -- partitions --slots artifact --clocks artifact
expect 0 'fwd_mlp +0 +tp all_reduce 96\.0 MiB +norm_0 linear_0 activation_0 +540 ' -- partitions --slots artifact
expect 0 'fwd_qkv_ag +1 +cp all_gather 16\.0 MiB +norm_0 linear_0 rope_0 +1080 ' -- partitions --cp 2 --tp 4 --slots artifact
expect 0 'fwd_ao_ar +1 +tp all_reduce 48\.0 MiB +attn_0 +180 ' -- partitions --cp 2 --tp 4 --slots artifact
expect 0 'bwd_a_rs +1 +cp reduce_scatter 16\.0 MiB' -- partitions --cp 2 --tp 4
expect 0 'fwd_mlp +0 .* 525 ' -- partitions --clocks 900:1410:15 --tp-ctas 6:30:6 --slots artifact
expect 0 '"bytes": 100663296' -- partitions --json
expect 0 '"space_size": 1080' -- partitions --cp 2 --tp 4 --slots artifact --json
expect 0 '"key": "fwd_attn_mlp"' -- partitions --tp 1 --cp 2 --json
expect 0 'no collectives' -- partitions --tp 1 --cp 1

# Every bad flag exits 2 and names itself.
expect 2 'error: --tp 16 must divide the 24 attention heads of llama3.2-3b' -- partitions --tp 16
expect 2 'error: --tp 3 must divide the 8 key/value groups' -- partitions --tp 3
expect 2 'error: --tp 0 must be >= 1' -- partitions --tp 0
expect 2 'error: --cp 3 needs --seq divisible by 2 x cp = 6' -- partitions --cp 3
expect 2 'error: --mbs 7 must split evenly into 2 nanobatches' -- partitions --mbs 7
# --mbs 1: token nanobatches, each half of the sequence: the all-reduce of 1024 tokens (4096 / CP 2 / 2) x 3072 x 2 bytes.
expect 0 '"bytes": 6291456' -- partitions --mbs 1 --cp 2 --tp 4 --json
expect 2 'error: --mbs 1 with --nanobatches 2 splits each sequence into two token nanobatches: --seq 4100 / --cp 1 must be divisible by 8' -- partitions --mbs 1 --tp 4 --sequence-parallel --seq 4100
expect 2 'error: --nanobatches 3 must be 1' -- partitions --nanobatches 3
expect 2 'error: --nanobatches 1: the partitioned overlap model needs 2' -- partitions --nanobatches 1
expect 2 'error: --pp 29 must not exceed the 28 layers' -- partitions --pp 29
expect 2 'error: --layers-per-stage 15,12 must list --pp 2 stages summing to the 28 layers' -- partitions --layers-per-stage 15,12
expect 2 'error: --layers-per-stage 10,10,8 must list --pp 2 stages' -- partitions --layers-per-stage 10,10,8
expect 2 'Could not convert: --layers-per-stage = 15:13' -- partitions --layers-per-stage 15:13
# A learned position table bounds the sequence; without --seq, the model's default is within it.
expect 2 "error: --seq 4096 exceeds gpt3-175b's max_positions 2048 \(learned position embeddings\)$" -- partitions --model gpt3-175b --pp 16 --seq 4096
expect 0 '"seq": 2048,' -- partitions --model gpt3-175b --pp 16 --json
expect 0 '"norm": "layernorm",' -- partitions --model gpt3-175b --pp 16 --json
expect 0 '"seq": 4096,' -- partitions --model llama3.3-70b --json
expect 0 "default 4096, or the model's max_positions when smaller" -- plan --help
expect 2 'error: --model llama9: unknown model \(presets: gpt3-175b, llama3.2-3b, llama3.3-70b, qwen3-1.7b' -- partitions --model llama9
expect 2 'error: --gpu v100: unknown GPU \(presets: a100-40gb, h100-sxm, h200' -- partitions --gpu v100
expect 2 'error: --clocks fast: expected "all", "artifact" or MIN:MAX:STEP' -- partitions --clocks fast
expect 2 'error: --clocks 900:1410: expected "all", "artifact" or MIN:MAX:STEP' -- partitions --clocks 900:1410
expect 2 'error: --clocks 1410:900:30: expected MIN:MAX:STEP in MHz with MIN <= MAX' -- partitions --clocks 1410:900:30
expect 2 'error: --clocks 905: a100-40gb supports 210\.\.1410 MHz in 15 MHz steps' -- partitions --clocks 905:1410:30
expect 2 'error: --recompute some: expected "full" or "none"' -- partitions --recompute some
expect 2 'error: --slots some: expected "all" or "artifact"' -- partitions --slots some
expect 2 'error: --tp-ctas 0:30: expected MIN:MAX' -- partitions --tp-ctas 0:30
expect 2 'error: --cp-ctas 20:1: expected MIN:MAX' -- partitions --cp-ctas 20:1
expect 2 '--tp' -- partitions --tp abc
expect 2 'no-such-flag' -- models --no-such-flag

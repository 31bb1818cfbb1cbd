# --sequence-parallel: the partitions cut at the all-gathers and reduce-scatters (TP 8, 96 MiB each,
# 18 clocks x 10 CTA counts x the slots), --tp-ctas shaping their space, and a plan of it.
# shellcheck shell=bash
sp_tmp=$(mktemp -d)
expect 0 'fwd_attn_norm_rs +0 +tp reduce_scatter 96\.0 MiB +norm_0 +180 +mlp_bda,input_norm' -- partitions --tp 8 --sequence-parallel
expect 0 'fwd_attn_norm_ag +1 +tp all_gather 96\.0 MiB +norm_0 +180 ' -- partitions --tp 8 --sequence-parallel
expect 0 'fwd_attn_rs +1 +tp reduce_scatter 96\.0 MiB +linear_0 rope_0 attn_0 linear_1 +720 +qkv,rope,attention,out_proj' -- partitions --tp 8 --sequence-parallel
expect 0 'bwd_fc1_rs +1 +tp reduce_scatter 96\.0 MiB +linear_0 +180 +fc1_bwd' -- partitions --tp 8 --sequence-parallel
expect 0 'bwd_qkv_ag +0 +tp all_gather 96\.0 MiB +linear_0 +180 +qkv_bwd' -- partitions --tp 8 --sequence-parallel
# TP 2 at --mbs 4 --seq 2048: 4096 tokens x 3072 x 2 bytes = 24 MiB.
expect 0 'fwd_mlp_ag +0 +tp all_gather 24\.0 MiB +linear_0 activation_0 linear_1 +540 ' -- partitions --tp 2 --mbs 4 --seq 2048 --sequence-parallel
# --tp-ctas applies to them: 6:30:6 is 5 counts, 18 x 5 x 3 slots = 270.
expect 0 'fwd_mlp_rs +1 +tp reduce_scatter 96\.0 MiB +linear_0 activation_0 linear_1 +270 ' -- partitions --sequence-parallel --tp-ctas 6:30:6
expect 0 '"kind": "reduce_scatter"' -- partitions --sequence-parallel --json
expect 2 '--slots artifact: the artifact searched no slot of partition fwd_attn_norm_rs' -- partitions --sequence-parallel --slots artifact
# Without --sequence-parallel, a plan written before SP existed still reads and simulates to its time.
plan_v1="$here/../data/plan/tp8_pp2_kareus_plan1.json"
expect 0 'iteration time 1\.590 s, job energy 5755 J' -- simulate --plan "$plan_v1"
expect 2 'made for sequence_parallel false, this run has sequence_parallel true' -- simulate --plan "$plan_v1" --sequence-parallel
# A sequence-parallel plan: kareus plans it, its plan names the SP keys, and simulating its
# fastest plan reproduces the summary's time.
expect 0 'kareus' -- plan --sequence-parallel --methods kareus --always-nanobatch --microbatches 2 --search-budget 0.02 --max-plans 2 --out "$sp_tmp/plan"
check 'sequence-parallel plan' python3 - "$sp_tmp/plan" "$KAREUS" <<'PY'
import json, re, subprocess, sys
out, kareus = sys.argv[1], sys.argv[2]
plan = json.load(open(f"{out}/plans/kareus/plan_00.json"))
assert plan["workload"]["sequence_parallel"] is True, plan["workload"]
keys = set()
for stage in plan["stages"]:
    for instruction in stage["instructions"]:
        keys |= set(instruction["partitions"])
assert keys, "no comm configs"
assert keys <= {"fwd_attn_norm_rs", "fwd_attn_norm_ag", "fwd_attn_ag", "fwd_attn_rs", "fwd_mlp_norm_rs",
                "fwd_mlp_norm_ag", "fwd_mlp_ag", "fwd_mlp_rs", "bwd_attn_norm_rs", "bwd_attn_norm_ag", "bwd_fc2",
                "bwd_fc1_ag", "bwd_fc1_rs", "bwd_mlp_norm_rs", "bwd_mlp_norm_ag", "bwd_ao", "bwd_qkv_ag",
                "bwd_qkv_rs"}, keys
summary = json.load(open(f"{out}/summary.json"))
text = subprocess.run([kareus, "simulate", "--plan", f"{out}/plans/kareus/plan_00.json"], capture_output=True,
                      text=True, check=True).stdout
simulated = float(re.search(r"iteration time ([0-9.]+) s", text).group(1))
fastest = summary["methods"]["kareus"]["frontier"][0]
assert fastest["plan"] == "plans/kareus/plan_00.json", fastest
assert abs(simulated - fastest["time_s"]) <= 0.0005 + 1e-9, (simulated, fastest["time_s"])
PY
rm -rf "$sp_tmp"

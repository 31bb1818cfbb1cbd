# kareus simulate and kareus plan: results and bad input.
expect 0 'iteration time [0-9.]+ s' -- simulate --clock 1410 --layers-per-stage 15,13
expect 0 '"avg_power_w"' -- simulate --clock 1200 --overlap nanobatch --json
expect 2 'give either --clock' -- simulate
expect 2 '--clock 1405: a100-40gb supports 210..1410 MHz in 15 MHz steps' -- simulate --clock 1405
expect 2 '--overlap both: expected "none"' -- simulate --clock 1410 --overlap both
expect 2 'cannot read /nonexistent/plan.json' -- simulate --plan /nonexistent/plan.json
expect 2 '--gpu b200: unknown GPU' -- simulate --clock 1410 --gpu b200
expect 2 'unknown method "zeus"' -- plan --methods perseus,zeus --out /tmp/kareus-cli-plan
expect 2 '--out /dev/null/x: cannot create directory' -- plan --methods megatron --out /dev/null/x
expect 2 '--clocks 907: a100-40gb supports' -- plan --clocks 900:1410:7 --out /tmp/kareus-cli-plan
expect 0 'kareus .*[0-9.]+' -- plan --methods megatron,perseus,kareus --tp-ctas 6:30:12 --max-plans 3 --out /tmp/kareus-cli-plan

"""Our kareus frontier beside the Kareus artifact's predicted one (Llama 3.2 3B CP1 TP8 mbs 8 4k).

The artifact predicted ten frontier points (iteration time, average power per GPU) from real
per-clock profiles of 2x8 A100-40GB, with its 1.15 composition factor. For each, this prints our
least job energy at an iteration time no later than the artifact's, from the summary.json of
`kareus plan` (bench/artifact_sweep.sh writes it). Usage: artifact_frontier_table.py SUMMARY_JSON
"""

import json
import pathlib
import sys

GPUS = 16
ARTIFACT_POINTS = [  # (T s, W per GPU)
    (6.524, 178.9), (6.190, 184.9), (5.856, 192.7), (5.522, 203.2), (5.188, 218.5),
    (5.021, 229.1), (4.854, 242.8), (4.687, 260.5), (4.520, 283.9), (4.353, 317.1),
]


def main():
    summary = json.loads(pathlib.Path(sys.argv[1]).read_text())
    ours = summary["methods"]["kareus"]["frontier"]
    fastest = min(point["time_s"] for point in ours)
    print("| artifact T (s) | artifact W/GPU | artifact E (kJ) | ours at T <= artifact T (kJ) | "
          "our point: T (s) / W per GPU | ours vs artifact |")
    print("|---|---|---|---|---|---|")
    for time_s, watts in ARTIFACT_POINTS:
        energy_j = GPUS * watts * time_s
        eligible = [point for point in ours if point["time_s"] <= time_s]
        cells = [f"{time_s:.3f}", f"{watts:.1f}", f"{energy_j / 1000:.2f}"]
        if eligible:
            best = min(eligible, key=lambda point: point["energy_j"])
            cells += [f"{best['energy_j'] / 1000:.2f}",
                      f"{best['time_s']:.3f} / {best['energy_j'] / (GPUS * best['time_s']):.1f}",
                      f"{100 * (best['energy_j'] / energy_j - 1):+.1f}%"]
        else:
            cells += [f"- (our fastest is {fastest:.3f} s)", "-", "-"]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()

"""kareus serve driven by Zeus 0.16's own PFO models, routes and client (docs/kareus.md section 11).

Usage: zeus_pfo_test.py KAREUS_BINARY. Exits 77 (skipped) when zeus[pfo]==0.16.0 is not
installed in the running Python (scripts/setup.sh puts it in .venv/). A 16-rank job (TP 8,
PP 2) registers with Zeus's JobInfo/RankInfo models; every rank must get exactly its stage's
clocks of the fastest frontier plan; a bad job is refused; an unknown job gets 404; then Zeus's
PipelineFrequencyOptimizer itself (torch and its GPU layer faked) fetches and follows its schedule.
"""

from __future__ import annotations

import json
import pathlib
import re
import signal
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
# Zeus's package __init__ imports its client, which imports torch: give it the stand-in.
sys.path.insert(0, str(HERE / "fake_torch"))

try:
    import httpx
    import zeus
    from zeus.optimizer.pipeline_frequency import common
    from zeus.optimizer.pipeline_frequency import optimizer as zeus_optimizer
except ImportError as error:
    print(f"skipped: zeus[pfo] is not installed ({error})")
    sys.exit(77)

if zeus.__version__ != "0.16.0":
    print(f"skipped: zeus {zeus.__version__} installed, this test is for 0.16.0")
    sys.exit(77)

TP, PP, WORLD = 8, 2, 16
A100_CLOCKS = list(range(1410, 209, -15))


def start_server(kareus: str, frontier: pathlib.Path, results: pathlib.Path):
    process = subprocess.Popen(
        [kareus, "serve", "--frontier", str(frontier), "--port", "0", "--results", str(results)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    line = process.stdout.readline()
    match = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
    if not match:
        process.kill()
        raise SystemExit(f"kareus serve did not start: {line}{process.stdout.read()}")
    return process, match.group(1)


def stage_schedule(plan: dict, stage: int) -> list[tuple[str, int]]:
    return [(i["type"], i["freq_mhz"]) for i in plan["stages"][stage]["instructions"]]


def main() -> None:
    kareus = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = pathlib.Path(tmp_name)
        # A quick plan (three clocks, a 5% search): the protocol is under test, not the planner.
        subprocess.run([kareus, "plan", "--out", str(tmp / "out"), "--methods", "kareus", "--clocks", "1230:1410:90",
                        "--search-budget", "0.05"], check=True, stdout=subprocess.DEVNULL)
        plans = {p: json.loads(p.read_text()) for p in (tmp / "out/plans/kareus").glob("plan_*.json")}
        fastest = min(plans.values(), key=lambda plan: plan["predicted"]["time_s"])
        clocks = sorted({c for plan in plans.values() for s in range(PP) for _, c in stage_schedule(plan, s)} |
                        set(A100_CLOCKS), reverse=True)
        server, url = start_server(kareus, tmp / "out/plans/kareus", tmp / "results.jsonl")
        try:
            run_protocol(url, fastest, clocks)
            run_zeus_client(url, fastest, clocks)
        finally:
            server.send_signal(signal.SIGTERM)
            code = server.wait(timeout=20)
        assert code == 0, f"kareus serve exited {code} on SIGTERM"
        lines = (tmp / "results.jsonl").read_text().splitlines()
        assert len(lines) == WORLD, len(lines)
        assert json.loads(lines[0])["result"]["iter_energy"] == [21000.0]
    print("zeus pfo: ok")


def run_protocol(url: str, fastest: dict, clocks: list[int]) -> None:
    job_info = common.JobInfo(pp_degree=PP, dp_degree=1, tp_degree=TP, world_size=WORLD, job_metadata="test")
    response = httpx.post(url + common.REGISTER_JOB_URL, json=job_info.dict())
    assert response.status_code == 200, response.text
    job_id = response.json()
    assert isinstance(job_id, str) and job_id, job_id

    # Zeus's JobInfo refuses pp x dp x tp != world_size itself; send one anyway, unvalidated.
    bad = common.JobInfo.construct(job_id="", pp_degree=PP, dp_degree=1, tp_degree=TP, world_size=12,
                                   job_metadata=None)
    response = httpx.post(url + common.REGISTER_JOB_URL, json=bad.dict())
    assert response.status_code == 400 and response.json()["field"] == "world_size", response.text
    # Valid for Zeus, but the plans have 2 stages.
    wrong_pp = common.JobInfo(pp_degree=4, dp_degree=1, tp_degree=4, world_size=16)
    response = httpx.post(url + common.REGISTER_JOB_URL, json=wrong_pp.dict())
    assert response.status_code == 400 and response.json()["field"] == "pp_degree", response.text

    for rank in reversed(range(WORLD)):  # any order
        rank_info = common.RankInfo(rank=rank, dp_rank=0, pp_rank=rank // TP, tp_rank=rank % TP,
                                    available_frequencies=clocks)
        response = httpx.post(url + common.REGISTER_RANK_URL.format(job_id=job_id), json=rank_info.dict())
        assert response.status_code == 200 and response.json() is None, response.text
    for rank in range(WORLD):
        response = httpx.get(url + common.GET_FREQUENCY_SCHEDULE_URL.format(job_id=job_id), params={"rank": rank})
        assert response.status_code == 200, response.text
        schedule = common.FrequencySchedule.parse_raw(response.text)
        assert schedule.rank == rank
        assert schedule.frequencies == stage_schedule(fastest, rank // TP), (rank, schedule.frequencies)
    for rank in range(WORLD):
        result = common.ProfilingResult(rank=rank, iter_time=[4.6], iter_energy=[21000.0],
                                        time_breakdown={"forward": [[0.1, 0.2]]})
        response = httpx.post(url + common.REPORT_PROFILING_RESULT_URL.format(job_id=job_id), json=result.dict())
        assert response.status_code == 200, response.text

    response = httpx.get(url + common.GET_FREQUENCY_SCHEDULE_URL.format(job_id="no-such-job"), params={"rank": 0})
    assert response.status_code == 404, response.text
    response = httpx.post(url + common.REGISTER_RANK_URL.format(job_id="no-such-job"),
                          json=common.RankInfo(rank=0, dp_rank=0, pp_rank=0, tp_rank=0,
                                               available_frequencies=clocks).dict())
    assert response.status_code == 404, response.text


class FakeGpus:
    def __init__(self, clocks: list[int]) -> None:
        self.clocks = clocks

    def get_supported_memory_clocks(self, device_id: int) -> list[int]:
        return [1215]

    def get_supported_graphics_clocks(self, device_id: int, memory_clock: int) -> list[int]:
        return list(self.clocks)


class FakeFrequencyController:
    """Records the clocks Zeus would lock through NVML."""

    def __init__(self, device_id: int) -> None:
        self.device_id = device_id
        self.locked: list[int] = []

    def set_frequency(self, frequency: int) -> None:
        self.locked.append(frequency)


def run_zeus_client(url: str, fastest: dict, clocks: list[int]) -> None:
    zeus_optimizer.get_gpus = lambda: FakeGpus(clocks)
    zeus_optimizer.FrequencyController = FakeFrequencyController
    clients = []
    # Rank 0 first: it registers the job and "broadcasts" the id (fake torch.distributed).
    for rank in range(WORLD):
        clients.append(zeus_optimizer.PipelineFrequencyOptimizer(
            rank=rank, dp_rank=0, pp_rank=rank // TP, tp_rank=rank % TP, device_id=rank % TP,
            dp_degree=1, pp_degree=PP, tp_degree=TP, world_size=WORLD, server_url=url, job_metadata="client"))
    assert len({client.job_id for client in clients}) == 1
    for rank, client in enumerate(clients):
        expected = stage_schedule(fastest, rank // TP)
        for _ in range(2):  # two iterations: on_step_end rewinds the schedule
            client.on_step_begin()
            for name, _ in expected:
                client.on_instruction_begin(name)
                client.on_instruction_end(name)
            client.on_step_end()
        assert client.frequency_controller.locked == [clock for _, clock in expected] * 2, rank


if __name__ == "__main__":
    start = time.monotonic()
    main()
    print(f"took {time.monotonic() - start:.1f} s")

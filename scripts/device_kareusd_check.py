"""kareusd on a real GPU: the daemon's NVML backend locks GPU 0's clock for a client and resets it
on each way a lease ends (the client's reset, its disconnect, its SIGKILL, the daemon's SIGTERM).

Run as root on a GPU machine with torch and nvidia-ml-py (the GPU session's image has both):
    python3 scripts/device_kareusd_check.py KAREUSD_BINARY OUT.json [MHZ]
Whether a clock is locked is read where NVML shows it plainly: the SM clock under a bf16 GEMM
load (an idle GPU's reading tells little; right after the call it still shows the previous
clock). Locked: at most MHZ + 15 throughout; free:
above MHZ + 100 at some sample (the GPU's own boost, or its power cap, well above a low lock).
Writes every reply, the clocks sampled and each check's outcome to OUT.json; exits 1 if one fails.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pynvml
import torch


def sm_clocks_under_load(handle, seconds=1.0, settle_s=0.25):
    """SM clocks (MHz) sampled every 50 ms while the GPU runs 8192^3 bf16 GEMMs, from ``settle_s``
    on: a lock takes effect 44-135 ms after NVML's call returns (measured on an H200), so a
    sample at once can still show the previous clock."""
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    clocks, start = [], time.time()
    while time.time() < start + settle_s + seconds:
        for _ in range(4):
            a @ a
        time.sleep(0.05)
        if time.time() >= start + settle_s:
            clocks.append(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))
    torch.cuda.synchronize()
    return clocks


class Client:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.reader = self.sock.makefile("r")

    def ask(self, request):
        self.sock.sendall((json.dumps(request) + "\n").encode())
        return json.loads(self.reader.readline())

    def close(self):
        self.reader.close()  # the file holds the socket open too
        self.sock.close()


def start_daemon(binary, folder):
    config = os.path.join(folder, "config.json")
    path = os.path.join(folder, "kareusd.sock")
    with open(config, "w") as f:
        json.dump({"socket_path": path, "allowed_uids": [0]}, f)
    log = open(os.path.join(folder, "daemon.log"), "a")
    daemon = subprocess.Popen([binary, "--config", config], stderr=log)
    for _ in range(100):
        if os.path.exists(path):
            return daemon, path
        time.sleep(0.05)
    raise RuntimeError("kareusd did not create its socket: " + open(os.path.join(folder, "daemon.log")).read())


def main():
    binary, out, mhz = sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 1350
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    folder = tempfile.mkdtemp(dir="/root")  # not /tmp: kareusd warns on a world-writable folder
    os.chmod(folder, 0o700)
    results = {"mhz": mhz, "checks": {}, "clocks": {}, "replies": {}}

    def check(name, locked):
        clocks = sm_clocks_under_load(handle)
        results["clocks"][name] = clocks
        ok = max(clocks) <= mhz + 15 if locked else max(clocks) > mhz + 100
        results["checks"][name] = ok
        print(f"{name}: {'locked' if locked else 'free'} expected, SM clock {min(clocks)}-{max(clocks)} MHz: "
              f"{'ok' if ok else 'FAILED'}", flush=True)

    check("before", locked=False)
    daemon, path = start_daemon(binary, folder)
    client = Client(path)
    results["replies"]["supported_has_mhz"] = mhz in client.ask({"op": "supported", "gpu": 0}).get("clocks_mhz", [])
    results["replies"]["energy_0"] = client.ask({"op": "energy", "gpu": 0})
    results["replies"]["set"] = client.ask({"op": "set", "gpu": 0, "freq_mhz": mhz})  # NVML's clock at once
    time.sleep(0.3)
    results["replies"]["get_idle_300ms"] = client.ask({"op": "get", "gpu": 0})
    check("locked", locked=True)
    results["replies"]["get_locked"] = client.ask({"op": "get", "gpu": 0})
    results["replies"]["energy_1"] = client.ask({"op": "energy", "gpu": 0})
    results["replies"]["reset"] = client.ask({"op": "reset", "gpu": 0})
    check("after_reset", locked=False)
    client.ask({"op": "set", "gpu": 0, "freq_mhz": mhz})
    client.close()  # a disconnect ends the lease
    time.sleep(0.3)
    check("after_disconnect", locked=False)

    # A client killed while it holds the lock (SIGKILL: no goodbye).
    holder = subprocess.Popen([sys.executable, "-c", (
        "import json, socket, sys, time\n"
        f"s = socket.socket(socket.AF_UNIX); s.connect({path!r})\n"
        f"s.sendall(json.dumps({{'op': 'set', 'gpu': 0, 'freq_mhz': {mhz}}}).encode() + b'\\n')\n"
        "print(s.makefile().readline(), flush=True); time.sleep(60)\n")], stdout=subprocess.PIPE, text=True)
    results["replies"]["killed_client_set"] = holder.stdout.readline().strip()
    check("killed_client_holding", locked=True)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    time.sleep(0.3)
    check("after_client_sigkill", locked=False)

    # The daemon stopped (SIGTERM) while a client holds the lock.
    client = Client(path)
    client.ask({"op": "set", "gpu": 0, "freq_mhz": mhz})
    daemon.send_signal(signal.SIGTERM)
    results["daemon_exit"] = daemon.wait(timeout=10)
    check("after_daemon_sigterm", locked=False)
    results["daemon_log"] = open(os.path.join(folder, "daemon.log")).read()[-4000:]
    results["passed"] = all(results["checks"].values()) and results["daemon_exit"] == 0
    with open(out, "w") as f:
        json.dump(results, f, indent=1)
    print("kareusd check:", "passed" if results["passed"] else "FAILED")
    sys.exit(0 if results["passed"] else 1)


if __name__ == "__main__":
    main()

"""Bounded loopback soak test of `kareus serve` against hostile clients (docs/limits.md).

    python3 tests/interop/serve_soak_test.py KAREUS_BINARY [--sanitized]

(--sanitized: the binary is built with ASan, whose allocator makes the memory check meaningless.)

Serves a small frontier with a 1 s timeout and a 64 KiB body limit, then: an endless chunked body
(answered 413 long before its end, the server's memory flat), a header flood (431), 64 clients
trickling one byte every 0.2 s while a normal client is served at once (and each trickler cut off
by the timeout), pipelined requests answered in order, results appended whole, a non-loopback
--host refused without --allow-remote, and SIGTERM under load (tricklers, clients that never read)
ending the server within twice the timeout. Fixed sizes and counts, no randomness; about 15 s.
Python's standard library only, so it runs wherever the binary does.
"""

import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TIMEOUT_S = 1.0
MAX_BODY = 65536
failures = []
leftovers = {}  # socket fileno -> bytes received after the last response read


def check(name, condition, detail=""):
    print(("ok   " if condition else "FAIL ") + name + ("" if condition else ": " + str(detail)), flush=True)
    if not condition:
        failures.append(name)


def memory_kib(pid, field):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def connect(port, receive_buffer=0):
    client = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if receive_buffer:
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    client.connect(("127.0.0.1", port))
    return client


def read_response(client, wait_s=5.0):
    """(status, body) of the next response on `client`, or (0, '') if none within wait_s."""
    data = leftovers.pop(client.fileno(), b"")
    deadline = time.monotonic() + wait_s
    while True:
        end = data.find(b"\r\n\r\n")
        if end >= 0:
            head = data[:end].decode("latin-1")
            status = int(head[9:12])
            length = 0
            for line in head.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            if len(data) >= end + 4 + length:
                leftovers[client.fileno()] = data[end + 4 + length:]
                return status, data[end + 4:end + 4 + length].decode()
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([client], [], [], left)[0]:
            return 0, ""
        try:
            chunk = client.recv(65536)
        except OSError:
            return 0, ""
        if not chunk:
            return 0, ""
        data += chunk


def request(port, method, path, body=None, wait_s=3.0):
    client = connect(port)
    try:
        payload = b"" if body is None else json.dumps(body).encode()
        client.sendall(f"{method} {path} HTTP/1.1\r\nHost: t\r\nContent-Length: {len(payload)}\r\n"
                       f"Connection: close\r\n\r\n".encode() + payload)
        return read_response(client, wait_s)
    finally:
        leftovers.pop(client.fileno(), None)
        client.close()


def start_server(kareus, frontier, tmp, *extra):
    log = open(os.path.join(tmp, "serve.log"), "w+")
    process = subprocess.Popen([kareus, "serve", "--frontier", frontier, "--port", "0", "--timeout-s", f"{TIMEOUT_S:g}",
                                "--max-body-bytes", str(MAX_BODY), *extra], stdout=log, stderr=subprocess.STDOUT)
    for _ in range(100):
        log.seek(0)
        text = log.read()
        if "listening on http://" in text:
            return process, int(text.split("listening on http://")[1].split(":")[1].split(" ")[0]), log
        if process.poll() is not None:
            break
        time.sleep(0.05)
    log.seek(0)
    raise SystemExit(f"kareus serve did not start: {log.read()}")


def chunked_flood(port):
    """Sends an endless chunked body; returns (status, bytes sent before the answer came)."""
    client = connect(port)
    client.sendall(b"POST /register_job HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"%x\r\n" % 65536 + b" " * 65536 + b"\r\n"
    sent = 0
    client.setblocking(False)
    while sent < (256 << 20):
        readable, writable, _ = select.select([client], [client], [], 5)
        if readable or not writable:
            break
        try:
            sent += client.send(chunk)
        except (BlockingIOError, InterruptedError):
            continue
        except OSError:
            break
    client.setblocking(True)
    status, _ = read_response(client)
    leftovers.pop(client.fileno(), None)
    client.close()
    return status, sent


def header_flood(port, fields):
    client = connect(port)
    head = b"GET /info HTTP/1.1\r\nHost: t\r\n" + b"".join(b"X-Flood-%d: %s\r\n" % (i, b"y" * 16)
                                                          for i in range(fields)) + b"\r\n"
    try:
        client.sendall(head)
    except OSError:
        pass  # the server may answer and close before taking it all
    status, _ = read_response(client)
    leftovers.pop(client.fileno(), None)
    client.close()
    return status


class Tricklers:
    """Clients that send one byte of a request every `period_s`, each until the server answers or
    closes; records when each was cut off."""

    def __init__(self, port, count, period_s=0.2):
        self.clients = [connect(port) for _ in range(count)]
        self.cut_after = [None] * count
        self.period_s = period_s
        self.start = time.monotonic()
        self.stop_flag = False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        request_bytes = b"GET /info HTTP/1.1\r\nHost: t\r\nX-Slow: " + b"a" * 1000
        for index in range(len(request_bytes)):
            if self.stop_flag or all(cut is not None for cut in self.cut_after):
                return
            for number, client in enumerate(self.clients):
                if self.cut_after[number] is not None:
                    continue
                if select.select([client], [], [], 0)[0]:
                    self.cut_after[number] = time.monotonic() - self.start
                    continue
                try:
                    client.send(request_bytes[index:index + 1])
                except OSError:
                    self.cut_after[number] = time.monotonic() - self.start
            time.sleep(self.period_s)

    def close(self):
        self.stop_flag = True
        self.thread.join()
        for client in self.clients:
            client.close()


def main(tmp):
    kareus = sys.argv[1]
    sanitized = "--sanitized" in sys.argv
    frontier = os.path.join(tmp, "frontier")
    subprocess.run([kareus, "solve", "--profile", os.path.join(ROOT, "tests/data/plan/perseus_csv/valid.csv"),
                    "--stages", "2", "--microbatches", "4", "--out", frontier], check=True, stdout=subprocess.DEVNULL)
    results = os.path.join(tmp, "results.jsonl")
    server, port, log = start_server(kareus, frontier, tmp, "--results", results)
    try:
        baseline_kib = memory_kib(server.pid, "VmRSS")

        status, job = request(port, "POST", "/register_job",
                              {"job_id": "", "pp_degree": 2, "dp_degree": 1, "tp_degree": 1, "world_size": 2})
        check("register a job", status == 200, status)
        job = json.loads(job)

        started = time.monotonic()
        status, sent = chunked_flood(port)
        check("endless chunked body answered 413 before its end", status == 413 and sent < (128 << 20),
              f"status {status} after {sent >> 20} MiB sent in {time.monotonic() - started:.1f} s")

        status = header_flood(port, 100000)  # 2.6 MB of header fields
        check("header flood (100,000 fields) answered 431", status == 431, status)
        status = header_flood(port, 65)
        check("65 header fields answered 431", status == 431, status)

        tricklers = Tricklers(port, 64)
        time.sleep(0.3)  # every trickler connected and sending
        latencies = []
        for _ in range(20):
            started = time.monotonic()
            status, _ = request(port, "GET", "/info")
            latencies.append(time.monotonic() - started if status == 200 else float("inf"))
        check("64 tricklers deny no other client (20 requests)", max(latencies) < 0.5,
              f"slowest {max(latencies):.2f} s")
        time.sleep(2 * TIMEOUT_S + 0.5)
        cut = [value for value in tricklers.cut_after if value is not None]
        check("every trickler cut off by the timeout", len(cut) == 64 and max(cut) < 2 * TIMEOUT_S + 0.8,
              f"{len(cut)} of 64 cut, last after {max(cut) if cut else 0:.2f} s")
        tricklers.close()

        client = connect(port)
        body = json.dumps({"rank": 0, "iter_time": [4.5], "iter_energy": [2500.0]}).encode()
        post = (f"POST /result/{job} HTTP/1.1\r\nHost: t\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
        get = b"GET %s HTTP/1.1\r\nHost: t\r\n\r\n"
        client.sendall(post + get % b"/nope" + post + get % b"/info")
        statuses = []
        for _ in range(4):
            statuses.append(read_response(client)[0])
        leftovers.pop(client.fileno(), None)
        client.close()
        check("pipelined requests answered in order", statuses == [200, 404, 200, 200], statuses)
        with open(results) as lines:
            written = [json.loads(line) for line in lines]
        check("results appended whole", len(written) == 2 and all(entry["job_id"] == job for entry in written),
              written)

        growth_mib = (memory_kib(server.pid, "VmHWM") - baseline_kib) / 1024
        if sanitized:  # ASan's allocator keeps freed memory in quarantine: the peak says nothing
            print(f"skip peak memory check under ASan (grew {growth_mib:.0f} MiB)", flush=True)
        else:
            check("peak memory grew less than 48 MiB", growth_mib < 48, f"{growth_mib:.0f} MiB")

        # SIGTERM under load: tricklers, clients that pipeline and never read, and busy clients.
        tricklers = Tricklers(port, 32)
        deaf = []
        for _ in range(4):
            client = connect(port, receive_buffer=4096)
            client.setblocking(False)
            try:
                client.send(b"GET /info HTTP/1.1\r\nHost: t\r\n\r\n" * 3000)
            except BlockingIOError:
                pass
            deaf.append(client)
        busy_stop = threading.Event()

        def busy():
            while not busy_stop.is_set():
                try:
                    request(port, "GET", "/info", wait_s=1.0)
                except OSError:
                    time.sleep(0.01)

        busy_threads = [threading.Thread(target=busy, daemon=True) for _ in range(4)]
        for thread in busy_threads:
            thread.start()
        time.sleep(0.5)
        started = time.monotonic()
        server.send_signal(signal.SIGTERM)
        try:
            code = server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
        stop_s = time.monotonic() - started
        busy_stop.set()
        tricklers.close()
        for client in deaf:
            client.close()
        log.seek(0)
        check("SIGTERM under load ends the server within twice the timeout",
              code == 0 and stop_s < 2 * TIMEOUT_S + 0.5 and "kareus serve: stopped" in log.read(),
              f"exit {code} after {stop_s:.2f} s")
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()

    # A non-loopback --host needs --allow-remote, and then says the server has no authentication.
    refused = subprocess.Popen([kareus, "serve", "--frontier", frontier, "--host", "0.0.0.0", "--port", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _, errors = refused.communicate(timeout=10)
    except subprocess.TimeoutExpired:  # it listens
        refused.kill()
        _, errors = refused.communicate()
    check("non-loopback --host refused with exit 2",
          refused.returncode == 2 and "pass --allow-remote to listen there anyway" in errors,
          f"exit {refused.returncode}: {errors.strip()}")
    allowed, _, log = start_server(kareus, frontier, tmp, "--host", "0.0.0.0", "--allow-remote")
    allowed.send_signal(signal.SIGTERM)
    allowed.wait(timeout=10)
    log.seek(0)
    check("--allow-remote warns that there is no authentication", "the server has no authentication" in log.read())

    print(f"serve_soak: {len(failures)} failed" + (": " + ", ".join(failures) if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="kareus_soak_") as folder:
        status = main(folder)
    sys.exit(status)

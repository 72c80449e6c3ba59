#!/usr/bin/env python3
"""Hostile clients against a `splitdec serve` on loopback, for a bounded time.

Runs slow heads (slowloris), bursts of connects, large and deeply nested
bodies, header floods and clients that leave without reading, all at once,
while probing /health. Reports the server's peak RSS against its idle RSS,
the slowest /health answer, the statuses seen, that a normal request still
works afterwards and that SIGTERM still ends the process.

    scripts/hostile_clients.py [--seconds 30] [--binary build/splitdec] [--model DIR]

Only 127.0.0.1 is ever contacted. Every loop is bounded by --seconds.
The ctest version of each attack is tests/test_serve.cpp's ServeHostile.*.
"""
import argparse
import collections
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HOST = "127.0.0.1"


def connect(port, timeout=5.0):
    s = socket.create_connection((HOST, port), timeout=timeout)
    s.settimeout(timeout)
    return s


def status_of(data):
    if data.startswith(b"HTTP/1.1 "):
        return int(data[9:12])
    return None


def read_status(s):
    data = b""
    try:
        while b"\r\n" not in data:
            more = s.recv(4096)
            if not more:
                break
            data += more
    except OSError:
        pass
    return status_of(data)


def request(port, method, path, body=b"", headers=""):
    s = connect(port)
    try:
        head = f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{headers}"
        if body:
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        s.sendall(head.encode() + b"\r\n" + body)
        return read_status(s)
    except OSError:
        return None
    finally:
        s.close()


def chat(text, max_tokens, stream=False):
    return json.dumps({"messages": [{"role": "user", "content": text}], "max_tokens": max_tokens,
                       "temperature": 0, "stream": stream}).encode()


def rss_kb(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


class Attack:
    def __init__(self, port, deadline):
        self.port = port
        self.deadline = deadline
        self.statuses = collections.Counter()
        self.lock = threading.Lock()

    def count(self, name, status):
        with self.lock:
            self.statuses[f"{name}:{status}"] += 1

    def running(self):
        return time.time() < self.deadline

    def slowloris(self, connections=200):
        socks = []
        for _ in range(connections):
            try:
                s = connect(self.port)
                s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
                socks.append(s)
            except OSError:
                self.count("slowloris-connect", "refused")
        while self.running() and socks:
            for s in list(socks):
                try:
                    s.sendall(b"X")
                except OSError:
                    socks.remove(s)
                    self.count("slowloris", "cut")
            time.sleep(1.0)
        for s in socks:
            s.close()

    def bursts(self):
        while self.running():
            threads = [threading.Thread(target=lambda: self.count("burst", request(self.port, "GET", "/health")))
                       for _ in range(64)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            time.sleep(0.5)

    def big_bodies(self):
        nested = b'{"messages": [{"role": "user", "content": "hi"}], "x": ' + b"[" * 200000 + b"]" * 200000 + b"}"
        wide = b'{"messages": [{"role": "user", "content": "hi"}], "x": [' + b",".join([b"[]"] * 3000000) + b"]}"
        while self.running():
            self.count("nested", request(self.port, "POST", "/v1/chat/completions", nested))
            self.count("wide", request(self.port, "POST", "/v1/chat/completions", wide))

    def header_flood(self):
        while self.running():
            s = connect(self.port)
            try:
                s.sendall(b"GET /health HTTP/1.1\r\n")
                line = b"X-Flood: " + b"a" * 1000 + b"\r\n"
                for _ in range(300000):  # up to 300 MB, stopped by the server's refusal
                    s.sendall(line)
            except OSError:
                pass
            self.count("header-flood", read_status(s))
            s.close()

    def leavers(self):
        while self.running():
            socks = []
            for _ in range(4):
                try:
                    s = connect(self.port)
                    body = chat("Tell me a long story.", 4000)
                    s.sendall(f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
                    socks.append(s)
                except OSError:
                    pass
            time.sleep(0.5)
            for s in socks:
                s.close()
            self.count("leaver", "closed")

    def health_probe(self, worst):
        while self.running():
            t0 = time.time()
            status = request(self.port, "GET", "/health")
            dt = time.time() - t0
            worst[0] = max(worst[0], dt)
            if status != 200:
                worst[1] += 1
            time.sleep(0.2)


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--binary", default=os.path.join(root, "build", "splitdec"))
    ap.add_argument("--model", help="model directory (default: a tiny-gemma3 made here)")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="splitdec-hostile-")
    model = args.model
    if not model:
        model = os.path.join(work, "tiny")
        subprocess.run([args.binary, "make-model", "--preset", "tiny-gemma3", "--out", model], check=True,
                       stdout=subprocess.DEVNULL)
    server = subprocess.Popen([args.binary, "serve", "--model", model, "--port", "0", "--max-sequences", "2",
                               "--max-queue", "2", "--max-length", "4096"], stdout=subprocess.PIPE, text=True)
    line = server.stdout.readline()
    port = int(line.split("http://")[1].split(" ")[0].rsplit(":", 1)[1])
    assert request(port, "POST", "/v1/chat/completions", chat("Hello", 8)) == 200
    idle_kb = rss_kb(server.pid, "VmRSS")

    attack = Attack(port, time.time() + args.seconds)
    worst = [0.0, 0]
    threads = [threading.Thread(target=f) for f in
               (attack.slowloris, attack.bursts, attack.big_bodies, attack.header_flood, attack.leavers)]
    threads.append(threading.Thread(target=attack.health_probe, args=(worst,)))
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=args.seconds + 60)
    peak_kb = rss_kb(server.pid, "VmHWM")
    after = request(port, "POST", "/v1/chat/completions", chat("Still there?", 4))
    server.send_signal(signal.SIGTERM)
    try:
        code = server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        code = "did not exit within 30 s of SIGTERM"

    print(f"seconds: {args.seconds:.0f}")
    print(f"idle RSS: {idle_kb / 1024:.0f} MiB, peak RSS: {peak_kb / 1024:.0f} MiB "
          f"(+{(peak_kb - idle_kb) / 1024:.0f} MiB under attack)")
    print(f"/health: slowest {worst[0] * 1000:.0f} ms, {worst[1]} probes not 200")
    for k, v in sorted(attack.statuses.items()):
        print(f"  {k}: {v}")
    print(f"a normal request afterwards: {after}; exit after SIGTERM: {code}")
    ok = after == 200 and code == 0 and worst[1] == 0 and worst[0] < 1.0
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

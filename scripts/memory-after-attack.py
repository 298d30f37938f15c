#!/usr/bin/env python3
"""What a server's memory does after an attack that made it hold all it may, and whether
what stays is ark's or the allocator's. Two cases against `ark-loopback --role server`:

- http: 8 connections send a head announcing 8 MiB and 8 MiB - 1 byte of body, then stall
  until the server's 408 (30 s);
- rudp: 50 sessions through relays that drop first fragments hold ~1.2 MB each, then vanish
  (crates/ark-rudp/examples/rudp_hold_attack.rs) and idle out (10 s).

The server's VmRSS is sampled throughout; at the end glibc's malloc_trim(0) is called in the
server through gdb: what it returns was free memory the allocator kept, not ark's.
Usage: scripts/memory-after-attack.py [http|rudp]... (builds in release first; needs gdb).
Traffic goes only to 127.0.0.1.
"""
import re
import shutil
import socket
import subprocess
import sys
import time

LOOPBACK = "target/release/ark-loopback"
PROBE = "target/release/examples/rudp_hold_attack"


def server(protocol):
    proc = subprocess.Popen([LOOPBACK, "--role", "server", "--protocol", protocol,
                             "--seconds", "300"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    line = proc.stdout.readline()
    match = re.search(r"on (\S+)", line)
    if not match:
        proc.kill()
        sys.exit(f"the server did not say where it listens: {line!r}")
    if protocol == "rudp":
        # An encrypted server (the default) says the key its clients pin next.
        key = re.search(r"rudp public key ([0-9a-f]{64})", proc.stdout.readline())
        if not key:
            proc.kill()
            sys.exit("the rudp server did not say its public key")
        return proc, [match.group(1), key.group(1)]
    return proc, match.group(1)


def rss(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return float("nan")


class Log:
    def __init__(self, case, pid):
        self.case, self.pid, self.t0 = case, pid, time.time()

    def __call__(self, what):
        print(f"{self.case} {time.time() - self.t0:6.1f} s  rss {rss(self.pid):6.1f} MiB  {what}",
              flush=True)


def trim(log):
    out = subprocess.run(["gdb", "-p", str(log.pid), "-batch", "-ex", "call (int)malloc_trim(0)"],
                         capture_output=True, text=True, timeout=60).stdout
    time.sleep(1)
    log("after malloc_trim(0) " + " ".join(l for l in out.splitlines() if l.startswith("$")))


def http():
    proc, addr = server("http")
    host, port = addr.rsplit(":", 1)
    log = Log("http", proc.pid)
    try:
        log("baseline")
        body = b"a" * (8 * 1024 * 1024 - 1)
        conns = []
        for _ in range(8):
            s = socket.create_connection((host, int(port)), timeout=45)
            s.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 8388608\r\n\r\n" + body)
            conns.append(s)
        time.sleep(1)
        log("8 bodies held")
        answers = {s.recv(64).split(b"\r\n")[0].decode() for s in conns}
        log(f"answered: {sorted(answers)}")
        for _ in range(12):
            time.sleep(1)
            log("")
        trim(log)
    finally:
        proc.kill()


def rudp():
    proc, (addr, key) = server("rudp")
    log = Log("rudp", proc.pid)
    try:
        log("baseline")
        probe = subprocess.Popen([PROBE, addr, key], stdout=subprocess.PIPE, text=True)
        while probe.poll() is None:
            time.sleep(1)
            log("sessions held")
        log(probe.stdout.read().strip())
        for _ in range(20):
            time.sleep(1)
            log("")
        trim(log)
    finally:
        proc.kill()


def main():
    if not shutil.which("gdb"):
        sys.exit("memory-after-attack.py needs gdb (scripts/setup-test-deps.sh does not install it)")
    subprocess.run(["cargo", "build", "--release", "-p", "ark-loopback",
                    "-p", "ark-rudp", "--example", "rudp_hold_attack"], check=True)
    for case in sys.argv[1:] or ["http", "rudp"]:
        {"http": http, "rudp": rudp}[case]()


if __name__ == "__main__":
    main()

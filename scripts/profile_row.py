"""One markdown row of scripts/profile-case.sh: per-message costs from `perf stat`, and the
share of samples by component from `perf report --sort sym` (kernel, then user space)."""

import json
import re
import sys
from collections import Counter

# User-space components, first match wins (symbol substrings / regexes).
COMPONENTS = [
    ("harness", r"ark_loopback::|hdrhistogram|clock_gettime|Instant|Timespec|peer_\w+_loopback::\w+::client"),
    ("ark-ws", r"ark_ws::|tungstenite"),
    ("ark-tcp", r"ark_tcp::"),
    ("ark-udp", r"ark_udp::"),
    ("ark-frame", r"ark_frame::"),
    ("reactor", r"ark_reactor::|mio::"),
    ("tokio", r"tokio::|futures"),
    ("peer code", r"ark_peers::|peer_\w+_loopback::"),
    ("libc", r"__send|recv|epoll|pthread|syscall|__libc|mem(move|cpy|set)|sendmmsg|recvmmsg"),
]


def last_json(path):
    return json.loads(open(path).read().strip().splitlines()[-1])


def stat_counters(path):
    counters = {}
    for line in open(path):
        fields = line.strip().split(",")
        if len(fields) > 3 and fields[0][:1].isdigit():
            counters[fields[2]] = float(fields[0])
    return counters


def shares(path):
    kernel, user = 0.0, Counter()
    for line in open(path):
        match = re.match(r"\s*([0-9.]+)%\s+\[(.)\]\s+(.*)", line)
        if not match:
            continue
        pct, space, symbol = float(match.group(1)), match.group(2), match.group(3)
        if space == "k":
            kernel += pct
            continue
        name = next((n for n, rx in COMPONENTS if re.search(rx, symbol)), "other")
        user[name] += pct
    return kernel, user


def main():
    label, implementation, tmp, seconds, warmup = sys.argv[1:6]
    record = last_json(f"{tmp}/stat.json")
    # The counters span warm-up and measured phase; the rate is the measured phase's.
    messages = record["roundtrips_per_second"] * (float(seconds) + float(warmup))
    counters = stat_counters(f"{tmp}/stat")
    kernel, user = shares(f"{tmp}/symbols")
    parts = ", ".join(f"{n} {v:.1f}" for n, v in user.most_common() if v >= 0.5)
    print(
        f"| {label} | {implementation} | {record['roundtrips_per_second']:,.0f} "
        f"| {counters.get('task-clock', 0) * 1000 / messages:.2f} "
        f"| {counters.get('raw_syscalls:sys_enter', 0) / messages:.2f} "
        f"| {counters.get('context-switches', 0) / messages:.3f} "
        f"| {kernel:.1f} | {sum(user.values()):.1f} | {parts} "
        f"| {last_json(f'{tmp}/record.json')['roundtrips_per_second']:,.0f} |"
    )


main()

#!/usr/bin/env python3
"""Same-run before/after of the baseline headline cases: TCP and WebSocket window 16, UDP
window 1, 1024 B and 64 B, 16 clients, shared 1 and sharded 2, 2 s each. The two
`ark-bench` binaries (built from the two commits, e.g. one in a `git worktree` with its own
CARGO_TARGET_DIR) run alternately, 3 pairs per case; prints a Markdown table of medians, the
new/old ratio of each pair (median, min–max), p99 and allocations per message.
Usage: scripts/before-after.py OLD/ark-bench NEW/ark-bench  (traffic on 127.0.0.1 only).
PAIRS=N sets the pairs per case (default 3); ONLY=TEXT keeps the cases whose label contains
TEXT (say ONLY="websocket 1024 B, 16 c, w16, shared 1"), to look again at one case."""
import json, os, subprocess, statistics, sys
OLD, NEW = sys.argv[1], sys.argv[2]
PAIRS = int(os.environ.get("PAIRS", "3"))
ONLY = os.environ.get("ONLY", "")
cases=[]
for model,threads in [("shared",1),("sharded",2)]:
    for proto,window in [("tcp",16),("udp",1),("websocket",16)]:
        for payload in [1024,64]:
            cases.append((proto,payload,window,model,threads))
def run(binary,c):
    proto,payload,window,model,threads=c
    io = ["--io-model",model,"--io-threads",str(threads)]
    cmd=[binary,"loopback","--protocol",proto,"--payload",str(payload),"--clients","16","--window",str(window),*io,"--seconds","2","--warmup","0.25"]
    out=subprocess.run(cmd,capture_output=True,text=True,timeout=60)
    d=json.loads(out.stdout.strip().splitlines()[-1])
    return d["roundtrips_per_second"], d.get("allocations_per_message"), d["rtt_p99_us"]
print("| case | old msg/s | new msg/s | new/old (min–max) | p99 new/old | allocs/msg old, new |")
print("|---|---:|---:|---|---:|---|")
def label(c):
    proto,payload,window,model,threads=c
    return f"{proto} {payload} B, 16 c, w{window}, {model} {threads}"
for c in (c for c in cases if ONLY in label(c)):
    olds,news=[],[]
    for i in range(PAIRS):
        pair=[(OLD,olds),(NEW,news)] if i%2==0 else [(NEW,news),(OLD,olds)]
        for b,acc in pair: acc.append(run(b,c))
    ratios=[n[0]/o[0] for o,n in zip(olds,news)]
    om=statistics.median(x[0] for x in olds); nm=statistics.median(x[0] for x in news)
    p99=statistics.median(x[2] for x in news)/statistics.median(x[2] for x in olds)
    al=(max(x[1] or 0 for x in olds), max(x[1] or 0 for x in news))
    print(f"| {label(c)} | {om:,.0f} | {nm:,.0f} | {statistics.median(ratios):.2f} ({min(ratios):.2f}–{max(ratios):.2f}) | {p99:.2f} | {al[0]}, {al[1]} |", flush=True)

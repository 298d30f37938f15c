#!/bin/bash
# The tokio peer's WebSocket variants (PEER_TOKIO_WS) beside ark, same flags, fresh processes,
# the order rotated per repetition (issue 48: fastwebsockets added to the libraries).
# Build first: cargo build --release -p ark-peers -p ark-bench. Run from the repository root.
# Usage: bench-harness/tuning/websocket-libraries.sh PAYLOAD SECONDS WARMUP REPETITIONS
# Output per run: repetition, variant, ok, msg/s, p50 µs, p99 µs, allocations per message,
# CPU %, commit.
T=${T:-target/release}
pl=$1; secs=$2; warm=$3; reps=$4
specs=("fastwebsockets PEER_TOKIO_WS=fastwebsockets $T/peer-tokio-loopback"
  "tungstenite PEER_TOKIO_WS=tungstenite $T/peer-tokio-loopback"
  "tokio-websockets PEER_TOKIO_WS=tokio-websockets $T/peer-tokio-loopback"
  "handwritten PEER_TOKIO_WS=handwritten $T/peer-tokio-loopback"
  "ark X=1 $T/ark-bench loopback")
n=${#specs[@]}
for r in $(seq 1 "$reps"); do
  for i in $(seq 0 $((n-1))); do
    s=(${specs[$(( (i + r - 1) % n ))]})
    line=$(env "${s[1]}" "${s[@]:2}" --protocol websocket --payload "$pl" --clients 16 --window 16 \
      --seconds "$secs" --warmup "$warm" 2>/dev/null | tail -1)
    echo "$r ${s[0]} $(echo "$line" | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["ok"], int(r["roundtrips_per_second"]), r["rtt_p50_us"], r["rtt_p99_us"], round(r["allocations_per_message"],3), round(r["cpu_percent"]), r["git_commit"][:7])')"
  done
done

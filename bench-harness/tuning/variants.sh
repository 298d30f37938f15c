#!/bin/bash
# Tuning log runs: same flags, fresh processes, order rotated per repetition.
# OLD: peer-tokio-loopback built from commit 0acc79d (git worktree add /tmp/old 0acc79d; cargo build --release -p bench-harness there: the package of the peers then);
# NEW: cargo build --release -p ark-peers (and -p ark-loopback) here.
OLD=${OLD:-/work/notes/bin/peer-tokio-loopback-0acc79d}
T=${T:-target/release}
run() { # tag env binary flags...
  local tag=$1 envv=$2 bin=$3; shift 3
  line=$(env $envv $bin "$@" --payload 1024 --clients 16 --io-model shared --io-threads 1 --seconds 2 --warmup 0.5 2>/dev/null | tail -1)
  echo "$tag $(echo "$line" | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["ok"], int(r["roundtrips_per_second"]), r["rtt_p99_us"], round(r["allocations_per_message"],3), r["git_commit"][:7])')"
}
for r in 1 2 3; do
  specs=("ws-old X=1 $OLD" "ws-handwritten PEER_TOKIO_WS=handwritten $T/peer-tokio-loopback" "ws-tungstenite PEER_TOKIO_WS=tungstenite $T/peer-tokio-loopback" "ws-tokio-websockets PEER_TOKIO_WS=tokio-websockets $T/peer-tokio-loopback" "ws-ark X=1 $T/ark-loopback")
  n=${#specs[@]}
  for i in $(seq 0 $((n-1))); do
    s=(${specs[$(( (i + r - 1) % n ))]})
    echo "$r $(run ${s[0]} ${s[1]} ${s[2]} --protocol websocket --window 16)"
  done
  specs=("udp-old X=1 $OLD" "udp-new X=1 $T/peer-tokio-loopback" "udp-raw X=1 $T/peer-raw-loopback")
  for i in 0 1 2; do
    s=(${specs[$(( (i + r - 1) % 3 ))]})
    echo "$r $(run ${s[0]} ${s[1]} ${s[2]} --protocol udp --window 1)"
  done
done

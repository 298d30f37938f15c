#!/bin/bash
# OLD: peer-tokio-loopback built from commit 0acc79d (git worktree add /tmp/old 0acc79d; cargo build --release -p bench-harness there: the package of the peers then);
# NEW: cargo build --release -p ark-peers (and -p ark-loopback) here.
OLD=${OLD:-/work/notes/bin/peer-tokio-loopback-0acc79d}
NEW=${NEW:-target/release/peer-tokio-loopback}
for r in 1 2 3 4 5 6; do
  if [ $((r%2)) = 1 ]; then order="$OLD $NEW"; else order="$NEW $OLD"; fi
  for b in $order; do
    tag=new; [ $b = $OLD ] && tag=old
    line=$($b --protocol tcp --payload 1024 --clients 16 --window 16 --io-model shared --io-threads 1 --seconds 2 --warmup 0.5 2>/dev/null | tail -1)
    echo "$r $tag $(echo "$line" | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["ok"], int(r["roundtrips_per_second"]), r["rtt_p99_us"], r["git_commit"][:7])')"
  done
done

#!/usr/bin/env bash
# Where one loopback case spends its time, ark against the tokio program (and the raw floor):
# for each implementation one run under `perf stat` (CPU time, syscalls and context switches,
# per message) and one under `perf record` (the share of samples in the kernel and in user
# space, and user space by component). Prints one markdown table row per implementation.
#   scripts/profile-case.sh "label" --protocol websocket --payload 64 --clients 16 --window 16
# Needs perf (linux-perf) with access to the tracepoint raw_syscalls:sys_enter, and the release
# binaries (cargo build --release -p ark-peers -p ark-loopback). SECONDS_PER_RUN (default 3)
# sets each run's measured phase; IMPLEMENTATIONS (default "ark tokio raw") which programs run.
set -euo pipefail
cd "$(dirname "$0")/.."
label="$1"
shift
seconds="${SECONDS_PER_RUN:-3}"
warmup=0.25
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for implementation in ${IMPLEMENTATIONS:-ark tokio raw}; do
    case "$implementation" in
        ark) program=target/release/ark-loopback ;;
        *) program="target/release/peer-$implementation-loopback" ;;
    esac
    perf stat -x, -o "$tmp/stat" -e raw_syscalls:sys_enter,context-switches,task-clock \
        "$program" "$@" --seconds "$seconds" --warmup "$warmup" >"$tmp/stat.json" 2>/dev/null
    perf record -q -o "$tmp/perf.data" "$program" "$@" --seconds "$seconds" --warmup "$warmup" \
        >"$tmp/record.json" 2>/dev/null
    perf report -i "$tmp/perf.data" --no-children --sort sym -q -g none 2>/dev/null >"$tmp/symbols"
    python3 scripts/profile_row.py "$label" "$implementation" "$tmp" "$seconds" "$warmup"
done

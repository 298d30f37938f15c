#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 60) with cargo-fuzz on the installed nightly
# toolchain, debug assertions on, and prints the executions per target. Installs cargo-fuzz
# (from crates.io) when it is missing. Exits non-zero on any crash. Every target builds into
# one target directory (target/fuzz), so the standard library (-Zbuild-std), libfuzzer and the
# ark crates the targets share are compiled once, not once per fuzz crate.
#   scripts/fuzz.sh 60        # the bounded run
#   scripts/fuzz.sh 20        # the CI smoke (targets keep building and run clean)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
target_dir="$PWD/target/fuzz"
targets=(
    "crates/ark-frame/fuzz frame_reader"
    "crates/ark-tcp/fuzz session"
    "crates/ark-ws/fuzz server_frames"
    "crates/ark-http/fuzz request_decoder"
    "crates/ark-rudp/fuzz datagrams"
)
if ! rustc +nightly --version >/dev/null 2>&1; then
    echo "fuzz: WARNING: no nightly toolchain on this machine; fuzz targets NOT run" >&2
    exit 0
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install --locked --quiet cargo-fuzz
fi
# Build every target first, then run them two at a time (each fuzzer is one process on one
# core): the run takes about half the wall time of one after the other.
for entry in "${targets[@]}"; do
    read -r dir target <<<"$entry"
    echo "== fuzz build $dir $target"
    (cd "$dir" && cargo +nightly fuzz build --debug-assertions --target-dir "$target_dir" "$target")
done
logs=$(mktemp -d)
run_one() {
    local dir=$1 target=$2
    (cd "$dir" && cargo +nightly fuzz run --debug-assertions --target-dir "$target_dir" "$target" -- \
        -max_total_time="$seconds" -print_final_stats=1) >"$logs/$target.log" 2>&1
}
declare -A pids
for entry in "${targets[@]}"; do
    read -r dir target <<<"$entry"
    while [ "$(jobs -rp | wc -l)" -ge 2 ]; do
        wait -n || true
    done
    echo "== fuzz $dir $target (${seconds}s)"
    run_one "$dir" "$target" &
    pids[$target]=$!
done
failed=0
summary=()
for entry in "${targets[@]}"; do
    read -r dir target <<<"$entry"
    if ! wait "${pids[$target]}"; then
        tail -n 60 "$logs/$target.log"
        echo "fuzz: $target FAILED (crash input under $dir/artifacts/$target)" >&2
        failed=1
        continue
    fi
    runs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$logs/$target.log" | grep -o '[0-9]*$' || echo "?")
    summary+=("$target: $runs executions in ${seconds}s")
done
rm -rf "$logs"
printf 'fuzz: %s\n' "${summary[@]}"
exit "$failed"

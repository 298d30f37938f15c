#!/usr/bin/env bash
# On-demand soak test: ark's TCP, UDP, WebSocket, HTTP and reliable-UDP echo servers in one
# process, driven for MINUTES (default 10) by well-behaved clients and bad actors (listed in
# bench-harness/soak/src/main.rs), with its memory and descriptors watched. Prints one
# JSON summary line; exit code 1 (reasons on stderr) on any failure.
# Usage: scripts/soak.sh [MINUTES]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p ark-soak
target/release/ark-soak run --minutes "${1:-10}"

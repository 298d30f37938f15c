#!/usr/bin/env bash
# The project's test command (README.md): every crate's tests, in release mode.
# Extra arguments go to `cargo test` (e.g. `scripts/test.sh -p ark-frame`).
set -euo pipefail
cd "$(dirname "$0")/.."
# Python's websockets library, the independent client of ark-ws's interop test.
bash scripts/setup-test-deps.sh
cargo test --workspace --release "$@"

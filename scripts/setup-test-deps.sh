#!/usr/bin/env bash
# Installs what the tests need beyond the Rust toolchain: Python's `websockets` library, the
# independent WebSocket client of ark-ws's interop test. Idempotent; called from .ci/run.
set -euo pipefail
if python3 -c 'import websockets' 2>/dev/null; then
    exit 0
fi
python3 -m pip install --quiet --disable-pip-version-check 'websockets>=12,<18'
python3 -c 'import websockets; print("websockets", websockets.__version__)'

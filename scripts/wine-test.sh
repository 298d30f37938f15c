#!/usr/bin/env bash
# Windows for real: the tests of ark-frame, -reactor, -tcp, -udp, -ws, -tls, -http and -rudp
# cross-compiled for x86_64-pc-windows-gnu (mingw-w64) and run under Wine, and ark-loopback.exe
# run over TCP, UDP, WebSocket and reliable UDP. What Wine cannot run as is, and why, is in
# scripts/wine/limitations.txt (each limitation shown on mio or std alone by a probe that must
# fail under Wine); everything else must pass. Called by scripts/test.sh; needs wine and
# mingw-w64 (scripts/setup-test-deps.sh installs them).
# Debug build (shorter to build than release; the tests of the Linux stages run in both).
set -euo pipefail
cd "$(dirname "$0")/.."
target=x86_64-pc-windows-gnu
for tool in wine x86_64-w64-mingw32-gcc python3; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "wine-test.sh needs $tool: run scripts/setup-test-deps.sh (it installs wine and mingw-w64)" >&2
        exit 1
    fi
done
out="${CARGO_TARGET_DIR:-target}/wine"
mkdir -p "$out"
export WINEPREFIX="$PWD/$out/prefix" WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
if [ ! -f "$WINEPREFIX/system.reg" ]; then
    wineboot --init >/dev/null 2>&1 || true
    wineserver -w || true
fi
# Rust >= 1.78 programs import bcryptprimitives.dll (ProcessPrng), which Wine 8.0 lacks.
system32="$WINEPREFIX/drive_c/windows/system32"
if [ ! -e "$system32/bcryptprimitives.dll" ]; then
    x86_64-w64-mingw32-gcc -O2 -shared -o "$out/bcryptprimitives.dll" \
        scripts/wine/bcryptprimitives.c -ladvapi32
    cp "$out/bcryptprimitives.dll" "$system32/"
fi
wine --version

echo "== Windows test binaries (x86_64-pc-windows-gnu) [${SECONDS}s]"
packages=(-p ark-frame -p ark-reactor -p ark-tcp -p ark-udp -p ark-ws -p ark-tls -p ark-http -p ark-rudp)
features=ark-tcp/tls,ark-ws/tls,ark-http/tls,ark-http/json,ark-ws/http,ark-ws/deflate
cargo test --target "$target" --no-run "${packages[@]}" --features "$features" \
    --message-format=json-render-diagnostics > "$out/artifacts.jsonl"
cargo build --target "$target" -p ark-loopback

echo "== the tests under Wine [${SECONDS}s]"
status=0
python3 scripts/wine/run_tests.py "$out/artifacts.jsonl" scripts/wine/limitations.txt \
    "$out/summary.json" || status=1

echo "== ark-loopback.exe under Wine [${SECONDS}s]"
loopback="${CARGO_TARGET_DIR:-target}/$target/debug/ark-loopback.exe"
# The four transports, and a rate-limited session (a timer's turn reads on Windows too).
for case in "tcp" "udp" "websocket" "rudp" "tcp --rate-limit 200000"; do
    # shellcheck disable=SC2086 # the case's words are flags
    record=$(timeout 120 wine "$loopback" --protocol $case --clients 4 --window 4 \
        --payload 256 --seconds 1 --warmup 0.2 2>/dev/null | tail -n 1 || true)
    verdict=$(python3 -c 'import json,sys
try:
    r = json.loads(sys.argv[1])
    print("ok" if r.get("ok") is True else "not ok: %s" % r.get("error"), r.get("messages"), "messages,", r.get("io_path"), "path")
except Exception:
    print("no record")' "$record")
    echo "ark-loopback.exe --protocol $case: $verdict"
    case "$verdict" in ok*) ;; *) status=1 ;; esac
done
wineserver -k || true
echo "== wine-test.sh done [${SECONDS}s]"
exit "$status"

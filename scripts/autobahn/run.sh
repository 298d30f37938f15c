#!/usr/bin/env bash
# The Autobahn|Testsuite against ark-ws: the fuzzing client against ark-ws's servers — messages
# kept (`on_message`), lent (`on_data`) and a WebSocket route of an ark-http server — and the fuzzing server against ark-ws's client
# (ark-ws-client); every server and the client with permessage-deflate on (sections 12 and 13
# offer it, the others do not). Red on any case whose verdict, or its close's, is not OK
# (INFORMATIONAL allowed). Reports under target/autobahn/<agent>/, and target/autobahn/summary.md
# (sections × verdicts per agent: the table in docs/ws.md). Agents: ark-ws-owned, ark-ws-lent,
# ark-http-route, ark-ws-client.
#
#   scripts/autobahn/run.sh        CI (scripts/test.sh, after the release tests, whose build it
#                                  reuses): sections 1-11 (301 cases) for every agent, and of
#                                  sections 12-13 (compression) the cases with the 8 smallest
#                                  message sizes of each group (x.y.1-8, x.y.11-12: 120 cases)
#                                  for ark-ws-owned, ark-http-route and ark-ws-client. ~2 min.
#   scripts/autobahn/run.sh full   all 517 cases for every agent (~12 min on 2 cores: wstest,
#                                  Python 2, is the slow side; sections 12-13 send up to 1,000
#                                  messages of up to 128 KiB per case).
#
# The three wstest runs go in parallel. `wstest` (Python 2.7) is installed by
# scripts/autobahn/install-wstest.sh, which scripts/setup-test-deps.sh runs. Loopback only.
set -euo pipefail
cd "$(dirname "$0")/../.."
mode="${1:-ci}"
prefix="${ARK_AUTOBAHN_PREFIX:-/opt/ark-autobahn}"
wstest="$prefix/venv/bin/wstest"
if [ ! -x "$wstest" ]; then
    echo "no wstest at $wstest: scripts/setup-test-deps.sh installs it (scripts/autobahn/install-wstest.sh)" >&2
    exit 1
fi
features=ark-http/json,ark-ws/http,ark-ws/deflate
cargo build --release --workspace --features "$features" --example autobahn
bin="$(pwd)/${CARGO_TARGET_DIR:-target}/release/examples/autobahn"
out="${CARGO_TARGET_DIR:-target}/autobahn"
rm -rf "$out" && mkdir -p "$out"
port=${ARK_AUTOBAHN_PORT:-9301}
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT

case "$mode" in
    full) plain='"*"'; compressed='"*"'; compressed_agents="ws-owned ws-lent http-route client" ;;
    ci)
        plain='"1.*", "2.*", "3.*", "4.*", "5.*", "6.*", "7.*", "9.*", "10.*"'
        compressed=""
        for group in 12.1 12.2 12.3 12.4 12.5 13.1 13.2 13.3 13.4 13.5 13.6 13.7; do
            for n in 1 2 3 4 5 6 7 8 11 12; do compressed="$compressed\"$group.$n\", "; done
        done
        compressed="${compressed%, }"
        compressed_agents="ws-owned http-route client"
        ;;
    *) echo "usage: scripts/autobahn/run.sh [ci|full]" >&2; exit 2 ;;
esac
cases_of() { # the case list of agent $1
    if [[ " $compressed_agents " == *" $1 "* ]]; then echo "$plain, $compressed"; else echo "$plain"; fi
}

# The servers, kept running on a pipe: closing it stops them.
mkfifo "$out/stdin"
"$bin" servers "$port" < "$out/stdin" > "$out/servers.log" 2>&1 &
pids+=($!)
exec 3> "$out/stdin"
for _ in $(seq 100); do grep -q ready "$out/servers.log" && break; sleep 0.1; done
grep -q ready "$out/servers.log" || { cat "$out/servers.log" >&2; exit 1; }

# One fuzzing client per agent group: owned and lent together, the route alone.
fuzz_servers() { # name, then agent:port pairs
    local name=$1; shift
    local dir="$out/$name" servers="" agent
    mkdir -p "$dir"
    for pair in "$@"; do
        agent=${pair%%:*}
        servers="$servers{\"agent\": \"ark-$agent\", \"url\": \"ws://127.0.0.1:${pair##*:}/\"},"
    done
    # Per-agent case lists: exclude-agent-cases is a blacklist, so run the union and drop.
    cat > "$dir/spec.json" <<JSON
{"outdir": "reports", "servers": [${servers%,}],
 "cases": [$(cases_of "${1%%:*}")], "exclude-cases": [], "exclude-agent-cases": {}}
JSON
    (cd "$dir" && "$wstest" -m fuzzingclient -s spec.json > wstest.log 2>&1)
}
echo "== autobahn ($mode): fuzzing clients against ark-ws's servers, fuzzing server against its client [${SECONDS}s]"
fuzz_servers servers-owned "ws-owned:$port" & p1=$!
fuzz_servers servers-route "http-route:$((port + 2))" & p2=$!
fuzz_servers servers-lent "ws-lent:$((port + 1))" & p3=$!

mkdir -p "$out/client"
cat > "$out/client/spec.json" <<JSON
{"url": "ws://127.0.0.1:$((port + 3))", "outdir": "reports",
 "cases": [$(cases_of client)], "exclude-cases": [], "exclude-agent-cases": {}}
JSON
(cd "$out/client" && exec "$wstest" -m fuzzingserver -s spec.json --webport 0 > wstest.log 2>&1) &
pids+=($!)
for _ in $(seq 100); do
    python3 -c "import socket; socket.create_connection(('127.0.0.1', $((port + 3))), 1)" 2>/dev/null && break
    sleep 0.2
done
status=0
"$bin" client "ws://127.0.0.1:$((port + 3))" ark-ws-client > "$out/client/client.log" 2>&1 \
    || { tail -20 "$out/client/client.log" >&2; status=1; }
for p in $p1 $p2 $p3; do wait "$p" || status=1; done
exec 3>&-
[ "$status" = 0 ] || { tail -5 "$out"/*/wstest.log >&2; exit 1; }
echo "== autobahn verdicts [${SECONDS}s]"
python3 scripts/autobahn/verdicts.py "$out"/*/reports/index.json > "$out/summary.md" || status=$?
cat "$out/summary.md"
exit $status

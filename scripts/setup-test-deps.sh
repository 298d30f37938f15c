#!/usr/bin/env bash
# Installs what the tests need beyond the Rust toolchain. Idempotent; called from
# scripts/test.sh (which .ci/run runs):
#   - Python's `websockets` library: the independent WebSocket client of ark-ws's interop
#     tests (ws and wss);
#   - Debian's `openssl` (and `ca-certificates`, the system CAs a wss:// client without a TLS
#     config trusts): `openssl s_client` / `s_server` are the independent TLS peers of the
#     tcps interop tests. Python's `ssl` and `http.client` come with python3;
#   - Debian's `curl`: the independent HTTP client of ark-http's interop tests;
#   - Debian's `iproute2`: `ss`, which reads a listener's backlog back from the kernel for the
#     builders' accept-limit tests (ark_testkit::listen_backlog_of);
#   - Debian's `wrk`: the independent HTTP load generator of `ark-bench run` cases with
#     `load_generator = "wrk"` (and of their test in bench-harness/ark-bench);
#   - the Rust standard library of macOS (Apple silicon), Windows (MSVC) and FreeBSD, for
#     test.sh's `cargo check --target` of the crates there (rustup, from static.rust-lang.org);
#   - the Autobahn|Testsuite's `wstest` (Python 2.7, under /opt/ark-autobahn) for
#     scripts/autobahn/run.sh: scripts/autobahn/install-wstest.sh, which takes Python 2.7 from
#     Debian 11's archive (Debian 12 has none) and the suite's pinned packages from PyPI;
#   - Windows for real (scripts/wine-test.sh): Debian's `wine` and `wine64` (Wine 8.0 on
#     Debian 12) to run the tests, `gcc-mingw-w64-x86-64` to link them (and to build ring's C
#     and the bcryptprimitives stand-in), and Rust's x86_64-pc-windows-gnu standard library.
set -euo pipefail
if ! command -v openssl >/dev/null 2>&1 || ! command -v curl >/dev/null 2>&1 \
    || ! command -v wrk >/dev/null 2>&1 || ! command -v ss >/dev/null 2>&1 \
    || [ ! -s /etc/ssl/certs/ca-certificates.crt ] \
    || ! command -v wine >/dev/null 2>&1 || ! command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1; then
    SUDO=""
    if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
        openssl ca-certificates curl wrk iproute2 wine wine64 gcc-mingw-w64-x86-64 >/dev/null
fi
wine --version
openssl version
curl --version | head -n 1
ss -V
wrk -v 2>&1 | head -n 1 || true
if ! python3 -c 'import websockets' 2>/dev/null; then
    python3 -m pip install --quiet --disable-pip-version-check 'websockets>=12,<18'
fi
python3 -c 'import ssl, websockets; print("websockets", websockets.__version__, "/", ssl.OPENSSL_VERSION)'
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
$SUDO bash "$(dirname "$0")/autobahn/install-wstest.sh" "${ARK_AUTOBAHN_PREFIX:-/opt/ark-autobahn}"
cross_targets=(aarch64-apple-darwin x86_64-pc-windows-msvc x86_64-unknown-freebsd x86_64-pc-windows-gnu)
installed=$(rustup target list --installed)
for target in "${cross_targets[@]}"; do
    if ! grep -qx "$target" <<<"$installed"; then
        rustup target add "$target" || {
            echo "rustup target add $target failed: scripts/test.sh type-checks the crates for it" >&2
            exit 1
        }
    fi
done

#!/usr/bin/env bash
# The project's test command (README.md): every crate's tests in release mode, with the
# criterion microbenchmarks run once each as tests (so they cannot rot) in the same build, and
# the doc tests; the Autobahn|Testsuite against ark-ws's servers and client with
# permessage-deflate on (scripts/autobahn/run.sh, on that build); the transport crates' tests
# again in a debug build (debug assertions on, so a
# `debug_assert` in a dependency cannot hide; with the `tracing` features on, where the release
# run has them off) without the `tls` feature of ark-tcp, ark-ws and ark-http (the build a
# plain-TCP user compiles: checked to pull in no crypto); the same tests on the portable IO
# path (`ARK_PORTABLE=1`) with `tls` on, and ark-loopback's CLI tests there; `cargo package` of
# every library crate and `cargo doc -D warnings`; `cargo check` for macOS, Windows and
# FreeBSD; the transport crates' tests cross-compiled for Windows (x86_64-pc-windows-gnu) and
# run under Wine, with ark-loopback.exe (scripts/wine-test.sh); a short smoke run of every fuzz
# target.
# Every configuration runs once in debug: the Linux path without tls, the portable path with
# it (its TLS code is the same on both paths and runs with debug assertions there); the release
# run covers the Linux path with tls.
# Extra arguments go to the release `cargo test` (e.g. `scripts/test.sh -p ark-frame`); with
# arguments, only that run is made.
set -euo pipefail
cd "$(dirname "$0")/.."
# The independent peers of the interop tests: Python's websockets, openssl (apt).
bash scripts/setup-test-deps.sh
if [ "$#" -eq 0 ]; then
    # ark-http's `json` and ark-ws's `http` features: their examples and tests. Every target
    # but the examples (which the tests that run them include by path, and which clippy and
    # the debug build compile): the benches too, run once each, with the features and so the
    # build of the rest; then the doc tests.
    release=(--workspace --release --features ark-http/json,ark-ws/http,ark-ws/deflate)
    cargo test "${release[@]}" --lib --bins --tests --benches
    echo "== doc tests [${SECONDS}s]"
    cargo test "${release[@]}" --doc
    echo "== Autobahn|Testsuite: ark-ws's servers and client, plain and compressed [${SECONDS}s]"
    bash scripts/autobahn/run.sh
else
    cargo test --workspace --release "$@"
fi
if [ "$#" -eq 0 ]; then
    echo "== debug build: transport crates (debug assertions on), without tls [${SECONDS}s]"
    if cargo tree -p ark-tcp -p ark-ws -p ark-http -e normal | grep -E '(rustls|ring) v'; then
        echo "the tls-less build of ark-tcp, ark-ws and ark-http pulls in crypto (above)" >&2
        exit 1
    fi
    debug_features=ark-http/json,ark-ws/http,ark-http/tracing,ark-ws/tracing,ark-rudp/tracing
    if cargo tree -p ark-reactor -p ark-tcp -p ark-udp -p ark-ws -p ark-http -p ark-link -p ark-rudp \
        -e features,normal,dev --features "$debug_features" -i ark-tcp | grep -E 'ark-(tcp|ws|http) feature "tls"'; then
        echo "the debug stage's build turns tls on (above): it is meant to test the build without it" >&2
        exit 1
    fi
    cargo test -p ark-reactor -p ark-tcp -p ark-udp -p ark-ws -p ark-http -p ark-link -p ark-rudp \
        --features "$debug_features"
    # ark-ws without `deflate` (the release run and .ci/run's clippy have it on through
    # ark-loopback): its tests ran above; its lints here.
    cargo clippy -p ark-ws --all-targets --features http -- -D warnings
    echo "== features that explain themselves: the compiler's message without them [${SECONDS}s]"
    # Without ark-http's `json` and ark-ws's `http` (the runs above have them on): a call of
    # what they gate fails to compile naming the feature (trybuild, the messages pinned in
    # tests/ui/*.stderr).
    cargo test -p ark-http -p ark-ws --test features
    echo "== the architecture as written: docs/architecture.md against Cargo.toml, sans-IO cores [${SECONDS}s]"
    python3 scripts/check-architecture.py
    python3 scripts/check-proto-imports.py
    echo "== publishing: MSRV, cargo package of every library crate, cargo doc -D warnings [${SECONDS}s]"
    # The MSRV (workspace rust-version) is the pinned toolchain, so every build here checks it;
    # they must not drift apart.
    msrv=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)
    pinned=$(sed -n 's/^channel = "\([0-9]*\.[0-9]*\).*"/\1/p' rust-toolchain.toml)
    if [ "$msrv" != "$pinned" ]; then
        echo "rust-version $msrv (Cargo.toml) is not the pinned toolchain $pinned (rust-toolchain.toml)" >&2
        exit 1
    fi
    libraries=(-p ark-frame -p ark-reactor -p ark-tls -p ark-tcp -p ark-udp -p ark-ws -p ark-http
        -p ark-rudp -p ark-link -p ark-loopback)
    # In dependency order, each verified against the packages before it (a local registry).
    # cargo verifies each package against the ones before it through a local registry whose
    # sources it unpacks into CARGO_HOME once per registry path and version, and never again:
    # a second run from the same checkout path would build against the first run's sources.
    # Only ark's own unpacked copies (in those local registries, named `-<hash>`) are removed.
    rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/ark-*
    cargo package --all-features "${libraries[@]}"
    RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --all-features "${libraries[@]}" -p ark-testkit
    echo "== portable IO path (ARK_PORTABLE=1: cfg ark_portable), with tls: transport tests, ark-loopback's CLI smoke [${SECONDS}s]"
    # What macOS, Windows and the BSDs run, forced on Linux. ark-reactor's and ark-udp's build
    # scripts set the cfg from ARK_PORTABLE, so only the ark crates rebuild here: every
    # dependency is the debug stage's (`RUSTFLAGS="--cfg ark_portable"` would rebuild them all
    # in a target dir of their own).
    ARK_PORTABLE=1 cargo test \
        -p ark-reactor -p ark-tcp -p ark-udp -p ark-ws -p ark-tls -p ark-http -p ark-link -p ark-rudp \
        --features ark-tcp/tls,ark-ws/tls,ark-http/tls,ark-ws/deflate
    ARK_PORTABLE=1 cargo test -p ark-loopback --test cli
    echo "== Windows under Wine: the transport crates' tests and ark-loopback.exe [${SECONDS}s]"
    bash scripts/wine-test.sh
    echo "== type-checked where it is not run: macOS, Windows (MSVC), FreeBSD [${SECONDS}s]"
    # No toolchain here links or runs for them; `cargo check` compiles every cfg they take.
    # ring (ark-tls, ark-rudp's cookies) needs the target's C headers: macOS and Windows check
    # the crates without it, FreeBSD (whose headers the host's gcc accepts) all of them.
    for target in aarch64-apple-darwin x86_64-pc-windows-msvc; do
        CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/cross" cargo check --target "$target" \
            -p ark-frame -p ark-reactor -p ark-tcp -p ark-udp -p ark-ws -p ark-http -p ark-link
    done
    CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/cross" cargo check --target x86_64-unknown-freebsd \
        "${libraries[@]}" --features ark-tcp/tls,ark-ws/tls,ark-http/tls
    echo "== fuzz smoke [${SECONDS}s]"
    bash scripts/fuzz.sh 20
    echo "== test.sh done [${SECONDS}s]"
fi

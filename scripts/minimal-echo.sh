#!/usr/bin/env bash
# What a user of plain TCP pays to compile: the same length-prefixed echo server (4-byte
# big-endian length, then the body, answered as it came) written on ark-tcp without and with its
# `tls` feature, and on tokio (current-thread runtime, `net` + `io-util`, no macros: the leanest
# tokio build of it). Each is a package of its own outside the workspace, built cold in a target
# dir of its own with the default release profile (the registry sources already downloaded);
# prints one Markdown row each: crates compiled, cold build seconds, binary bytes.
# Usage: scripts/minimal-echo.sh [WORK_DIR]   (default: a new temporary directory, removed after)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="${1:-}"
if [ -z "$work" ]; then
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
fi
toolchain="$(sed -n 's/^channel = "\(.*\)"/\1/p' "$repo/rust-toolchain.toml")"

write_package() { # name, dependency lines, main.rs
    mkdir -p "$work/$1/src"
    printf '[package]\nname = "%s"\nversion = "0.0.0"\nedition = "2024"\n\n[dependencies]\n%s\n\n[workspace]\n' \
        "$1" "$2" >"$work/$1/Cargo.toml"
    printf '%s\n' "$3" >"$work/$1/src/main.rs"
    printf '[toolchain]\nchannel = "%s"\n' "$toolchain" >"$work/$1/rust-toolchain.toml"
}

ark_main='use ark_tcp::{TcpHandler, TcpServer, TcpSession};

struct Echo;
impl TcpHandler for Echo {
    fn on_message(&mut self, session: &mut TcpSession<'"'"'_>, message: &[u8]) {
        let _ = session.send(message);
    }
}

fn main() -> std::io::Result<()> {
    let _server = TcpServer::builder().bind("127.0.0.1:7000").start(|_| Echo)?;
    loop {
        std::thread::park();
    }
}'

tokio_main='use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn echo(mut stream: tokio::net::TcpStream) -> std::io::Result<()> {
    let mut body = Vec::new();
    loop {
        let len = stream.read_u32().await? as usize;
        body.resize(len, 0);
        stream.read_exact(&mut body).await?;
        stream.write_u32(len as u32).await?;
        stream.write_all(&body).await?;
    }
}

fn main() -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_io().build()?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:7000").await?;
        loop {
            let (stream, _) = listener.accept().await?;
            tokio::spawn(echo(stream));
        }
    })
}'

tokio_version="$(sed -n 's/^tokio = { version = "\([^"]*\)".*/\1/p' "$repo/Cargo.toml")"
write_package echo-ark "ark-tcp = { path = \"$repo/crates/ark-tcp\" }" "$ark_main"
write_package echo-ark-tls "ark-tcp = { path = \"$repo/crates/ark-tcp\", features = [\"tls\"] }" "$ark_main"
write_package echo-tokio "tokio = { version = \"$tokio_version\", default-features = false, features = [\"rt\", \"net\", \"io-util\"] }" "$tokio_main"

echo "| program | crates compiled | cold build (s) | binary (bytes) |"
echo "|---|---:|---:|---:|"
for name in echo-ark echo-ark-tls echo-tokio; do
    (cd "$work/$name" && cargo fetch -q)
    start=$(date +%s.%N)
    (cd "$work/$name" && cargo build --release --color never 2>"$work/$name.log")
    end=$(date +%s.%N)
    crates=$(grep -c '^ *Compiling ' "$work/$name.log")
    bytes=$(stat -c %s "$work/$name/target/release/$name")
    printf '| %s | %d | %.1f | %d |\n' "$name" "$crates" "$(echo "$end - $start" | bc)" "$bytes"
done

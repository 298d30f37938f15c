"""The sans-IO boundary, checked (test.sh runs it): no file of a crate's protocol core
(`src/proto.rs`, `src/proto/**`) names its crate's driver (`crate::driver`, `super::driver`)
or a socket or poller (`mio`, `socket2`, `std::net::{TcpStream, TcpListener, UdpSocket}`).
Known exceptions are listed below with the reason and the issue that removes them; a new
one, or a listed one that is gone (then delete it here), fails the check.

Usage: python3 scripts/check-proto-imports.py [ROOT]
"""
import re
import sys
from pathlib import Path

FORBIDDEN = re.compile(
    r"\b(crate::driver|super::driver|super::super::driver|mio::|socket2::|use mio\b|use socket2\b"
    r"|std::net::(?:\{[^}]*\b(?:TcpStream|TcpListener|UdpSocket)\b|TcpStream|TcpListener|UdpSocket))"
)

# (file, the import) -> why it is still there.
KNOWN: dict[tuple[str, str], str] = {}


def main(root: Path) -> int:
    found = set()
    bad = []
    for proto in sorted(root.glob("crates/*/src/proto.rs")) + sorted(root.glob("crates/*/src/proto/**/*.rs")):
        rel = proto.relative_to(root).as_posix()
        for number, line in enumerate(proto.read_text().splitlines(), 1):
            code = line.split("//", 1)[0]
            for match in FORBIDDEN.finditer(code):
                name = match.group(1).rstrip(":")
                key = (rel, name)
                if key in KNOWN:
                    found.add(key)
                else:
                    bad.append(f"{rel}:{number}: {line.strip()}")
    for key in sorted(set(KNOWN) - found):
        bad.append(f"{key[0]}: no longer imports {key[1]}: remove it from KNOWN in {Path(__file__).name}")
    for line in bad:
        print(line)
    if bad:
        print("a protocol core names its driver or a socket (above): sans-IO cores take bytes and time only")
        return 1
    print(f"protocol cores: no driver or socket imports ({len(found)} known, listed with their issue)")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else ".")))

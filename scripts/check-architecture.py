"""Checks docs/architecture.md's table of crates against the Cargo.toml files (test.sh runs it):
every crate of the workspace has a row; every normal dependency of a crate is named in its
row (`name`), an optional one with the feature that turns it on; every crate the row names is
a dependency; the `published` column says what `publish` does. Exits 1 listing each drift.

Usage: python3 scripts/check-architecture.py [ROOT]
"""
import re
import sys
import tomllib
from pathlib import Path

# What a row may say in words instead of naming each crate.
WORDS = {
    "the transports": {"ark-tcp", "ark-udp", "ark-ws", "ark-http", "ark-rudp", "ark-tls"},
}


def rows(doc: str):
    """The table's rows: crate name -> (dependency cell, published cell)."""
    table = {}
    for line in doc.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`ark-"):
            table[re.match(r"`([^`]+)`", cells[0]).group(1)] = (cells[1], cells[2])
    return table


def dependencies(manifest: dict):
    """Normal dependencies, a target's included: name -> the features that turn it on
    (empty: always)."""
    deps = {}
    tables = [manifest.get("dependencies", {})]
    tables += [t.get("dependencies", {}) for t in manifest.get("target", {}).values()]
    for name, spec in [item for table in tables for item in table.items()]:
        optional = isinstance(spec, dict) and spec.get("optional", False)
        deps[name] = set()
        if optional:
            for feature, enables in manifest.get("features", {}).items():
                if f"dep:{name}" in enables or name in enables:
                    deps[name].add(feature)
    return deps


def main(root: Path) -> int:
    workspace = tomllib.loads((root / "Cargo.toml").read_text())
    table = rows((root / "docs/architecture.md").read_text())
    drift = []
    for member in workspace["workspace"]["members"]:
        manifest = tomllib.loads((root / member / "Cargo.toml").read_text())
        name = manifest["package"]["name"]
        if name not in table:
            drift.append(f"{name}: no row in docs/architecture.md's table")
            continue
        cell, published = table[name]
        named = set(re.findall(r"`([a-z0-9_-]+)`", cell))
        for words, crates in WORDS.items():
            if words in cell:
                named |= crates
        deps = dependencies(manifest)
        for dep, features in sorted(deps.items()):
            if dep not in named:
                drift.append(f"{name}: depends on {dep}, which its row does not name")
            elif features and not any(f"`{f}`" in cell for f in features):
                drift.append(f"{name}: {dep} comes with the feature {sorted(features)}, which its row does not say")
        words_crates = set().union(*(c for w, c in WORDS.items() if w in cell)) if any(w in cell for w in WORDS) else set()
        features = set(manifest.get("features", {}))
        for other in sorted(named - set(deps) - features - words_crates):
            drift.append(f"{name}: its row names {other}, which is not among its dependencies")
        publish = manifest["package"].get("publish", True)
        if (publish is not False) != published.startswith("yes"):
            drift.append(f"{name}: published is '{published}' in the table, publish = {publish} in Cargo.toml")
    for line in drift:
        print(line)
    if drift:
        print(f"docs/architecture.md has drifted from the Cargo.toml files ({len(drift)} above)")
        return 1
    print(f"docs/architecture.md agrees with the {len(workspace['workspace']['members'])} Cargo.toml files")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else ".")))

#!/usr/bin/env python3
"""Runs ark's Windows test binaries under Wine (called by scripts/wine-test.sh).

Usage: run_tests.py ARTIFACTS.jsonl LIMITATIONS.txt SUMMARY.json

ARTIFACTS.jsonl is what `cargo test --no-run --message-format=json` printed for the
x86_64-pc-windows-gnu target. Every test binary runs under `wine` (two at a time, the tests of a
binary one at a time: several of them measure the process's CPU time), with the tests that
LIMITATIONS.txt marks skipped (each named with its limitation) and the environment it gives;
then each limitation's probe runs on its own and must fail (it shows the limitation is Wine's;
if it passes, Wine changed and the marks are stale). Exit status 1 if anything else fails.
The summary (per binary: passed, failed, skipped; per limitation: its tests) goes to SUMMARY.json.
"""
import json
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

TIMEOUT_S = 300
PARALLEL = 2


def package_name(package_id):
    """A package's name from its id: `path+file:///…/ark-tcp#0.1.0` (named by its folder) or
    `…#ark-tcp@0.1.0`."""
    location, _, version = package_id.partition("#")
    if "@" in version:
        return version.split("@")[0]
    return location.rstrip("/").rsplit("/", 1)[-1]


def binaries(artifacts_path):
    """Test executables as {"crate/target": path}."""
    found = {}
    with open(artifacts_path) as lines:
        for line in lines:
            try:
                message = json.loads(line)
            except json.JSONDecodeError:
                continue
            if message.get("reason") != "compiler-artifact" or not message.get("executable"):
                continue
            if not message.get("profile", {}).get("test"):
                continue
            name = package_name(message["package_id"])
            found[f"{name}/{message['target']['name']}"] = message["executable"]
    return found


def limitations(path):
    """(limitations {id: (probe, text)}, skips {binary: [(test, id)]}, envs {binary: [(var, id)]})."""
    kinds, skips, envs = {}, {}, {}
    with open(path) as lines:
        for raw in lines:
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            word, rest = line.split(" ", 1)
            if word == "limitation":
                ident, probe, text = rest.split(" ", 2)
                kinds[ident] = (None if probe == "-" else probe, text)
            elif word == "skip":
                binary, test, ident = rest.split()
                skips.setdefault(binary, []).append((test, ident))
            elif word == "env":
                binary, assignment, ident = rest.split()
                envs.setdefault(binary, []).append((assignment, ident))
            else:
                sys.exit(f"{path}: unknown line: {line}")
    for binary, marks in list(skips.items()) + list(envs.items()):
        for _, ident in marks:
            if ident not in kinds:
                sys.exit(f"{path}: {binary} names an unknown limitation {ident}")
    return kinds, skips, envs


def wine(path, args, env_pairs):
    """Runs one binary under wine: (exit status or None on timeout, output)."""
    env_args = ["env"] + [a for a, _ in env_pairs] if env_pairs else []
    command = env_args + ["wine", path] + args
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S)
        return done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as e:
        output = (e.stdout or b"") + (e.stderr or b"")
        return None, output.decode(errors="replace") if isinstance(output, bytes) else output


def counts(output):
    """(passed, failed) from libtest's result lines."""
    passed = failed = 0
    for match in re.finditer(r"test result: \w+\. (\d+) passed; (\d+) failed", output):
        passed += int(match.group(1))
        failed += int(match.group(2))
    return passed, failed


def main():
    artifacts, limitations_path, summary_path = sys.argv[1:4]
    found = binaries(artifacts)
    kinds, skips, envs = limitations(limitations_path)
    for binary in list(skips) + list(envs):
        if binary not in found:
            sys.exit(f"{limitations_path}: no test binary {binary} (renamed?)")
    probes = {ident: probe for ident, (probe, _) in kinds.items() if probe}
    probe_skips = {}
    for probe in probes.values():
        binary, test = probe.split("::")
        probe_skips.setdefault(binary, []).append(test)

    def run(binary):
        args = ["--test-threads=1", "--exact"]
        skipped = [t for t, _ in skips.get(binary, [])] + probe_skips.get(binary, [])
        for test in skipped:
            args += ["--skip", test]
        status, output = wine(found[binary], args, envs.get(binary, []))
        return binary, status, output, skipped

    failures, results = [], {}
    with ThreadPoolExecutor(PARALLEL) as pool:
        for binary, status, output, skipped in pool.map(run, sorted(found)):
            passed, failed = counts(output)
            ok = status == 0
            verdict = "ok" if ok else ("TIMED OUT" if status is None else "FAILED")
            print(f"{binary}: {verdict}: {passed} passed, {failed} failed, {len(skipped)} skipped", flush=True)
            results[binary] = {"passed": passed, "failed": failed, "skipped": skipped, "ok": ok}
            if not ok:
                failures.append(binary)
                print(output[-6000:], flush=True)

    stale = []
    for ident, probe in sorted(probes.items()):
        binary, test = probe.split("::")
        status, output = wine(found[binary], ["--exact", test, "--test-threads=1"], [])
        if status == 0 and counts(output)[0] == 1:
            stale.append(ident)
            print(f"limitation {ident}: its probe {probe} passes: Wine no longer has it; unmark its tests")
        else:
            print(f"limitation {ident}: still there (its probe {probe} fails under Wine)")

    print("\nNot run as is under Wine (scripts/wine/limitations.txt):")
    for ident, (probe, text) in sorted(kinds.items()):
        marked = [f"{b} {t}" for b, tests in skips.items() for t, i in tests if i == ident]
        marked += [f"{b} with {a}" for b, pairs in envs.items() for a, i in pairs if i == ident]
        print(f"- {ident}: {text}")
        for line in marked:
            print(f"    {line}")
    summary = {
        "binaries": results,
        "limitations": {i: {"probe": p, "text": t} for i, (p, t) in kinds.items()},
        "stale_limitations": stale,
    }
    with open(summary_path, "w") as out:
        json.dump(summary, out, indent=1)
    total = sum(r["passed"] for r in results.values())
    print(f"\n{len(results)} binaries, {total} tests passed under Wine; failed: {failures or 'none'}")
    if failures or stale:
        sys.exit(1)


if __name__ == "__main__":
    main()

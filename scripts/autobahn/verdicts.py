"""Reads Autobahn|Testsuite reports (index.json of the fuzzing client or server) and prints,
per agent, a Markdown table of sections × verdicts; exits 1 if any case's verdict or close
verdict is other than OK or INFORMATIONAL, listing those cases.

Usage: python3 verdicts.py INDEX.json [INDEX.json ...]
"""
import json
import sys
from collections import Counter, defaultdict

ALLOWED = {"OK", "INFORMATIONAL"}
VERDICTS = ["OK", "NON-STRICT", "INFORMATIONAL", "UNIMPLEMENTED", "FAILED"]


def section(case: str) -> int:
    return int(case.split(".")[0])


def main(paths):
    bad = []
    for path in paths:
        with open(path) as f:
            index = json.load(f)
        for agent, cases in sorted(index.items()):
            table = defaultdict(Counter)
            for case, result in cases.items():
                verdict = result["behavior"]
                table[section(case)][verdict] += 1
                if verdict not in ALLOWED or result["behaviorClose"] not in ALLOWED:
                    bad.append(f"{agent} {case}: {verdict} (close: {result['behaviorClose']})")
            total = Counter()
            for counts in table.values():
                total.update(counts)
            print(f"### {agent}: {sum(total.values())} cases\n")
            print("| section | " + " | ".join(VERDICTS) + " |")
            print("|---|" + "---:|" * len(VERDICTS))
            for number in sorted(table):
                row = " | ".join(str(table[number][v]) for v in VERDICTS)
                print(f"| {number} | {row} |")
            print("| all | " + " | ".join(f"**{total[v]}**" for v in VERDICTS) + " |\n")
    if bad:
        print("Not OK:\n" + "\n".join(f"- {line}" for line in sorted(bad)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

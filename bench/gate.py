"""The ratio gate of make bench: a ratio must meet its target and stay within 10 % of the
reference figure docs/performance.md gives for it (the table under "Bench gate"), so a slow
drift fails the bench instead of going unnoticed, and a real gain is written down.

    python3 bench/gate.py NAME RATIO TARGET    # exit 0 when both hold, 1 otherwise
    python3 bench/gate.py rounds NAME TARGET ROUND.json…   # the same for the median ratio of rounds

A shared machine drifts (the same binary measured 1.22 and 1.60 against age in two runs a minute
apart): the token benches measure in rounds, each pair of commands side by side in one hyperfine
run, and gate the median of the rounds' ratios.
"""
import os
import re
import sys

DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "performance.md")
TOLERANCE = 0.10


def reference(name):
    """The reference ratio for NAME: the row "| `NAME` | RATIO | …" of docs/performance.md."""
    with open(DOC, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"\|\s*`%s`\s*\|\s*([0-9]+\.[0-9]+)\s*\|" % re.escape(name), line)
            if m:
                return float(m.group(1))
    raise SystemExit(f"bench gate: docs/performance.md has no reference figure for `{name}` (Bench gate table)")


def check(name, ratio, target):
    ref = reference(name)
    drift = ratio / ref - 1
    ok = True
    notes = []
    if ratio > target:
        ok = False
        notes.append(f"MISSED the target <= {target:.2f}")
    if abs(drift) > TOLERANCE:
        ok = False
        notes.append("slower" if drift > 0 else "faster: write the new figure in docs/performance.md")
    print(f"  gate `{name}`: ratio {ratio:.2f}, reference {ref:.2f} ({drift:+.0%}, allowed ±{TOLERANCE:.0%}), "
          f"target <= {target:.2f}{'' if ok else '  ' + '; '.join(notes)}")
    return ok


def rounds(name, target, files):
    """Gates the median of the ratios (first command's median over the second's) of each round's
    hyperfine JSON; prints each round and the medians of both commands."""
    import json
    import statistics
    ratios, first, second = [], [], []
    for path in files:
        r = json.load(open(path))["results"]
        first.append(r[0]["median"] * 1000)
        second.append(r[1]["median"] * 1000)
        ratios.append(first[-1] / second[-1])
    print(f"  {name}: rounds {' '.join(f'{x:.2f}' for x in ratios)}; medians {statistics.median(first):.2f} ms "
          f"vs {statistics.median(second):.2f} ms")
    return check(name, statistics.median(ratios), target)


if __name__ == "__main__":
    if sys.argv[1] == "rounds":
        sys.exit(0 if rounds(sys.argv[2], float(sys.argv[3]), sys.argv[4:]) else 1)
    sys.exit(0 if check(sys.argv[1], float(sys.argv[2]), float(sys.argv[3])) else 1)

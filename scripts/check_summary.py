#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The verdict of `make check`: every result line against the list of what must have run.

  check_summary.py RESULTS EXPECTED [--quick]

RESULTS has one line per checked thing: "pass|fail|skip SUITE NAME...", where NAME starts with
the script (or group) it belongs to: "ferroce_data.sh/12 ...", "ferroce_proto/psn_wraps".
EXPECTED lists, one per line:
  SUITE GROUP COUNT [quick]  the group must report exactly COUNT results (with --quick, for
                             make check-quick, only the groups marked quick are expected)
  allow-skip SUITE NAME WHY  a skip that is expected (NAME is the result's name up to a space)
A group that reports a different count, a result of a group that is not listed, a failure or a
skip that is not allowed each fail the run. Prints a table per suite and the totals; exits 1 on
any failure.
"""

import collections
import sys


def group_of(name):
    return name.split("/", 1)[0].split(" ", 1)[0]


def main():
    results_path, expected_path = sys.argv[1:3]
    quick = sys.argv[3:] == ["--quick"]
    expected = {}
    allowed = {}
    for line in open(expected_path):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if parts[0] == "allow-skip":
            allowed[(parts[1], parts[2])] = " ".join(parts[3:])
        elif not quick or parts[3:] == ["quick"]:
            expected[(parts[0], parts[1])] = int(parts[2])

    counts = collections.Counter()
    tally = collections.defaultdict(collections.Counter)
    failures, bad_skips, allowed_skips = [], [], []
    for line in open(results_path):
        parts = line.rstrip("\n").split(" ", 2)
        if len(parts) < 3 or parts[0] not in ("pass", "fail", "skip"):
            continue
        status, suite, name = parts
        key = (suite, group_of(name))
        counts[key] += 1
        tally[suite][status] += 1
        if status == "fail":
            failures.append(f"{suite} {name}")
        elif status == "skip":
            short = name.split(" ", 1)[0]
            if (suite, short) in allowed:
                allowed_skips.append(f"{suite} {name} ({allowed[(suite, short)]})")
            else:
                bad_skips.append(f"{suite} {name}")

    problems = []
    for key, want in sorted(expected.items()):
        if counts[key] != want:
            what = "did not run" if counts[key] == 0 else f"reported {counts[key]} results"
            problems.append(f"{key[0]} {key[1]}: {what}, expected {want}")
    for key in sorted(set(counts) - set(expected)):
        problems.append(f"{key[0]} {key[1]}: ran but is not in the expected list "
                        f"({counts[key]} results)")

    print(f"{'suite':32} {'pass':>6} {'fail':>6} {'skip':>6}")
    for suite in sorted(tally):
        t = tally[suite]
        print(f"{suite:32} {t['pass']:6} {t['fail']:6} {t['skip']:6}")
    total = collections.Counter()
    for t in tally.values():
        total.update(t)
    for title, lines in (("failed", failures), ("skipped, as expected", allowed_skips),
                         ("skipped, not allowed (a skip is not a pass)", bad_skips),
                         ("suites that did not run as expected", problems)):
        if lines:
            print(f"{title}:")
            for line in lines:
                print(f"  {line}")
    ok = not failures and not bad_skips and not problems and total["pass"] > 0
    # A skip that is not allowed counts as a failure, not as a skip.
    if quick:
        print("quick run: only the groups marked quick in the expected list")
    print(f"{total['pass']} passed, {total['fail'] + len(bad_skips) + len(problems)} failed, "
          f"{len(allowed_skips)} skipped{' (quick)' if quick else ''}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

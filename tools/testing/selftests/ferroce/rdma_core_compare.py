#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Compares two runs of rdma-core's pyverbs suite (run_tests.py -v logs), ferroce's and the C
rxe's, side by side.

  rdma_core_compare.py FERROCE_LOG C_RXE_LOG check

"check" is one of:
  ferroce   every test of ferroce's run ran and passed or skipped; none failed
  parity    every test that passed on the C rxe passed on ferroce, except ODP's (test_odp),
            which ferroce does not have yet (issue 18 allows it)
  windows   every memory-window case (test_mr.MWTest: types 1 and 2, bound, invalidated
            locally and by a peer, deallocated while bound, the wrong type refused) ran and
            passed on ferroce, none skipped

Prints the tallies side by side, and the tests whose outcome differs, as "# " comments in a
form that is not a unittest result line (the harness counts those)."""

import re
import sys

CASE = re.compile(r"\((tests\.[\w.]+)\)")
RESULT = re.compile(r"\.\.\. (ok|FAIL|ERROR|skipped.*|expected failure|unexpected success)$")
# The memory-window cases issue 17 names, and how many there are in rdma-core 44.
WINDOWS, WINDOW_CASES = "tests.test_mr.MWTest.", 7
# What ferroce may skip where the C rxe passes, and why.
ALLOWED = {"tests.test_odp.": "ODP, not in ferroce yet"}


def outcomes(path):
    """{test id: "pass" | "fail" | "skip"} from a run_tests.py -v log."""
    lines = open(path, errors="replace").read().split("\n")
    got = {}
    for i, line in enumerate(lines):
        m = CASE.search(line)
        if not m:
            continue
        # A docstring puts the result on a later line.
        for tail in lines[i:i + 4]:
            r = RESULT.search(tail)
            if r:
                word = r.group(1)
                got[m.group(1)] = ("pass" if word == "ok" else
                                   "skip" if word.startswith("skipped") else "fail")
                break
        else:
            got.setdefault(m.group(1), "fail")
    return got


def tally(runs):
    return {k: sum(1 for v in runs.values() if v == k) for k in ("pass", "fail", "skip")}


def main():
    fer, crxe = outcomes(sys.argv[1]), outcomes(sys.argv[2])
    what = sys.argv[3]
    if what == "windows":
        mw = {t: v for t, v in fer.items() if t.startswith(WINDOWS)}
        for t, v in sorted(mw.items()):
            print(f"#   {t[len(WINDOWS):]}: {v} on ferroce, {crxe.get(t, 'missing')} on the C rxe")
        return 0 if len(mw) >= WINDOW_CASES and set(mw.values()) == {"pass"} else 1
    tf, tc = tally(fer), tally(crxe)
    print(f"# rdma-core pyverbs suite{'':16}ferroce    C rxe")
    for name, key in (("run", None), ("passed", "pass"), ("failed or errors", "fail"),
                      ("skipped", "skip")):
        a, b = (len(fer), len(crxe)) if key is None else (tf[key], tc[key])
        print(f"#   {name:<36}{a:>7}  {b:>7}")
    lost = sorted(t for t, v in crxe.items() if v == "pass" and fer.get(t) != "pass")
    allowed = {t: why for t in lost for p, why in ALLOWED.items() if t.startswith(p)}
    for t in lost:
        note = f" (allowed: {allowed[t]})" if t in allowed else ""
        print(f"# passes on the C rxe, {fer.get(t, 'missing')} on ferroce: {t}{note}")
    for t in sorted(t for t, v in fer.items() if v == "pass" and crxe.get(t) != "pass"):
        print(f"# passes on ferroce, {crxe.get(t, 'missing')} on the C rxe: {t}")
    for t in sorted(t for t, v in fer.items() if v == "fail"):
        print(f"# fails on ferroce: {t}")
    # A run that stopped early, or parsed nothing, proves nothing.
    whole = len(fer) > 200
    if what == "ferroce":
        return 0 if whole and tf["fail"] == 0 else 1
    if what == "parity":
        return 0 if whole and len(crxe) == len(fer) and set(lost) == set(allowed) else 1
    raise SystemExit(f"unknown check {what}")


if __name__ == "__main__":
    sys.exit(main())

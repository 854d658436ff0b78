#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Turns one test script's output into result lines, one per subtest.

  ktap_results.py SUITE SCRIPT EXIT_CODE < OUTPUT >> RESULTS

Each line is "pass|fail|skip SUITE SCRIPT/N DESCRIPTION". A KTAP script (one that prints a
"1..N" plan) gives one line per "ok"/"not ok" line; a KTAP test that ran Python unittest cases
gives one line per case instead ("SCRIPT/N/test_name"), so a suite's count is the number of
things that were checked. Besides the subtests, the script itself fails when:
  - it timed out (exit 124) or crashed without a failing subtest to show for it,
  - fewer subtests reported than its plan announced,
  - it printed no plan and exited neither 0 (pass) nor 4 (skip).
A script without a plan is one test, judged by its exit code.
"""

import re
import sys

KTAP = re.compile(r"^(not ok|ok) (\d+)\s*(.*?)\s*$")
RESULT = r"(ok|FAIL|ERROR|skipped.*|expected failure|unexpected success)"
UNITTEST = re.compile(r"^(test\w*) \(.*\) \.\.\. " + RESULT + r"\s*$")
# With a docstring, unittest prints the name on one line and the result after the docstring.
UNITTEST_NAME = re.compile(r"^(test\w*) \([\w.]+\)$")
UNITTEST_TAIL = re.compile(r"^.* \.\.\. " + RESULT + r"\s*$")
PLAN = re.compile(r"^1\.\.(\d+)\s*$")


def main():
    suite, script, code = sys.argv[1], sys.argv[2], int(sys.argv[3])
    plan = None
    seen = 0
    failed = 0
    cases = []  # unittest cases since the last KTAP line
    out = []
    pending = None  # a unittest case whose result line is still to come
    for raw in sys.stdin:
        line = raw.rstrip("\n")
        m = PLAN.match(line)
        if m and plan is None:
            plan = int(m.group(1))
            continue
        # Scripts often show a tool's output as "# ..." comments.
        inner = re.sub(r"^(#\s*)+", "", line.strip())
        m = UNITTEST.match(inner)
        if m:
            cases.append(m.groups())
            pending = None
            continue
        m = UNITTEST_NAME.match(inner)
        if m:
            pending = m.group(1)
            continue
        m = UNITTEST_TAIL.match(inner)
        if m and pending:
            cases.append((pending, m.group(1)))
            pending = None
            continue
        m = KTAP.match(line)
        if not m:
            continue
        ok, num, desc = m.group(1) == "ok", m.group(2), m.group(3)
        seen += 1
        skip = re.search(r"#\s*SKIP\b", desc, re.I) is not None
        desc = re.sub(r"^-\s*", "", desc)
        if cases:
            case_failed = False
            for name, result in cases:
                status = ("pass" if result in ("ok", "expected failure") else
                          "skip" if result.startswith("skipped") else "fail")
                case_failed |= status == "fail"
                failed += status == "fail"
                out.append(f"{status} {suite} {script}/{num}/{name}")
            if not ok and not case_failed:
                failed += 1
                out.append(f"fail {suite} {script}/{num} {desc} (failed after its cases)")
            cases = []
            continue
        status = "skip" if ok and skip else "pass" if ok else "fail"
        failed += status == "fail"
        out.append(f"{status} {suite} {script}/{num} {desc}")
    if plan is None:
        status = {0: "pass", 4: "skip"}.get(code, "fail")
        note = "" if code in (0, 4) else " (timed out)" if code == 124 else f" (exit {code})"
        out.append(f"{status} {suite} {script}{note}")
    else:
        if seen < plan:
            out.append(f"fail {suite} {script} ({plan - seen} of {plan} subtests never reported)")
        if code == 124:
            out.append(f"fail {suite} {script} (timed out)")
        elif code not in (0, 4) and failed == 0:
            out.append(f"fail {suite} {script} (exit {code} with no failing subtest)")
    print("\n".join(out))


if __name__ == "__main__":
    main()

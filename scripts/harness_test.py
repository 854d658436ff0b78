#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The harness's own checks turn `make check` red when they should (issue 21).

  harness_test.py [-v]   (FERROCE_TREE: the kernel tree, for kselftest's ktap_helpers.sh)

Each case feeds scripts/ktap_results.py or scripts/check_summary.py what a broken run would
give them (a skipped subtest, a suite that never ran, a bailed-out script, a module that would
not unload, a skipped unittest case, an unchecked kernel log) and asserts the verdict is a
failure; the cases that must pass are here too, so a checker that always fails is caught.
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SELFTESTS = os.path.join(ROOT, "tools/testing/selftests/ferroce")
EXPECTED = os.path.join(HERE, "expected-results")


def ktap_results(script, code, output, suite="selftests.ferroce"):
    """The result lines ktap_results.py makes of one script's output and exit code."""
    r = subprocess.run([sys.executable, os.path.join(HERE, "ktap_results.py"), suite, script,
                        str(code)], input=output, capture_output=True, text=True, check=True)
    return [line for line in r.stdout.splitlines() if line]


def expected():
    """The expected list: {(suite, group): count} and the allowed skips {(suite, name)}."""
    counts, allowed = {}, set()
    for line in open(EXPECTED):
        parts = line.split("#", 1)[0].split()
        if not parts:
            continue
        if parts[0] == "allow-skip":
            allowed.add((parts[1], parts[2]))
        else:
            counts[(parts[0], parts[1])] = int(parts[2])
    return counts, allowed


COUNTS, ALLOWED = expected()


def passing_run():
    """The result lines of a run in which every expected group reported, all passing, with the
    allowed skips skipped."""
    lines = []
    for (suite, group), count in COUNTS.items():
        for i in range(1, count + 1):
            name = f"{group}/{i}"
            status = "skip" if (suite, name) in ALLOWED else "pass"
            lines.append(f"{status} {suite} {name} case {i}")
    return lines


def summary(lines, *extra):
    """check_summary.py's exit code and output for these result lines."""
    with tempfile.NamedTemporaryFile("w", suffix=".results", delete=False) as f:
        f.write("\n".join(lines) + "\n")
    try:
        r = subprocess.run([sys.executable, os.path.join(HERE, "check_summary.py"), f.name,
                            EXPECTED, *extra], capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    return r.returncode, r.stdout


class Verdicts(unittest.TestCase):
    def test_a_complete_passing_run_passes(self):
        code, out = summary(passing_run())
        self.assertEqual(code, 0, out)
        self.assertIn(f" 0 failed, {len(ALLOWED)} skipped", out)

    def test_a_skipped_subtest_is_a_skip_not_a_pass(self):
        # Item 2: KTAP's ktap_finished exits 0 when pass + skip equals the plan.
        lines = ktap_results("x.sh", 0, "1..3\nok 1 a\nok 2 b # SKIP no tool\nok 3 c\n")
        self.assertEqual([l.split()[0] for l in lines], ["pass", "skip", "pass"])

    def test_a_skip_that_is_not_allowed_fails_the_run(self):
        run = passing_run()
        i = run.index("pass selftests.ferroce ferroce_data.sh/5 case 5")
        run[i] = "skip selftests.ferroce ferroce_data.sh/5 case 5"
        code, out = summary(run)
        self.assertEqual(code, 1, out)
        self.assertIn("skipped, not allowed", out)

    def test_a_script_that_skips_whole_is_a_skip(self):
        lines = ktap_results("x.sh", 4, "1..0 # SKIP missing tool\n")
        self.assertEqual([l.split()[0] for l in lines], ["skip"])

    def test_a_suite_that_did_not_run_fails_the_run(self):
        # Item 5: every group is pinned with its count.
        run = [l for l in passing_run() if "ferroce_teardown.sh/" not in l]
        code, out = summary(run)
        self.assertEqual(code, 1, out)
        want = COUNTS[("selftests.ferroce", "ferroce_teardown.sh")]
        self.assertIn(f"ferroce_teardown.sh: did not run, expected {want}", out)

    def test_a_suite_that_reported_less_fails_the_run(self):
        n = COUNTS[("kunit", "ferroce_proto")]
        run = [l for l in passing_run() if l != f"pass kunit ferroce_proto/{n} case {n}"]
        code, out = summary(run)
        self.assertEqual(code, 1, out)
        self.assertIn(f"ferroce_proto: reported {n - 1} results, expected {n}", out)

    def test_a_plan_not_met_fails_the_script(self):
        lines = ktap_results("x.sh", 0, "1..5\nok 1 a\nok 2 b\nok 3 c\n")
        self.assertIn("fail selftests.ferroce x.sh (2 of 5 subtests never reported)", lines)

    def test_a_timeout_fails_the_script(self):
        lines = ktap_results("x.sh", 124, "1..2\nok 1 a\nok 2 b\n")
        self.assertIn("fail selftests.ferroce x.sh (timed out)", lines)

    def test_unittest_cases_count_one_by_one_and_a_skipped_case_is_a_skip(self):
        # Item 8: "Ran N" is not N passes.
        out = ("1..1\n# test_a (m.T.test_a) ... ok\n"
               "# test_b (m.T.test_b) ... skipped 'no device'\n"
               "# test_c (m.T.test_c) ... FAIL\nnot ok 1 cases\n")
        lines = ktap_results("x.py", 1, out)
        self.assertEqual(lines, ["pass selftests.ferroce x.py/1/test_a",
                                 "skip selftests.ferroce x.py/1/test_b",
                                 "fail selftests.ferroce x.py/1/test_c"])

    def test_a_module_left_loaded_fails_the_run(self):
        # Item 8: guest-check.sh records SUITE/unload when modprobe -r fails after a suite.
        run = passing_run()
        run.append("fail selftests.ferroce ferroce_data.sh/unload (rdma_rxe still loaded)")
        code, out = summary(run)
        self.assertEqual(code, 1, out)
        n = COUNTS[("selftests.ferroce", "ferroce_data.sh")]
        self.assertIn(f"ferroce_data.sh: reported {n + 1} results, expected {n}", out)

    def test_an_unchecked_or_failed_kernel_log_fails_the_run(self):
        # Items 4 and 6: each guest's log check is pinned, and a failed one counts.
        run = [l for l in passing_run() if not l.startswith("pass kernel-log interop-ferroce/")]
        code, out = summary(run)
        self.assertEqual(code, 1, out)
        n = COUNTS[("kernel-log", "interop-ferroce")]
        self.assertIn(f"kernel-log interop-ferroce: did not run, expected {n}", out)
        run = passing_run()
        run[run.index("pass kernel-log interop-c-rxe/2 case 2")] = \
            "fail kernel-log interop-c-rxe/2 WARNING in the kernel log"
        code, out = summary(run)
        self.assertEqual(code, 1, out)

    def test_an_unlisted_group_fails_the_run(self):
        code, out = summary(passing_run() + ["pass selftests.ferroce new_suite.sh/1 x"])
        self.assertEqual(code, 1, out)
        self.assertIn("ran but is not in the expected list", out)

    def test_a_run_with_nothing_passed_fails(self):
        code, out = summary([])
        self.assertEqual(code, 1, out)


class Strict(unittest.TestCase):
    """Item 3: under FERROCE_STRICT (make check) a missing tool fails the script."""

    def run_require(self, strict):
        tree = os.environ.get("FERROCE_TREE")
        helpers = os.path.join(tree or "", "tools/testing/selftests/kselftest/ktap_helpers.sh")
        self.assertTrue(tree and os.path.exists(helpers), "FERROCE_TREE must name the kernel tree")
        env = dict(os.environ, FERROCE_STRICT="1" if strict else "")
        script = (f"source {helpers}; source {SELFTESTS}/ferroce_lib.sh; "
                  "ktap_print_header; require bash ferroce-no-such-tool; ktap_set_plan 1; "
                  "ktap_test_pass ran; ktap_finished")
        r = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True)
        return ktap_results("x.sh", r.returncode, r.stdout)

    def test_a_missing_tool_fails_under_strict(self):
        self.assertEqual([l.split()[0] for l in self.run_require(True)], ["fail"])

    def test_a_missing_tool_skips_outside_make_check(self):
        self.assertEqual([l.split()[0] for l in self.run_require(False)], ["skip"])


class Clippy(unittest.TestCase):
    """make check's clippy verdict: the build's Rust went through clippy with -Dwarnings."""

    OBJS = ("rust/kernel.o", "rust/libmacros.so", "drivers/infiniband/sw/ferroce/ferroce.o")
    LINTED = "savedcmd_{0} := OBJTREE=/b clippy-driver --edition=2021 -Wclippy::all -Dwarnings {0}"

    def unlinted(self, cmds):
        with tempfile.TemporaryDirectory() as build:
            for obj, cmd in cmds.items():
                d, f = os.path.split(obj)
                os.makedirs(os.path.join(build, d), exist_ok=True)
                with open(os.path.join(build, d, f".{f}.cmd"), "w") as out:
                    out.write(cmd.format(obj) + "\n")
            r = subprocess.run(["bash", "-c", f'. "{HERE}/lib.sh"; unlinted "$1"', "-", build],
                               capture_output=True, text=True, check=True)
            return r.stdout.split()

    def test_a_linted_build_passes(self):
        self.assertEqual(self.unlinted({o: self.LINTED for o in self.OBJS}), [])

    def test_a_plain_rustc_build_fails(self):
        plain = "savedcmd_{0} := OBJTREE=/b rustc --edition=2021 -Wclippy::all -Dwarnings {0}"
        self.assertEqual(self.unlinted({self.OBJS[0]: plain, self.OBJS[1]: self.LINTED,
                                        self.OBJS[2]: self.LINTED}), [self.OBJS[0]])

    def test_lints_as_warnings_fail(self):
        warn = "savedcmd_{0} := OBJTREE=/b clippy-driver --edition=2021 -Wclippy::all {0}"
        self.assertEqual(self.unlinted({self.OBJS[0]: self.LINTED, self.OBJS[1]: self.LINTED,
                                        self.OBJS[2]: warn}), [self.OBJS[2]])

    def test_a_missing_object_fails(self):
        self.assertEqual(self.unlinted({self.OBJS[0]: self.LINTED, self.OBJS[2]: self.LINTED}),
                         [self.OBJS[1]])


class Selftests(unittest.TestCase):
    """The selftests' programs land where the guest runs them, also under make (MAKELEVEL=1),
    where kselftest's lib.mk leaves OUTPUT empty."""

    def test_programs_are_built_in_place_under_make(self):
        tree = os.environ.get("FERROCE_TREE")
        lib_mk = os.path.join(tree or "", "tools/testing/selftests/lib.mk")
        self.assertTrue(tree and os.path.exists(lib_mk), "FERROCE_TREE must name the kernel tree")
        with tempfile.TemporaryDirectory() as top:
            st = os.path.join(top, "tools/testing/selftests")
            os.makedirs(st)
            for f in ("lib.mk", "kselftest.h", "kselftest_harness.h"):
                subprocess.run(["cp", os.path.join(os.path.dirname(lib_mk), f), st], check=True)
            subprocess.run(["cp", "-r", SELFTESTS, os.path.join(st, "ferroce")], check=True)
            env = dict(os.environ, MAKELEVEL="1")
            r = subprocess.run(["bash", "-c", f'. "{HERE}/lib.sh"; build_selftests "$1"', "-",
                                top], env=env, capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            for prog in ("ferroce_xfer", "ferroce_mcast"):
                self.assertTrue(os.access(os.path.join(st, "ferroce", prog), os.X_OK), prog)


def crash_excerpt(log):
    """lib.sh's crash_excerpt of the console log LOG."""
    with tempfile.NamedTemporaryFile("w", suffix=".log", newline="") as f:
        f.write(log)
        f.flush()
        r = subprocess.run(["bash", "-c", f'. "{HERE}/lib.sh"; crash_excerpt "$1"', "-", f.name],
                           capture_output=True, check=True)
    # Bytes, so that a CR left in is seen.
    return r.stdout.decode().split("\n")[:-1]


def crash_reason(log):
    """lib.sh's crash_reason of the console log LOG: what it adds to the fail line (raw bytes
    but for the final newline) and what it appended to the crashes file."""
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "guest.log"), "w", newline="") as f:
            f.write(log)
        r = subprocess.run(["bash", "-c", f'. "{HERE}/lib.sh"; crash_reason "$1" "$2"', "-",
                            os.path.join(d, "guest.log"), os.path.join(d, "crashes")],
                           capture_output=True, check=True)
        crashes = os.path.join(d, "crashes")
        kept = ""
        if os.path.exists(crashes):
            with open(crashes, newline="") as f:
                kept = f.read()
    return r.stdout.decode().removesuffix("\n"), kept


class GuestCrash(unittest.TestCase):
    """A guest whose kernel dies fails the run with the kernel's own words: guest.sh shows the
    console (quiet until an oops or panic), and crash_excerpt finds them there."""

    def test_the_excerpt_is_the_consoles_from_the_first_oops_on(self):
        log = ("#   12  ok 1 a test line that says BUG: but is no console line\n"
               "[   10.100000] rdma_rxe: fer0: added on va\n"
               "[  100.500000] BUG: kernel NULL pointer dereference, address: 0000000000000008\n"
               "#   13  a test line between\n"
               "[  100.700000] RIP: 0010:foo+0x1/0x2\n"
               "[  100.900000] Kernel panic - not syncing: Fatal exception in interrupt\n")
        self.assertEqual(crash_excerpt(log), [
            "[  100.500000] BUG: kernel NULL pointer dereference, address: 0000000000000008",
            "[  100.700000] RIP: 0010:foo+0x1/0x2",
            "[  100.900000] Kernel panic - not syncing: Fatal exception in interrupt"])

    def test_a_rust_panic_starts_the_excerpt_and_crs_are_dropped(self):
        log = ("[   50.000000] rust_kernel: panicked at drivers/infiniband/sw/ferroce/qp.rs:1:2:\r\n"
               "[   50.000100] Oops: invalid opcode: 0000 [#1] SMP\r\n")
        self.assertEqual(crash_excerpt(log), [
            "[   50.000000] rust_kernel: panicked at drivers/infiniband/sw/ferroce/qp.rs:1:2:",
            "[   50.000100] Oops: invalid opcode: 0000 [#1] SMP"])

    def test_the_fail_line_names_the_first_line_and_the_summary_gets_the_excerpt(self):
        log = ("[  100.500000] BUG: kernel NULL pointer dereference, address: 0000000000000008\r\n"
               "[  100.900000] Kernel panic - not syncing: Fatal exception in interrupt\r\n")
        why, kept = crash_reason(log)
        self.assertEqual(why, "; its kernel said: BUG: kernel NULL pointer dereference, "
                              "address: 0000000000000008")
        self.assertEqual(kept, "guest.log:\n" + log.replace("\r", ""))
        self.assertEqual(crash_reason("[    1.000000] all well\n"), ("", ""))

    def test_a_log_without_a_death_has_no_excerpt(self):
        log = ("[    1.000000] rdma_rxe: ferroce 0.2.0 loaded\n"
               "#   14  Oops: BUG: a test's own words, no console line\n")
        self.assertEqual(crash_excerpt(log), [])

    def test_a_panicking_guest_exits_255_and_its_console_shows_the_panic(self):
        # Into one regular file, as interop.sh keeps each guest's output: the console must not
        # write over the command's lines (QEMU opens each output on an offset of its own). (No
        # docstring: unittest -v would print it on a line of its own, which the count misses.)
        cache = os.environ.get("FERROCE_CACHE", "/var/lib/ferroce")
        self.assertTrue(os.path.exists(os.path.join(cache, "current-build")),
                        "a built kernel is needed (make kernel)")
        cmd = 'for i in $(seq 300); do echo "line $i of the command"; done; echo c >/proc/sysrq-trigger'
        with tempfile.TemporaryFile("w+", newline="") as out:
            r = subprocess.run([os.path.join(HERE, "guest.sh"), cmd],
                               env=dict(os.environ, GUEST_TIMEOUT="300"), stdout=out,
                               stderr=subprocess.STDOUT)
            out.seek(0)
            log = out.read()
        self.assertEqual(r.returncode, 255, log[-2000:])
        lines = log.replace("\r", "").split("\n")
        self.assertEqual([i for i in range(1, 301) if f"line {i} of the command" not in lines], [],
                         log[-2000:])
        excerpt = crash_excerpt(log)
        self.assertTrue(excerpt and "sysrq" in excerpt[0].lower(), log[-2000:])
        self.assertTrue(any("Kernel panic" in line for line in excerpt), excerpt)


def perftest_figure(output, tool, size, secs=2, mhz=""):
    """What make bench takes from one perftest run's output."""
    r = subprocess.run([os.path.join(HERE, "perftest-figure.sh"), tool, str(size), str(secs), mhz],
                       input=output, capture_output=True, text=True, check=True)
    return r.stdout.strip()


BW_HEAD = (" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n")


def bw_row(drv, test, value, failed=None):
    """One raw JSON line of a 64 KiB bandwidth run at MTU 1500: its figure, or why it failed."""
    r = {"driver": drv, "mtu": 1500, "test": test, "size": 65536, "rep": 1, "value": value,
         "unit": "Gb/s"}
    if failed:
        r["failed"] = failed
    return json.dumps(r)


def profile_row(drv, syms, test="ib_write_bw"):
    """One raw JSON line of a 64 KiB profile at MTU 1500: 999 samples at 999 Hz over 1000
    packets, so a sample is 1 us a packet; SYMS are its "count|module|[k]|symbol" entries."""
    return json.dumps({"driver": drv, "mtu": 1500, "test": "profile-" + test, "size": 65536,
                       "samples": 999, "hz": 999, "pkts": 1000, "bytes": 10**6, "top": "",
                       "syms": ";".join(syms)})


def report(raw, env=None):
    """bench-report.py's Markdown for the raw JSON lines RAW, with ENV's variables added."""
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "raw.jsonl"), "w") as f:
            f.write("\n".join(raw) + "\n")
        # Exit 1 says only that it drew no plot (no matplotlib): the tables come first.
        r = subprocess.run([sys.executable, os.path.join(HERE, "bench-report.py"),
                            os.path.join(d, "raw.jsonl"), d, "TCG"], capture_output=True, text=True,
                           env={k: v for k, v in os.environ.items()
                                if k != "BENCH_FERROCE_PARAMS"} | (env or {}))
        if r.returncode not in (0, 1):
            raise AssertionError(r.stderr)
        with open(os.path.join(d, "bench.md")) as f:
            return f.read()


class BenchFigures(unittest.TestCase):
    """Item 9: make bench's figures come from what a run moved, and a run that moved nothing
    gives none (never a zero that would enter the medians)."""

    def test_bandwidth_is_what_moved_in_the_window(self):
        out = BW_HEAD + " 65536      1200             0.00               0.31   \t\t   0.000599\n"
        self.assertEqual(perftest_figure(out, "ib_send_bw", 65536), "0.315")

    def test_a_failed_clock_fit_does_not_zero_the_figure(self):
        # perftest 4.5 under TCG, as seen in make bench: with -F a failed fit prints zeros.
        out = ("Correlation coefficient r^2: 0.885499 < 0.9\n" + BW_HEAD +
               " 65536      1130           0.000000            0.000000            0.000000\n")
        self.assertEqual(perftest_figure(out, "ib_send_bw", 65536), "0.296")

    def test_a_run_that_moved_nothing_has_no_figure(self):
        out = BW_HEAD + " 65536      0              0.00               0.00   \t\t   0.000000\n"
        self.assertEqual(perftest_figure(out, "ib_write_bw", 65536), "")
        self.assertEqual(perftest_figure("Couldn't connect to 192.0.2.2:18600\n", "ib_write_bw",
                                         65536), "")

    def test_atomic_rate_is_operations_in_the_window(self):
        out = BW_HEAD + " 8          30000            0.00               0.00   \t\t   0.000000\n"
        self.assertEqual(perftest_figure(out, "ib_atomic_bw", 8), "0.0150")
        self.assertEqual(perftest_figure(BW_HEAD + " 8  0  0.00  0.00  0.0\n", "ib_atomic_bw", 8),
                         "")

    def test_latency_in_cycles_uses_the_kernels_rate(self):
        out = (" #bytes #iterations    t_min[cycles]    t_max[cycles]  t_typical[cycles]\n"
               " 8       1000          26000.00       90000.00     52000.00  \t       53000.00\n")
        self.assertEqual(perftest_figure(out, "ib_write_lat", 8, mhz="2600.0"), "20.00")
        self.assertEqual(perftest_figure(out.replace("52000.00", "inf"), "ib_write_lat", 8,
                                         mhz="2600.0"), "")


    def test_cpu_per_byte_names_the_cost_of_a_missed_target(self):
        def row(drv, test, value=None, **cpu):
            r = {"driver": drv, "mtu": 1500, "test": test, "size": 65536, "rep": 1}
            r.update({"value": value, "unit": "Gb/s"} if value is not None else
                     dict(hz=100, cpus=2, **cpu))
            return json.dumps(r)
        raw = [row("ferroce", "ib_write_bw", 0.3), row("c-rxe", "ib_write_bw", 0.3),
               row("ferroce", "cpu-ib_write_bw", user=10, kernel=90, idle=100, bytes=10**8),
               row("c-rxe", "cpu-ib_write_bw", user=90, kernel=100, idle=10, bytes=10**8, drops=7),
               # A run whose counters moved nothing gives no figure (no division by zero).
               row("c-rxe", "cpu-ib_read_bw", user=1, kernel=1, idle=1, bytes=0)]
        md = report(raw)
        # 10^8 bytes in 200 ticks of 2 CPUs at 100 Hz: 1 s, 0.8 Gb/s on the wire.
        self.assertIn("| ib_write_bw | 1500 | ferroce | 1.00 of 2 | 9.0 | 1.0 | 0.8 | 0 | 1 |", md)
        self.assertIn("| ib_write_bw | 1500 | c-rxe | 1.90 of 2 | 10.0 | 9.0 | 0.8 | 7 | 1 |", md)
        self.assertIn("| 1.00 | no |  |  | kernel CPU per byte 0.90x the C rxe's; CPUs busy 1.00 (ferroce) "
                      "vs 1.90 (C rxe); on the wire 0.8 vs 0.8 Gb/s |", md)
        self.assertNotIn("| ib_read_bw | 1500 | c-rxe |", md)

    def test_runs_with_a_cpu_per_host_are_reported_apart_from_the_targets(self):
        raw = [bw_row("ferroce", "ib_write_bw", 0.3), bw_row("c-rxe", "ib_write_bw", 0.2),
               bw_row("ferroce", "ib_write_bw-hosts", 0.6), bw_row("c-rxe", "ib_write_bw-hosts", 0.25),
               # A split run that failed, with no shared run beside it.
               bw_row("c-rxe", "ib_read_bw-hosts", None, failed="exit 1")]
        md = report(raw)
        # The headline compares the shared-CPU runs only; the split runs have their own table
        # and column, each against its own driver's shared run too.
        self.assertIn("| ib_write_bw | 65536 | 0.3 Gb/s (0.3-0.3, n=1/1) | 0.2 Gb/s (0.2-0.2, n=1/1) "
                      "| 1.50 |", md)
        self.assertIn("| ib_write_bw 65536 B (>= 2.0) | 1500 | 1.50 | no |  | 2.40 |", md)
        self.assertIn("| ib_write_bw | 0.6 Gb/s (0.6-0.6, n=1/1) | 0.25 Gb/s (0.25-0.25, n=1/1) | "
                      "2.40 | 2.00 | 1.25 |", md)
        self.assertNotIn("| ib_write_bw-hosts | 65536 |", md)
        self.assertIn("| ib_read_bw 65536 B (>= 2.0) | 1500 | n/a | n/a |  | n/a |", md)
        self.assertIn("| ib_read_bw | n/a | failed (0/1) | n/a | n/a | n/a |", md)
        self.assertIn("| c-rxe | 1500 | ib_read_bw-hosts | 65536 | 1 | exit 1 |", md)
        self.assertNotIn("| ib_read_bw | 65536 |", md)

    def test_ferroces_module_parameters_head_the_report(self):
        raw = [bw_row("ferroce", "ib_write_bw", 0.3), bw_row("c-rxe", "ib_write_bw", 0.2)]
        md = report(raw, {"BENCH_FERROCE_PARAMS": "stream_highpri=1"})
        self.assertIn("ferroce was loaded with module parameters: stream_highpri=1 "
                      "(not its defaults)", md)
        self.assertNotIn("module parameters", report(raw))

    def test_the_steady_wire_rate_stands_beside_perftests_figure(self):
        # A round of 8 x 128 posts that outlasted perftest's window: it counted nothing that
        # moved (0 is no figure: a failed run), while the wire carried 0.2 Gb/s.
        raw = [bw_row("ferroce", "ib_write_bw-q8", None,
                      failed="exit 0: no iterations completed in the 2 s window"),
               bw_row("c-rxe", "ib_write_bw-q8", 0.4),
               bw_row("ferroce", "steady-ib_write_bw-q8", 0.2),
               bw_row("c-rxe", "steady-ib_write_bw-q8", 0.5),
               bw_row("ferroce", "ib_write_bw", 0.3), bw_row("c-rxe", "ib_write_bw", 0.2),
               bw_row("ferroce", "steady-ib_write_bw", 0.33),
               bw_row("c-rxe", "steady-ib_write_bw", 0.3)]
        md = report(raw)
        self.assertIn("| ib_write_bw | 65536 | 0.3 Gb/s (0.3-0.3, n=1/1) | 0.2 Gb/s (0.2-0.2, n=1/1) "
                      "| 1.50 | n/a | 1.10 |", md)
        self.assertIn("| 8 | failed (0/1) | 0.4 Gb/s (0.4-0.4, n=1/1) | n/a | 0.40 |", md)
        # Met stays perftest's; the steady rate is beside it.
        self.assertIn("| ib_write_bw 65536 B (>= 2.0) | 1500 | 1.50 | no | 1.10 |", md)
        self.assertIn("| ib_write_bw-q8 65536 B (>= 2.0) | 1500 | n/a | n/a | 0.40 |", md)
        self.assertNotIn("| steady-", md)

    def test_perfs_report_becomes_one_line_per_symbol(self):
        out = ("# Samples: 10K of event 'cpu-clock'\n"
               "    15.10%           984  [kernel.vmlinux]      [k] crc32_lsb_pclmul_sse\n"
               "    50.00%          3000  [kernel.vmlinux]      [k] pv_native_safe_halt\n"
               "     3.00%           200  [rdma_rxe]            [k] _RNvNtNtCs_7ferroce2rc3req4pump\n"
               "     1.00%            60  [unknown]             [.] \"odd;sym|x\" with spaces\n"
               "     0.50%            30  perftest (deleted)    [.] main\n"
               "     0.10%             6  [kernel.vmlinux]      [k] default_idle_call\n"
               "\n")
        r = subprocess.run([os.path.join(HERE, "perf-symbols.sh")], input=out,
                           capture_output=True, text=True, check=True)
        # The idle loop is not CPU time; names keep their spaces and lose the separators.
        self.assertEqual(r.stdout.splitlines(), [
            "984|[kernel.vmlinux]|[k]|crc32_lsb_pclmul_sse",
            "200|[rdma_rxe]|[k]|_RNvNtNtCs_7ferroce2rc3req4pump",
            "60|[unknown]|[.]|oddsymx with spaces",
            "30|perftest (deleted)|[.]|main"])

    def test_a_profile_is_split_into_layers(self):
        syms = [
            "500|[kernel.kallsyms]|[k]|crc32_lsb_pclmul_sse",
            "200|[rdma_rxe]|[k]|_RNvNtNtCs1_7ferroce2rc3req4pump",
            "100|[kernel.kallsyms]|[k]|__dev_queue_xmit",
            "40|[kernel.kallsyms]|[k]|veth_xmit",
            "10|[kernel.kallsyms]|[k]|__kfree_skb",
            "50|[kernel.kallsyms]|[k]|skb_copy_bits",
            "40|[kernel.kallsyms]|[k]|kmem_cache_alloc_node_noprof",
            "30|[kernel.kallsyms]|[k]|_raw_spin_unlock_irqrestore",
            "20|librxe-rdmav34.so|[.]|0x000000000001f3ef",
            "3|[ib_uverbs]|[k]|ib_uverbs_write",
            "2|[kernel.vmlinux]|[k]|ib_device_get_by_netdev",
            "5|[kernel.kallsyms]|[k]|schedule",
            "not a count|x|[k]|y"]
        md = report([profile_row("ferroce", syms)])
        # 1 s of CPU over 1000 packets: 1000 us a packet, split by the layers' shares.
        self.assertIn("| driver | run | driver | ICRC | user space | RDMA core | copies "
                      "| network stack | allocator | interrupts back on | other kernel |", md)
        self.assertIn("| ferroce | ib_write_bw 65536 B | 200.0 (20%) | 500.0 (50%) | 20.0 (2%) | "
                      "5.0 (0%) | 50.0 (5%) | 150.0 (15%) | 40.0 (4%) | 30.0 (3%) | 5.0 (0%) |", md)

    def test_ferroces_own_cost_is_set_beside_the_measured_ratio(self):
        f = ["300|[rdma_rxe]|[k]|pump", "100|[kernel.vmlinux]|[k]|_raw_spin_unlock",
             "400|[kernel.vmlinux]|[k]|crc32_le", "200|perftest|[.]|poll"]
        c = ["100|[rdma_rxe]|[k]|0x1f3", "300|[kernel.vmlinux]|[k]|_raw_spin_unlock",
             "400|[kernel.vmlinux]|[k]|crc32_le", "200|perftest|[.]|poll"]
        md = report([profile_row("ferroce", f), profile_row("c-rxe", c),
                     profile_row("ferroce", f, "ib_write_lat"),
                     profile_row("c-rxe", c, "ib_write_lat"),
                     bw_row("ferroce", "ib_write_bw", 0.3), bw_row("c-rxe", "ib_write_bw", 0.2)])
        # 1 s over 1000 packets: a sample is 1 us a packet. Kernel (user space left out) 800
        # each; ferroce's own 400 leaves 400 (2.00), its module alone 300 leaves 500 (1.60).
        self.assertIn("| ib_write_bw 65536 B | 800.0 | 800.0 | 400.0 | 400.0 | 2.00 (1.60) | "
                      "1.50 |", md)
        # A latency run gets no row: kernel time per packet does not set it alone.
        self.assertNotIn("| ib_write_lat 65536 B | 800.0", md)

    def test_memory_is_per_object_with_what_was_left(self):
        raw = [json.dumps({"driver": "ferroce", "test": "memory", "result": {
                   "qps": 200, "mrs": 1000, "per_qp": 50688.4, "qp_spread": [50100, 51003.9],
                   "qp_left": 12.0, "per_mr": 901.2, "mr_spread": [880, 920], "mr_left": -3.5}}),
               json.dumps({"driver": "c-rxe", "test": "memory", "result": None,
                           "failed": "no device"})]
        md = report(raw)
        self.assertIn("| ferroce | 50688 (50100-51004) | 12 | 901 (880-920) | -4 | 200, 1000 |", md)
        self.assertIn("| c-rxe | failed: no device | | | | |", md)


NVMET_REPORT = """[  158.922251] WARNING: possible circular locking dependency detected
[  158.922833] rm/1121 is trying to acquire lock:
[  158.923077] ff3d137b0572cc20 (&id_priv->handler_mutex){+.+.}-{4:4}, at: rdma_destroy_id+0x16/0x20
[  158.924603] -> #1 (nvmet_config_sem){++++}-{4:4}:
[  158.924904]        nvmet_find_get_subsys+0x36/0x1d0 [nvmet]
[  158.926363] -> #0 (&id_priv->handler_mutex){+.+.}-{4:4}:
[  158.926688]        nvmet_rdma_disable_port+0x19/0xa0 [nvmet_rdma]
[  158.930198] Call Trace:
[  158.930326]  <TASK>
[  158.930788]  print_circular_bug+0x365/0x380
[  158.930438]  </TASK>
"""


def log_filtered(log):
    """What kernel_log_filter.py leaves of LOG."""
    r = subprocess.run([sys.executable, os.path.join(HERE, "kernel_log_filter.py")], input=log,
                       capture_output=True, text=True, check=True)
    return r.stdout


class KernelLog(unittest.TestCase):
    def test_the_upstream_nvmet_lock_order_report_is_taken_out_whole(self):
        out = log_filtered("[    1.0] boot\n" + NVMET_REPORT + "[  160.0] after\n")
        self.assertEqual(out, "[    1.0] boot\n[  160.0] after\n")

    def test_a_report_with_another_lock_in_its_chain_stays(self):
        other = NVMET_REPORT.replace("-> #0 (&id_priv->handler_mutex)",
                                     "-> #2 (&qp->lock){....}:\n-> #0 (&id_priv->handler_mutex)")
        out = log_filtered(NVMET_REPORT.replace("nvmet_config_sem", "ferroce_table_lock"))
        self.assertIn("WARNING: possible circular locking", out)
        self.assertIn("WARNING: possible circular locking", log_filtered(other))
        self.assertIn("WARNING: possible circular locking",
                      log_filtered(NVMET_REPORT + NVMET_REPORT.replace("nvmet_config_sem", "x")))

if __name__ == "__main__":
    unittest.main()

#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Checks that Documentation/infiniband/ferroce.rst names every file of the driver, and names
no driver file that does not exist: its file map must match the tree. Driver files are named
by their path under drivers/infiniband/sw/ferroce (``qp/ring.rs``), protocol files by their
name (``psn.rs``, in the proto/ paragraph). Prints what is wrong; exits 1 if anything is."""

import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
driver = root / "drivers/infiniband/sw/ferroce"
doc = (root / "Documentation/infiniband/ferroce.rst").read_text()
# ``proto/x.rs`` and ``x.rs`` name the same protocol file.
named = {n.removeprefix("proto/") for n in re.findall(r"``([\w/]+\.rs)``", doc)}

files = sorted(p.relative_to(driver).as_posix() for p in driver.rglob("*.rs"))
wrong = []
for f in files:
    want = f.split("/", 1)[1] if f.startswith("proto/") else f
    if want not in named:
        wrong.append(f"not in the file map: {f} (as ``{want}``)")
known = {f.split("/", 1)[1] if f.startswith("proto/") else f for f in files}
for n in sorted(named - known):
    wrong.append(f"named but not in the tree: ``{n}``")
for w in wrong:
    print(w)
print(f"{len(files)} driver files, {len(wrong)} problems")
sys.exit(1 if wrong else 0)

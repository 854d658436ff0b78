#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Holds a ferroce device's user objects while the device goes away under it.

Creates a PD, CQ, MR and RC QP (rings mapped), prints "ready", waits for a line on stdin,
then touches what it still can: polls the CQ (reads its mapped ring) and frees everything.
After the device is gone these calls may fail, but the process must not crash. Exits 0 and
prints "done" if it got through.
"""

import sys

import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsError
from pyverbs.qp import QP, QPCap, QPInitAttr

ctx = Context(name=sys.argv[1])
pd = PD(ctx)
cq = CQ(ctx, 256)
mr = MR(pd, 1 << 20, e.IBV_ACCESS_LOCAL_WRITE)
qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                       cap=QPCap(max_send_wr=64, max_recv_wr=64)))
print("ready", flush=True)
sys.stdin.readline()
try:
    cq.poll(1)
except PyverbsError as ex:
    print(f"poll after removal: {ex}", flush=True)
for obj in (qp, mr, cq, pd, ctx):
    try:
        obj.close()
    except PyverbsError as ex:
        print(f"close after removal: {ex}", flush=True)
print("done", flush=True)

#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Deep send queues of an RC QP of DEV, sending to another QP of DEV over its own address ADDR.

  ferroce_sq.py DEV ADDR

The requester starts WQEs (copies, checks, gives them PSNs) as it reaches them, at most
STARTED_MAX ahead of the completer. The receiver posts no receive at first, so the first SEND
meets RNR NAKs (retried for ever) and the requester holds: what started, and what did not,
shows in what SQD lets finish and in what the error state flushes.
"""

import os
import sys
import time
import unittest

import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

if len(sys.argv) != 3:
    sys.exit(__doc__)
DEV, ADDR = sys.argv[1:3]
del sys.argv[1:]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ferroce_pyverbs import connect, gid_index  # noqa: E402

STARTED_MAX = 512  # rc::req::STARTED_MAX
POSTED = 2048
DEPTH = 4096
MSG = 8


class Side:
    """A context, PD, CQ and MR, and an RC QP with DEPTH-deep queues, in INIT."""

    def __init__(self):
        self.ctx = Context(name=DEV)
        self.gid_index = gid_index(self.ctx, ADDR)
        self.pd = PD(self.ctx)
        self.cq = CQ(self.ctx, 2 * DEPTH)
        self.mr = MR(self.pd, DEPTH * MSG, e.IBV_ACCESS_LOCAL_WRITE)
        cap = QPCap(max_send_wr=DEPTH, max_recv_wr=DEPTH, max_send_sge=1, max_recv_sge=1)
        self.qp = QP(self.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.cq, rcq=self.cq,
                                         cap=cap))
        qa = QPAttr(port_num=1)
        qa.qp_state = e.IBV_QPS_INIT
        self.qp.modify(qa, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT |
                       e.IBV_QP_ACCESS_FLAGS)

    def drain(self, seconds):
        """Completions until none came for SECONDS."""
        wcs = []
        quiet = time.time() + seconds
        while time.time() < quiet:
            n, got = self.cq.poll(256)
            if n:
                wcs += got[:n]
                quiet = time.time() + seconds
            else:
                time.sleep(0.02)
        return wcs

    def close(self):
        for o in (self.qp, self.mr, self.cq, self.pd, self.ctx):
            o.close()


class DeepQueue(unittest.TestCase):
    def setUp(self):
        self.a, self.b = Side(), Side()
        # RNR retried for ever (7), 0.01 ms apart at least. The ACK timeout is long (18: about
        # 1 s; the helper allows one retry): under load an RNR NAK may come back later than
        # the default 4 ms, and two timeouts would fail the QP.
        connect(self.a.qp, ADDR, self.a.gid_index, self.b.qp.qp_num, rnr_retry=7, timeout=18)
        connect(self.b.qp, ADDR, self.b.gid_index, self.a.qp.qp_num)
        for i in range(POSTED):
            sge = SGE(self.a.mr.buf + i * MSG, MSG, self.a.mr.lkey)
            self.a.qp.post_send(SendWR(wr_id=i, opcode=e.IBV_WR_SEND, num_sge=1, sg=[sge],
                                       send_flags=e.IBV_SEND_SIGNALED))
        # The first SEND meets RNR NAKs: nothing completes.
        self.assertEqual([(w.wr_id, w.status) for w in self.a.drain(0.5)][:4], [])

    def tearDown(self):
        self.a.close()
        self.b.close()

    def move(self, state):
        qa = QPAttr()
        qa.qp_state = state
        self.a.qp.modify(qa, e.IBV_QP_STATE)

    def receives(self, n):
        for i in range(n):
            sge = SGE(self.b.mr.buf + i * MSG, MSG, self.b.mr.lkey)
            self.b.qp.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[sge]))

    def test_sqd_finishes_what_started_and_starts_nothing_more(self):
        self.move(e.IBV_QPS_SQD)
        self.receives(POSTED)
        wcs = self.a.drain(1.0)
        self.assertEqual([(w.wr_id, w.status) for w in wcs],
                         [(i, e.IBV_WC_SUCCESS) for i in range(STARTED_MAX)])
        self.assertEqual(len(self.b.drain(0.2)), STARTED_MAX)
        # Back to RTS: the rest start, in order.
        self.move(e.IBV_QPS_RTS)
        wcs = self.a.drain(2.0)
        self.assertEqual([(w.wr_id, w.status) for w in wcs],
                         [(i, e.IBV_WC_SUCCESS) for i in range(STARTED_MAX, POSTED)])
        self.assertEqual(len(self.b.drain(0.2)), POSTED - STARTED_MAX)

    def test_the_error_state_flushes_started_and_waiting_wqes_once_in_order(self):
        self.move(e.IBV_QPS_ERR)
        wcs = self.a.drain(1.0)
        self.assertEqual([(w.wr_id, w.status) for w in wcs],
                         [(i, e.IBV_WC_WR_FLUSH_ERR) for i in range(POSTED)])


if __name__ == "__main__":
    unittest.main(verbosity=2)

#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Work requests that a QP in the error state completes with IBV_WC_WR_FLUSH_ERR.

Receives and sends are posted by rdma-core's rxe provider straight into the shared rings; when
the QP goes to the error state (or is in it when the doorbell rings) ferroce reads them back and
writes flush completions into the CQ rings, which the provider polls. The ring-scribbling case
overwrites the indices in the process's mapped rings with garbage first: the kernel must mask
them, stay within the rings and complete at most a ring's worth.
"""

import ctypes
import os
import select
import sys
import unittest

import pyverbs.enums as e
from pyverbs.cq import CQ, CompChannel
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

DEV = sys.argv.pop(1) if len(sys.argv) > 1 else "fer0"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ferroce_pyverbs import event_fds  # noqa: E402


def to_error(qp):
    qa = QPAttr()
    qa.qp_state = e.IBV_QPS_ERR
    qp.modify(qa, e.IBV_QP_STATE)


def poll_all(cq, want):
    wcs = []
    for _ in range(100):
        n, got = cq.poll(want - len(wcs))
        wcs += got[:n]
        if len(wcs) >= want:
            break
    return wcs


class FlushTest(unittest.TestCase):
    def setUp(self):
        self.ctx = Context(name=DEV)
        self.pd = PD(self.ctx)
        self.ch = CompChannel(self.ctx)
        self.scq = CQ(self.ctx, 64)
        self.rcq = CQ(self.ctx, 64, None, self.ch, 0)
        self.mr = MR(self.pd, 4096, e.IBV_ACCESS_LOCAL_WRITE)
        cap = QPCap(max_send_wr=16, max_recv_wr=16, max_send_sge=1, max_recv_sge=1)
        self.qp = QP(self.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.scq, rcq=self.rcq,
                                         cap=cap))
        self.qp.to_init(QPAttr(port_num=1))

    def tearDown(self):
        for o in (self.qp, self.mr, self.rcq, self.scq, self.ch, self.pd, self.ctx):
            o.close()

    def sge(self):
        return SGE(self.mr.buf, 64, self.mr.lkey)

    def test_receives_flush_in_order_with_their_wr_ids(self):
        for i in range(10):
            self.qp.post_recv(RecvWR(wr_id=1000 + i, num_sge=1, sg=[self.sge()]))
        self.rcq.req_notify()
        to_error(self.qp)
        # The armed CQ raised its event.
        self.ch.get_cq_event(self.rcq)
        self.rcq.ack_events(1)
        wcs = poll_all(self.rcq, 10)
        self.assertEqual([w.wr_id for w in wcs], list(range(1000, 1010)))
        for w in wcs:
            self.assertEqual(w.status, e.IBV_WC_WR_FLUSH_ERR)
            self.assertEqual(w.opcode & e.IBV_WC_RECV, e.IBV_WC_RECV)
            self.assertEqual(w.qp_num, self.qp.qp_num)
        self.assertEqual(self.rcq.poll(1)[0], 0)

    def test_an_overflowing_cq_raises_cq_err_once(self):
        before = event_fds()
        ctx = Context(name=DEV)
        (event_fd,) = event_fds() - before
        pd = PD(ctx)
        mr = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE)
        # A CQ of 3 entries (a ring of 4) and 8 receives that the error state completes.
        cq = CQ(ctx, 3)
        cap = QPCap(max_send_wr=1, max_recv_wr=8, max_send_sge=1, max_recv_sge=1)
        qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
        try:
            qp.to_init(QPAttr(port_num=1))
            for i in range(8):
                qp.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(mr.buf, 64, mr.lkey)]))
            to_error(qp)
            events = []
            while select.select([event_fd], [], [], 1)[0]:
                ev = ctx.get_async_event()
                events.append(ev.event_type)
                ev.ack()
            self.assertEqual(events, [e.IBV_EVENT_CQ_ERR])
            self.assertEqual([w.wr_id for w in poll_all(cq, 8)], [0, 1, 2])
        finally:
            for o in (qp, cq, mr, pd, ctx):
                o.close()

    def test_sends_posted_in_error_flush_at_the_doorbell(self):
        to_error(self.qp)
        for i in range(5):
            self.qp.post_send(SendWR(wr_id=7 + i, opcode=e.IBV_WR_SEND, num_sge=1,
                                     sg=[self.sge()], send_flags=e.IBV_SEND_SIGNALED))
        wcs = poll_all(self.scq, 5)
        self.assertEqual([w.wr_id for w in wcs], [7, 8, 9, 10, 11])
        self.assertTrue(all(w.status == e.IBV_WC_WR_FLUSH_ERR for w in wcs))
        self.assertTrue(all(w.opcode == e.IBV_WC_SEND for w in wcs))

    def test_scribbled_rings_stay_contained(self):
        for i in range(3):
            self.qp.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[self.sge()]))
        # Overwrite the producer and consumer index of every ring this process maps. (The
        # header's size fields are the provider's to trust; the kernel keeps its own.)
        with open("/proc/self/maps") as maps:
            rings = [int(l.split("-")[0], 16) for l in maps if "uverbs" in l and "rw-s" in l]
        self.assertEqual(len(rings), 4, "CQ, CQ, RQ and SQ rings are mapped")
        index = lambda at: ctypes.c_uint32.from_address(at)
        for start in rings:
            for off in (128, 256):
                index(start + off).value = 0xDEADBEEF
        # The kernel flushes what the garbage producer indices claim, masked to the rings: the
        # CQs' producers and the work queues' consumers come back in range. (The provider's
        # own reads of garbage indices are not masked, so this process no longer polls.)
        to_error(self.qp)
        for start in rings:
            prod, cons = index(start + 128).value, index(start + 256).value
            self.assertLess(min(prod, cons), 1 << 16, f"ring at {start:#x}: {prod:#x} {cons:#x}")
        # The device still works for a fresh QP.
        qp = QP(self.pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=self.scq, rcq=self.scq,
                                    cap=QPCap(max_send_wr=4, max_recv_wr=4)))
        qp.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)

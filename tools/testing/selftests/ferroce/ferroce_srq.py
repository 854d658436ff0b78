#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Shared receive queues: verbs, traffic from several QPs into one SRQ, limit and last-WQE
events, resizing under posted WQEs, and WQEs a QP took when it fails.

  ferroce_srq.py DEV ADDR PEER_NS PEER_ADDR PEER_DEV

The SRQ side is DEV (address ADDR); senders are QPs of PEER_DEV (on PEER_ADDR), or crafted
packets from PEER_NS (roce_inject) where a test needs a message cut short.
"""

import errno
import os
import select
import sys
import time
import unittest

import pyverbs.enums as e
from pyverbs.addr import AH, AHAttr, GID, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

if len(sys.argv) != 6:
    sys.exit(__doc__)
DEV, ADDR, PEER_NS, PEER_ADDR, PEER_DEV = sys.argv[1:6]
del sys.argv[1:]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import roce_inject  # noqa: E402
from ferroce_pyverbs import (  # noqa: E402
    MR_LEN, RECV_NUM_SGE, RECV_SGES, REMOTE, RQ_PSN, Endpoint, connect, connect_uc, counters,
    event_fds, gid_index, mapped, mapped_rings, poll, scribble)

MAX_SRQ_WR = 1 << 20  # limits.rs, as C rxe
MAX_SRQ_SGE = 27
RECV_LEN = 4096
QKEY = 0x11111111
FAKE_PEER_QPN = 0x77


class SrqSide:
    """A context, PD, CQ, an SRQ with WQEs of RECV_LEN bytes, and QPs on it in INIT."""

    def __init__(self, max_wr=16, nqps=1, qp_type=e.IBV_QPT_RC, nbufs=64, max_sge=2,
                 qp_pd=False):
        before = event_fds()
        self.ctx = Context(name=DEV)
        (self.event_fd,) = event_fds() - before
        self.gid_index = gid_index(self.ctx, ADDR)
        self.pd = PD(self.ctx)
        # With `qp_pd`, the QPs are of a PD of their own; the SRQ and its buffers of `pd`.
        self.qp_pd = PD(self.ctx) if qp_pd else self.pd
        self.cq = CQ(self.ctx, 256)
        self.srq = SRQ(self.pd, SrqInitAttr(SrqAttr(max_wr=max_wr, max_sge=max_sge)))
        self.buf = MR(self.pd, RECV_LEN * nbufs, e.IBV_ACCESS_LOCAL_WRITE)
        self.target = MR(self.qp_pd, MR_LEN, REMOTE)
        self.nbufs = nbufs
        self.qp_type = qp_type
        self.qps = [self.new_qp() for _ in range(nqps)]

    def new_qp(self):
        # Receive caps are ignored on an SRQ, even beyond the device's limits.
        cap = QPCap(max_send_wr=4, max_recv_wr=1 << 20, max_send_sge=1, max_recv_sge=1000)
        qp = QP(self.qp_pd, QPInitAttr(qp_type=self.qp_type, scq=self.cq, rcq=self.cq,
                                       srq=self.srq, cap=cap))
        qa = QPAttr(port_num=1)
        qa.qp_state = e.IBV_QPS_INIT
        mask = e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT
        if self.qp_type == e.IBV_QPT_UD:
            qa.qkey = QKEY
            mask |= e.IBV_QP_QKEY
        else:
            qa.qp_access_flags = e.IBV_ACCESS_REMOTE_WRITE
            mask |= e.IBV_QP_ACCESS_FLAGS
        qp.modify(qa, mask)
        return qp

    def post(self, wr_id, mr=None):
        """Posts a WQE whose buffer is slot `wr_id % nbufs` (of `mr`, by default the SRQ's
        buffers), in two SGEs."""
        mr = mr or self.buf
        at = mr.buf + (wr_id % self.nbufs) * RECV_LEN
        half = RECV_LEN // 2
        sges = [SGE(at, half, mr.lkey), SGE(at + half, half, mr.lkey)]
        self.srq.post_recv(RecvWR(wr_id=wr_id, num_sge=2, sg=sges))

    def landed(self, wr_id, n):
        return self.buf.read(n, (wr_id % self.nbufs) * RECV_LEN)

    def event(self, seconds=3):
        """The next async event's type, or None if none comes within `seconds`."""
        ready, _, _ = select.select([self.event_fd], [], [], seconds)
        if not ready:
            return None
        ev = self.ctx.get_async_event()
        kind = ev.event_type
        ev.ack()
        return kind

    def error(self, qp):
        qa = QPAttr()
        qa.qp_state = e.IBV_QPS_ERR
        qp.modify(qa, e.IBV_QP_STATE)

    def close(self):
        for o in self.qps + [self.srq, self.buf, self.target, self.cq, self.qp_pd, self.pd,
                             self.ctx]:
            o.close()


def payload(i, n):
    return bytes((i * 7 + k) & 0xff for k in range(n))


class SrqVerbs(unittest.TestCase):
    """Create, query and modify without traffic."""

    def setUp(self):
        self.side = SrqSide()

    def tearDown(self):
        self.side.close()

    def refused(self, fn, err=errno.EINVAL):
        with self.assertRaises(PyverbsRDMAError) as cm:
            fn()
        self.assertEqual(cm.exception.error_code, err)

    def test_sizes_are_checked_and_the_real_ones_reported(self):
        attr = self.side.srq.query()
        # 16 WQEs asked: a ring of 32 slots, one kept free.
        self.assertEqual((attr.max_wr, attr.max_sge, attr.srq_limit), (31, 2, 0))
        pd = self.side.pd
        for max_wr, max_sge in ((0, 1), (MAX_SRQ_WR + 1, 1), (4, MAX_SRQ_SGE + 1)):
            self.refused(lambda: SRQ(pd, SrqInitAttr(SrqAttr(max_wr=max_wr, max_sge=max_sge))))
        # A limit asked at creation is ignored (`ibv_create_srq`): only modify arms it.
        srq = SRQ(pd, SrqInitAttr(SrqAttr(max_wr=4, max_sge=1, srq_limit=2)))
        self.assertEqual(srq.query().srq_limit, 0)
        srq.close()

    def test_a_limit_never_exceeds_the_size(self):
        srq = self.side.srq
        self.refused(lambda: srq.modify(SrqAttr(srq_limit=32), e.IBV_SRQ_LIMIT))
        srq.modify(SrqAttr(srq_limit=20), e.IBV_SRQ_LIMIT)
        self.assertEqual(srq.query().srq_limit, 20)
        # Resizing below the armed limit is refused too; the size stays.
        self.refused(lambda: srq.modify(SrqAttr(max_wr=8), e.IBV_SRQ_MAX_WR))
        self.assertEqual(srq.query().max_wr, 31)
        self.refused(lambda: srq.modify(SrqAttr(max_wr=MAX_SRQ_WR + 1), e.IBV_SRQ_MAX_WR))

    def test_a_qp_on_an_srq_has_no_receive_queue(self):
        attr, init = self.side.qps[0].query(e.IBV_QP_CAP)
        self.assertEqual((attr.cap.max_recv_wr, attr.cap.max_recv_sge), (0, 0))


class SrqRc(unittest.TestCase):
    """RC QPs of PEER_DEV sending into QPs of DEV that share one SRQ."""

    def make(self, n, max_wr=16, rnr_retry=1, qp_pd=False):
        self.side = SrqSide(max_wr=max_wr, nqps=n, qp_pd=qp_pd)
        self.senders = []
        for qp in self.side.qps:
            s = Endpoint(PEER_DEV, PEER_ADDR, recvs=0)
            connect(qp, PEER_ADDR, self.side.gid_index, s.qp.qp_num)
            connect(s.qp, ADDR, s.gid_index, qp.qp_num, rnr_retry=rnr_retry)
            self.senders.append(s)

    def tearDown(self):
        for s in getattr(self, "senders", []):
            s.close()
        if hasattr(self, "side"):
            self.side.close()

    def send(self, k, i, n):
        """Sender `k` sends message `i`: `n` bytes of payload(i)."""
        s = self.senders[k]
        s.mr.write(payload(i, n), n, 0)
        s.qp.post_send(SendWR(wr_id=i, opcode=e.IBV_WR_SEND, num_sge=1,
                              sg=[SGE(s.mr.buf, n, s.mr.lkey)]))
        (wc,) = poll(s.cq, 1)
        self.assertEqual((wc.wr_id, wc.status), (i, e.IBV_WC_SUCCESS))

    def received(self, count):
        wcs = poll(self.side.cq, count)
        self.assertEqual(len(wcs), count, "receives missing")
        for wc in wcs:
            self.assertEqual((wc.status, wc.opcode), (e.IBV_WC_SUCCESS, e.IBV_WC_RECV))
        return wcs

    def test_messages_of_three_qps_take_wqes_in_arrival_order(self):
        self.make(3)
        for i in range(12):
            self.side.post(i)
        sizes = [1, 3000, 700, 4096]
        expected = []
        for i in range(12):
            k, n = i % 3, sizes[i % 4]
            self.send(k, i, n)
            expected.append((i, self.side.qps[k].qp_num, n))
        wcs = self.received(12)
        # Each message took the oldest WQE left, whichever QP it came to.
        self.assertEqual([(w.wr_id, w.qp_num, w.byte_len) for w in wcs], expected)
        for wr_id, _, n in expected:
            self.assertEqual(self.side.landed(wr_id, n), payload(wr_id, n))

    def test_an_empty_srq_rnr_naks_until_a_wqe_is_posted(self):
        self.make(1, rnr_retry=7)
        rnr = counters(DEV)["send_rnr_err"]
        s = self.senders[0]
        s.mr.write(payload(5, 100), 100, 0)
        s.qp.post_send(SendWR(wr_id=5, opcode=e.IBV_WR_SEND, num_sge=1,
                              sg=[SGE(s.mr.buf, 100, s.mr.lkey)]))
        for _ in range(100):
            if counters(DEV)["send_rnr_err"] > rnr:
                break
            time.sleep(0.05)
        self.assertGreater(counters(DEV)["send_rnr_err"], rnr, "no RNR NAK was sent")
        self.assertEqual(poll(self.side.cq, 1, seconds=0.1), [])
        self.side.post(5)
        (wc,) = self.received(1)
        self.assertEqual((wc.wr_id, wc.byte_len), (5, 100))
        self.assertEqual(self.side.landed(5, 100), payload(5, 100))
        (wc,) = poll(s.cq, 1)
        self.assertEqual(wc.status, e.IBV_WC_SUCCESS)

    def test_the_limit_event_comes_once_below_the_limit(self):
        self.make(2)
        for i in range(6):
            self.side.post(i)
        self.side.srq.modify(SrqAttr(srq_limit=3), e.IBV_SRQ_LIMIT)
        self.send(0, 0, 10)
        self.send(1, 1, 10)
        self.send(0, 2, 10)
        self.received(3)
        # 3 left: not below the limit yet.
        self.assertIsNone(self.side.event(seconds=0.5))
        self.send(1, 3, 10)
        self.received(1)
        self.assertEqual(self.side.event(), e.IBV_EVENT_SRQ_LIMIT_REACHED)
        # It disarmed: no second event.
        self.assertEqual(self.side.srq.query().srq_limit, 0)
        self.send(0, 4, 10)
        self.received(1)
        self.assertIsNone(self.side.event(seconds=0.5))

    def test_a_resize_keeps_the_wqes_posted(self):
        self.make(2, max_wr=7)
        for i in range(5):
            self.side.post(i)
        # Too small for the 5 posted: refused, the old ring goes on.
        with self.assertRaises(PyverbsRDMAError) as cm:
            self.side.srq.modify(SrqAttr(max_wr=3), e.IBV_SRQ_MAX_WR)
        self.assertEqual(cm.exception.error_code, errno.EINVAL)
        self.send(0, 0, 64)
        self.side.srq.modify(SrqAttr(max_wr=40), e.IBV_SRQ_MAX_WR)
        self.assertEqual(self.side.srq.query().max_wr, 63)
        for i in range(5, 40):
            self.side.post(i)
        for i in range(1, 40):
            self.send(i % 2, i, 64 + i)
        wcs = self.received(40)
        self.assertEqual([w.wr_id for w in wcs], list(range(40)))
        for i in range(40):
            self.assertEqual(self.side.landed(i, 64 + i), payload(i, 64 + i))

    def test_write_with_immediate_takes_a_wqe(self):
        self.make(2)
        self.side.post(0)
        self.side.post(1)
        s, t = self.senders[1], self.side.target
        s.mr.write(payload(3, 300), 300, 0)
        wr = SendWR(wr_id=9, opcode=e.IBV_WR_RDMA_WRITE_WITH_IMM, num_sge=1,
                    sg=[SGE(s.mr.buf, 300, s.mr.lkey)], imm_data=0x1234)
        wr.set_wr_rdma(t.rkey, t.buf + 100)
        s.qp.post_send(wr)
        (wc,) = poll(s.cq, 1)
        self.assertEqual(wc.status, e.IBV_WC_SUCCESS)
        (wc,) = poll(self.side.cq, 1)
        self.assertEqual((wc.wr_id, wc.qp_num, wc.opcode, wc.byte_len, wc.status),
                         (0, self.side.qps[1].qp_num, e.IBV_WC_RECV_RDMA_WITH_IMM, 300,
                          e.IBV_WC_SUCCESS))
        self.assertEqual(t.read(300, 100), payload(3, 300))
        # The next message takes the next WQE.
        self.send(0, 1, 8)
        (wc,) = self.received(1)
        self.assertEqual(wc.wr_id, 1)

    def test_the_keys_of_srq_wqes_are_the_srqs_pd(self):
        # The QPs are of one PD, the SRQ and its buffers of another: the WQEs land.
        self.make(1, qp_pd=True)
        self.side.post(0)
        self.send(0, 0, 50)
        (wc,) = self.received(1)
        self.assertEqual(self.side.landed(0, 50), payload(0, 50))
        # A buffer of the QP's PD is not the SRQ's to name: that receive fails.
        self.side.post(1, mr=self.side.target)
        s = self.senders[0]
        s.qp.post_send(SendWR(wr_id=1, opcode=e.IBV_WR_SEND, num_sge=1,
                              sg=[SGE(s.mr.buf, 8, s.mr.lkey)]))
        (wc,) = poll(self.side.cq, 1)
        self.assertEqual((wc.wr_id, wc.status), (1, e.IBV_WC_LOC_PROT_ERR))
        self.assertEqual(self.side.event(), e.IBV_EVENT_QP_LAST_WQE_REACHED)

    def test_a_failed_qp_raises_last_wqe_and_the_others_go_on(self):
        self.make(2)
        for i in range(4):
            self.side.post(i)
        self.side.error(self.side.qps[0])
        self.assertEqual(self.side.event(), e.IBV_EVENT_QP_LAST_WQE_REACHED)
        # The SRQ's WQEs were not the failed QP's: none is flushed, the other QP takes them.
        self.assertEqual(poll(self.side.cq, 1, seconds=0.3), [])
        self.send(1, 0, 32)
        (wc,) = self.received(1)
        self.assertEqual((wc.wr_id, wc.qp_num), (0, self.side.qps[1].qp_num))
        # Once only.
        self.side.error(self.side.qps[0])
        self.assertIsNone(self.side.event(seconds=0.5))


class SrqCutShort(unittest.TestCase):
    """UC QPs on an SRQ, sent crafted packets from PEER_NS (path MTU 256), so that a message
    can stop midway: the WQE it took stays the QP's."""

    MTU = 256

    def setUp(self):
        self.side = SrqSide(nqps=2, qp_type=e.IBV_QPT_UC)
        for qp in self.side.qps:
            connect_uc(qp, PEER_ADDR, self.side.gid_index, FAKE_PEER_QPN, mtu=e.IBV_MTU_256)
        self.peer = roce_inject.Sender(PEER_ADDR, ADDR, ns=PEER_NS)
        for i in range(3):
            self.side.post(i)

    def tearDown(self):
        self.peer.close()
        self.side.close()

    def inject(self, qp, case, psn, n, counter="rcvd_pkts"):
        """Sends CASE to `qp` and waits until DEV's COUNTER says it was taken."""
        before = counters(DEV)[counter]
        self.peer.send(self.peer.packet(case, qpn=qp.qp_num, psn=psn & 0xffffff, payload=n))
        for _ in range(100):
            if counters(DEV)[counter] > before:
                return
            time.sleep(0.05)
        self.fail(f"{case} to QP {qp.qp_num} was not taken")

    def test_a_message_cut_short_keeps_its_wqe_for_the_next(self):
        qp0, qp1 = self.side.qps
        self.inject(qp0, "uc_send_first", RQ_PSN, self.MTU)
        # The last packet is lost: a new message on qp0 lands in the WQE the first one took,
        # while qp1's message takes the next.
        self.inject(qp1, "uc_send_only", RQ_PSN, 16)
        self.inject(qp0, "uc_send_only", RQ_PSN + 3, 24, counter="out_of_seq_request")
        wcs = poll(self.side.cq, 2)
        self.assertEqual(sorted((w.qp_num, w.wr_id, w.byte_len, w.status) for w in wcs),
                         sorted([(qp1.qp_num, 1, 16, e.IBV_WC_SUCCESS),
                                 (qp0.qp_num, 0, 24, e.IBV_WC_SUCCESS)]))

    def test_a_failed_qp_flushes_the_wqe_it_took(self):
        qp0 = self.side.qps[0]
        self.inject(qp0, "uc_send_first", RQ_PSN, self.MTU)
        self.side.error(qp0)
        (wc,) = poll(self.side.cq, 1)
        self.assertEqual((wc.wr_id, wc.status, wc.qp_num), (0, e.IBV_WC_WR_FLUSH_ERR, qp0.qp_num))
        self.assertEqual(self.side.event(), e.IBV_EVENT_QP_LAST_WQE_REACHED)
        # The rest stayed in the SRQ.
        self.assertEqual(poll(self.side.cq, 1, seconds=0.3), [])
        self.inject(self.side.qps[1], "uc_send_only", RQ_PSN, 8)
        (wc,) = poll(self.side.cq, 1)
        self.assertEqual((wc.wr_id, wc.status), (1, e.IBV_WC_SUCCESS))


    def test_a_reset_qp_flushes_the_wqe_it_took(self):
        qp0 = self.side.qps[0]
        self.inject(qp0, "uc_send_first", RQ_PSN, self.MTU)
        qa = QPAttr()
        qa.qp_state = e.IBV_QPS_RESET
        qp0.modify(qa, e.IBV_QP_STATE)
        (wc,) = poll(self.side.cq, 1)
        self.assertEqual((wc.wr_id, wc.status), (0, e.IBV_WC_WR_FLUSH_ERR))

    def test_a_scribbled_wqe_fails_its_message_and_its_qp_alone(self):
        before = mapped_rings()
        srq = SRQ(self.side.pd, SrqInitAttr(SrqAttr(max_wr=4, max_sge=3)))
        (ring,) = [(b, m, z) for b, (m, z) in mapped_rings().items() if b not in before]
        qp = QP(self.side.pd, QPInitAttr(qp_type=e.IBV_QPT_UC, scq=self.side.cq,
                                         rcq=self.side.cq, srq=srq,
                                         cap=QPCap(max_send_wr=1, max_send_sge=1)))
        try:
            qa = QPAttr(port_num=1)
            qa.qp_state = e.IBV_QPS_INIT
            qa.qp_access_flags = e.IBV_ACCESS_REMOTE_WRITE
            qp.modify(qa, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT |
                      e.IBV_QP_ACCESS_FLAGS)
            connect_uc(qp, PEER_ADDR, self.side.gid_index, FAKE_PEER_QPN, mtu=e.IBV_MTU_256)
            sge = (self.side.buf.buf, 64, self.side.buf.lkey)
            scribble(ring, 7, {RECV_NUM_SGE: ("I", 1000)}, [sge], RECV_SGES)
            self.inject(qp, "uc_send_only", RQ_PSN, 8, counter="resp_cqe_error")
            (wc,) = poll(self.side.cq, 1)
            self.assertEqual((wc.wr_id, wc.status, wc.qp_num),
                             (7, e.IBV_WC_LOC_LEN_ERR, qp.qp_num))
            self.assertEqual(self.side.event(), e.IBV_EVENT_QP_LAST_WQE_REACHED)
            # The other SRQ and its QPs were not touched.
            self.inject(self.side.qps[0], "uc_send_only", RQ_PSN, 8)
            (wc,) = poll(self.side.cq, 1)
            self.assertEqual((wc.wr_id, wc.status), (0, e.IBV_WC_SUCCESS))
        finally:
            qp.close()
            srq.close()


class SrqUd(unittest.TestCase):
    """Two UD QPs on one SRQ, sent datagrams by a UD QP of PEER_DEV."""

    def setUp(self):
        self.side = SrqSide(nqps=2, qp_type=e.IBV_QPT_UD)
        for qp in self.side.qps:
            qa = QPAttr()
            qa.qp_state = e.IBV_QPS_RTR
            qp.modify(qa, e.IBV_QP_STATE)
            qa = QPAttr()
            qa.qp_state = e.IBV_QPS_RTS
            qa.sq_psn = 0
            qp.modify(qa, e.IBV_QP_STATE | e.IBV_QP_SQ_PSN)
        self.ctx = Context(name=PEER_DEV)
        self.pd = PD(self.ctx)
        self.cq = CQ(self.ctx, 16)
        self.mr = MR(self.pd, MR_LEN, e.IBV_ACCESS_LOCAL_WRITE)
        cap = QPCap(max_send_wr=8, max_recv_wr=1, max_send_sge=1, max_recv_sge=1)
        self.qp = QP(self.pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=self.cq, rcq=self.cq,
                                         cap=cap))
        qa = QPAttr(port_num=1)
        qa.qkey = QKEY
        self.qp.to_rts(qa)
        gr = GlobalRoute(dgid=GID(mapped(ADDR)), sgid_index=gid_index(self.ctx, PEER_ADDR),
                         hop_limit=64)
        self.ah = AH(self.pd, attr=AHAttr(port_num=1, is_global=1, gr=gr))

    def tearDown(self):
        for o in (self.ah, self.qp, self.mr, self.cq, self.pd, self.ctx):
            o.close()
        self.side.close()

    def test_datagrams_to_two_qps_land_in_one_srq(self):
        for i in range(6):
            self.side.post(i)
        for i in range(6):
            dest = self.side.qps[i % 2]
            self.mr.write(payload(i, 200), 200, 0)
            wr = SendWR(wr_id=i, opcode=e.IBV_WR_SEND, num_sge=1,
                        sg=[SGE(self.mr.buf, 200, self.mr.lkey)])
            wr.set_wr_ud(self.ah, dest.qp_num, QKEY)
            self.qp.post_send(wr)
            (wc,) = poll(self.cq, 1)
            self.assertEqual(wc.status, e.IBV_WC_SUCCESS)
            (wc,) = poll(self.side.cq, 1)
            # The GRH comes first (40 bytes), then the datagram.
            self.assertEqual((wc.wr_id, wc.qp_num, wc.byte_len, wc.status),
                             (i, dest.qp_num, 240, e.IBV_WC_SUCCESS))
            self.assertEqual(self.side.landed(i, 240)[40:], payload(i, 200))


if __name__ == "__main__":
    unittest.main(verbosity=2)

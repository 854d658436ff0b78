#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""RDMA FLUSH (IBA 1.5, opcode 0x1C): requested by an RC QP of DEV, answered by one of PEER_DEV,
and crafted from PEER_NS at a QP of DEV.

  ferroce_rdma_flush.py DEV ADDR PEER_NS PEER_ADDR PEER_DEV

The distribution's rdma-core has no ibv_wr_flush, so FLUSH WQEs are written into the send ring
as rdma-core's rxe provider would write them (struct rxe_send_wqe, wr.flush), then a WR posted
behind them rings the doorbell.
"""

import errno
import os
import sys
import time
import unittest

import pyverbs.enums as e
from pyverbs.mr import MR
from pyverbs.wr import SGE, SendWR

if len(sys.argv) != 6:
    sys.exit(__doc__)
DEV, ADDR, PEER_NS, PEER_ADDR, PEER_DEV = sys.argv[1:6]
del sys.argv[1:]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import roce_inject  # noqa: E402
from ferroce_pyverbs import (  # noqa: E402
    MR_LEN, REMOTE, RQ_PSN, WQE_FLAGS, WQE_LENGTH, WQE_OPCODE, WQE_SGES, Endpoint, connect,
    counters, mapped_rings, poll, scribble)
from pyverbs.pyverbs_error import PyverbsRDMAError  # noqa: E402

# The distribution's pyverbs lacks these (rdma-core 44).
IBV_ACCESS_FLUSH_GLOBAL = 1 << 8
IBV_ACCESS_FLUSH_PERSISTENT = 1 << 9
IBV_WR_FLUSH = 14
IBV_WC_FLUSH = 8
GLOBAL, PERSISTENT = 1, 2
RANGE, REGION = 0, 1
# struct rxe_send_wqe's wr.flush; its length is dma.length (WQE_LENGTH), as rdma-core writes it.
FLUSH_VA, FLUSH_RKEY, FLUSH_TYPE, FLUSH_LEVEL = 24, 36, 40, 41
RC_RDMA_READ_RESPONSE_ONLY = 0x10
FAKE_PEER_QPN = 0x77
RIGHTS = e.IBV_ACCESS_REMOTE_READ | IBV_ACCESS_FLUSH_GLOBAL


class FlushPeers(unittest.TestCase):
    """fer0's QP flushes writes it made to fer1's region."""

    def setUp(self, rc_access=RIGHTS, mr_access=REMOTE | IBV_ACCESS_FLUSH_GLOBAL,
              max_rd_atomic=1):
        before = mapped_rings()
        self.a = Endpoint(DEV, ADDR, recvs=0)
        # Its send ring: the one of its rings with slots of 256 bytes or more.
        (self.ring,) = [(b, m, z) for b, (m, z) in mapped_rings().items()
                        if b not in before and z >= 256]
        self.b = Endpoint(PEER_DEV, PEER_ADDR, recvs=0, rc_access=rc_access)
        self.target = MR(self.b.pd, MR_LEN, mr_access)
        connect(self.a.qp, PEER_ADDR, self.a.gid_index, self.b.qp.qp_num,
                max_rd_atomic=max_rd_atomic)
        connect(self.b.qp, ADDR, self.b.gid_index, self.a.qp.qp_num)

    def tearDown(self):
        self.target.close()
        self.a.close()
        self.b.close()

    def write(self, wr_id, data, at=0):
        a = self.a
        a.mr.write(data, len(data), 0)
        wr = SendWR(wr_id=wr_id, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
                    sg=[SGE(a.mr.buf, len(data), a.mr.lkey)], send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_rdma(self.target.rkey, self.target.buf + at)
        a.qp.post_send(wr)

    def flush(self, wr_id, placement=GLOBAL, level=RANGE, va=None, length=MR_LEN, rkey=None):
        """Writes a FLUSH WQE into the send ring; the next post rings the doorbell."""
        fields = {WQE_OPCODE: ("I", IBV_WR_FLUSH), WQE_FLAGS: ("I", e.IBV_SEND_SIGNALED),
                  FLUSH_VA: ("Q", self.target.buf if va is None else va),
                  WQE_LENGTH: ("I", length),
                  FLUSH_RKEY: ("I", self.target.rkey if rkey is None else rkey),
                  FLUSH_TYPE: ("B", placement), FLUSH_LEVEL: ("B", level)}
        scribble(self.ring, wr_id, fields, [], WQE_SGES)

    def completions(self, n):
        return [(w.wr_id, w.status, w.opcode if w.status == e.IBV_WC_SUCCESS else None)
                for w in poll(self.a.cq, n)]

    def test_flushes_after_writes_complete_in_order(self):
        self.write(1, b"\x11" * 512)
        self.write(2, b"\x22" * 512, at=512)
        self.flush(3)
        self.flush(4, level=REGION, va=0, length=0)
        self.write(5, b"\x33" * 8, at=2048)
        self.assertEqual(self.completions(5),
                         [(1, e.IBV_WC_SUCCESS, e.IBV_WC_RDMA_WRITE),
                          (2, e.IBV_WC_SUCCESS, e.IBV_WC_RDMA_WRITE),
                          (3, e.IBV_WC_SUCCESS, IBV_WC_FLUSH),
                          (4, e.IBV_WC_SUCCESS, IBV_WC_FLUSH),
                          (5, e.IBV_WC_SUCCESS, e.IBV_WC_RDMA_WRITE)])
        self.assertEqual(self.target.read(1024, 0), b"\x11" * 512 + b"\x22" * 512)

    def test_a_flush_needs_no_read_credit(self):
        # As C rxe, a FLUSH is not counted against max_rd_atomic: none granted, it still goes.
        self.tearDown()
        self.setUp(max_rd_atomic=0)
        self.flush(1)
        self.write(2, b"\x66" * 8)
        self.assertEqual(self.completions(2), [(1, e.IBV_WC_SUCCESS, IBV_WC_FLUSH),
                                               (2, e.IBV_WC_SUCCESS, e.IBV_WC_RDMA_WRITE)])

    def refused_remotely(self, **flush):
        self.flush(1, **flush)
        self.write(2, b"\x44" * 8)
        self.assertEqual(self.completions(2),
                         [(1, e.IBV_WC_REM_ACCESS_ERR, None), (2, e.IBV_WC_WR_FLUSH_ERR, None)])

    def test_a_flush_past_the_region_is_refused(self):
        self.refused_remotely(va=self.target.buf + MR_LEN - 8, length=16)

    def test_persistence_is_refused(self):
        # No region can allow it: the device does not offer it, so the core refuses to
        # register one that asks; a QP granting it finds no key that allows it.
        with self.assertRaises(PyverbsRDMAError) as cm:
            MR(self.b.pd, MR_LEN, REMOTE | IBV_ACCESS_FLUSH_PERSISTENT)
        self.assertEqual(cm.exception.error_code, errno.EOPNOTSUPP)
        self.tearDown()
        self.setUp(rc_access=RIGHTS | IBV_ACCESS_FLUSH_PERSISTENT)
        self.refused_remotely(placement=GLOBAL | PERSISTENT)

    def test_a_region_with_flush_rights_only_has_a_remote_key(self):
        self.tearDown()
        self.setUp(mr_access=e.IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_FLUSH_GLOBAL)
        self.assertNotEqual(self.target.rkey, 0)
        self.flush(1, level=REGION, va=0, length=0)
        self.flush(2)
        self.write(3, b"\x77" * 8)
        # The region takes FLUSHes, not WRITEs.
        self.assertEqual(self.completions(3), [(1, e.IBV_WC_SUCCESS, IBV_WC_FLUSH),
                                               (2, e.IBV_WC_SUCCESS, IBV_WC_FLUSH),
                                               (3, e.IBV_WC_REM_ACCESS_ERR, None)])

    def test_a_region_without_flush_rights_is_refused(self):
        self.tearDown()
        self.setUp(mr_access=REMOTE)
        self.refused_remotely(level=REGION)

    def test_a_qp_without_flush_rights_refuses(self):
        self.tearDown()
        self.setUp(rc_access=e.IBV_ACCESS_REMOTE_READ)
        self.refused_remotely()

    def test_a_flush_no_verb_has_fails_before_the_wire(self):
        sent = counters(DEV)["sent_pkts"]
        self.flush(1, placement=0)
        self.write(2, b"\x55" * 8)
        self.assertEqual(self.completions(2),
                         [(1, e.IBV_WC_LOC_QP_OP_ERR, None), (2, e.IBV_WC_WR_FLUSH_ERR, None)])
        self.assertEqual(counters(DEV)["sent_pkts"], sent)


class InjectedFlush(unittest.TestCase):
    """Crafted FLUSHes from PEER_NS at an RC QP of DEV in RTS: each answered by an empty READ
    response, a duplicate again, and a bad one refused without an answer."""

    def setUp(self, max_dest_rd_atomic=1):
        self.ep = Endpoint(DEV, ADDR, rc_access=RIGHTS)
        self.mr = MR(self.ep.pd, MR_LEN, REMOTE | IBV_ACCESS_FLUSH_GLOBAL)
        connect(self.ep.qp, PEER_ADDR, self.ep.gid_index, FAKE_PEER_QPN,
                max_dest_rd_atomic=max_dest_rd_atomic)
        self.peer = roce_inject.Sender(PEER_ADDR, ADDR, ns=PEER_NS)

    def tearDown(self):
        self.peer.close()
        self.mr.close()
        self.ep.close()

    def answers(self, psn, **fields):
        """The packets DEV sends back for a FLUSH at `psn`: (opcode, psn, syndrome)."""
        fields = dict(dict(rkey=self.mr.rkey, va=self.mr.buf, length=64), **fields)
        with roce_inject.Capture(PEER_NS, ADDR) as cap:
            self.peer.send(self.peer.packet("rc_flush", qpn=self.ep.qp.qp_num, psn=psn,
                                            **fields))
            return cap.packets(lambda got: got, 3)

    def test_a_flush_and_its_duplicate_are_answered_alike(self):
        self.assertEqual(self.answers(RQ_PSN), [(RC_RDMA_READ_RESPONSE_ONLY, RQ_PSN, None)])
        dup = counters(DEV)["duplicate_request"]
        self.assertEqual(self.answers(RQ_PSN), [(RC_RDMA_READ_RESPONSE_ONLY, RQ_PSN, None)])
        self.assertEqual(counters(DEV)["duplicate_request"], dup + 1)
        # The whole region, whatever the RETH's address.
        self.assertEqual(self.answers(RQ_PSN + 1, level=REGION, va=0, length=0),
                         [(RC_RDMA_READ_RESPONSE_ONLY, RQ_PSN + 1, None)])

    def test_a_qp_that_granted_no_reads_takes_a_flush(self):
        # Requesters do not count FLUSHes against what the responder granted (C rxe's does not).
        self.tearDown()
        self.setUp(max_dest_rd_atomic=0)
        self.assertEqual(self.answers(RQ_PSN), [(RC_RDMA_READ_RESPONSE_ONLY, RQ_PSN, None)])

    def test_a_flush_no_verb_has_or_a_wrong_key_is_refused(self):
        # NAK invalid request: AETH syndrome 0x61.
        for fields in (dict(placement=0), dict(placement=4), dict(level=2)):
            self.assertEqual(self.answers(RQ_PSN, **fields), [(0x11, RQ_PSN, 0x61)], fields)
            self.tearDown()
            self.setUp()
        # One with a payload is no FLUSH at all: dropped as malformed, unanswered.
        before = counters(DEV)
        self.assertEqual(self.answers(RQ_PSN, payload=4), [])
        after = counters(DEV)
        drops = {n: after[n] - before[n] for n in after
                 if n.startswith("rcvd_drop_") and after[n] != before[n]}
        self.assertEqual(sum(drops.values()), 1, drops)
        # A wrong key: NAK remote access error (0x62).
        self.assertEqual(self.answers(RQ_PSN, rkey=self.mr.rkey ^ 0x80), [(0x11, RQ_PSN, 0x62)])


if __name__ == "__main__":
    unittest.main(verbosity=2)

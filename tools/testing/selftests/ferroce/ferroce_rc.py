#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Hostile input against live RC and UC queue pairs.

  ferroce_rc.py DEV ADDR PEER_NS PEER_ADDR PEER_DEV

DEV has the address ADDR; PEER_NS is a namespace holding PEER_ADDR, from which roce_inject's Sender
sends crafted requests to a QP of DEV in RTS. PEER_DEV (on PEER_ADDR) is the real peer for the
tests that need one. Each case checks the counter that says what happened, that registered
memory did not change, and that the QP still takes the next good request.

The ring tests scribble a WQE straight into the send ring of this process (where rdma-core's
rxe provider writes them) before ringing the doorbell: the kernel must fail that WQE alone, with
the status its fault deserves, and flush the rest.
"""

import ctypes
import errno
import os
import struct
import sys
import time
import unittest

import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR, MW, MWBind, MWBindInfo
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

if len(sys.argv) != 6:
    sys.exit(__doc__)
DEV, ADDR, PEER_NS, PEER_ADDR, PEER_DEV = sys.argv[1:6]
del sys.argv[1:]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import roce_inject  # noqa: E402
from ferroce_pyverbs import (  # noqa: E402
    IBV_WR_RDMA_READ_OPCODE, MR_LEN, RECV_LEN, RECV_NUM_SGE, RECV_SGES, REMOTE, RQ_PSN,
    WQE_FLAGS, WQE_LENGTH, WQE_NUM_SGE, WQE_OPCODE, WQE_REMOTE_ADDR, WQE_RKEY, WQE_SGES,
    Endpoint, connect, connect_uc, counters, gid_index, kernel_log, mapped_rings, poll,
    scribble)

_peer = []


def peer():
    """The raw socket in PEER_NS that crafted packets leave from (IPv4: any source)."""
    if not _peer:
        _peer.append(roce_inject.Sender(PEER_ADDR, ADDR, ns=PEER_NS))
    return _peer[0]


FAKE_PEER_QPN = 0x77
IB_USER_VERBS_CMD_POST_SEND = 28  # enum ib_uverbs_write_cmds
IB_USER_VERBS_CMD_POST_RECV = 29
SEND_WR_LEN = 56  # struct ib_uverbs_send_wr


class Injecting:
    """Sends crafted requests from PEER_NS to the QP of `self.ep`."""

    def inject(self, case, rises, psn=RQ_PSN, **kw):
        """Sends CASE; the counters in RISES must rise by one, no other request, error or
        drop counter."""
        watched = ("out_of_seq_request", "duplicate_request", "rx_write_requests",
                   "rx_read_requests", "rx_atomic_requests", "resp_remote_access_errors",
                   "resp_invalid_request",
                   "resp_local_length_error", "resp_cqe_error", "rcvd_seq_err",
                   "rcvd_rnr_err", "req_remote_invalid_request", "req_remote_access_errors")
        before = counters(DEV)
        peer().send(peer().packet(case, qpn=self.ep.qp.qp_num, psn=psn & 0xffffff, **kw))
        for _ in range(50):
            after = counters(DEV)
            if all(after[n] > before[n] for n in rises):
                break
            time.sleep(0.1)
        time.sleep(0.1)
        after = counters(DEV)
        rose = {n: after[n] - before[n] for n in after
                if after[n] != before[n] and (n in watched or n.startswith("rcvd_drop_"))}
        self.assertEqual(rose, dict.fromkeys(rises, 1), f"{case} {kw}")


class InjectedRequests(Injecting, unittest.TestCase):
    """Crafted requests from PEER_NS to an RC QP in RTS whose peer does not exist."""

    def setUp(self):
        self.ep = Endpoint(DEV, ADDR)
        connect(self.ep.qp, PEER_ADDR, self.ep.gid_index, FAKE_PEER_QPN)

    def tearDown(self):
        self.ep.close()

    def memory(self):
        return self.ep.mr.read(MR_LEN, 0)

    def reset(self):
        """A fresh endpoint in RTS toward the fake peer."""
        self.ep.close()
        self.setUp()

    def test_requests_that_may_not_land_change_nothing(self):
        wr, rd, acc = "rx_write_requests", "rx_read_requests", "resp_remote_access_errors"
        inv = "resp_invalid_request"

        def cases(mr, denied):
            good = dict(rkey=mr.rkey, va=mr.buf + 64, length=16)
            # A class C error (IBA 9.9.3.1.2: invalid request, remote access) takes the QP to
            # the error state after its NAK, so a peer cannot try rkeys at line rate; the
            # others leave it as it was.
            return [
                ("rc_write", (wr, acc), dict(good, rkey=mr.rkey ^ 0x80), True),
                ("rc_write", (wr, acc), dict(good, va=mr.buf + MR_LEN - 8), True),
                ("rc_write", (wr, acc), dict(good, va=mr.buf - 8), True),
                ("rc_write", (wr, acc), dict(good, rkey=denied.rkey, va=denied.buf), True),
                ("rc_write", (wr, inv), dict(good, payload=8), True),
                ("rc_read", (rd, acc), dict(good, rkey=mr.rkey ^ 0x80), True),
                ("rc_read", (rd, acc), dict(good, length=MR_LEN), True),
                # IBA C9-94: no message is longer than 2^31 bytes.
                ("rc_read", (rd, inv), dict(good, length=0x80000001, payload=0), True),
                ("rc_write", ("out_of_seq_request",), dict(good, psn=RQ_PSN + 0x400000), False),
                ("rc_write", ("duplicate_request",), dict(good, psn=RQ_PSN - 0x400000), False),
                ("bad_icrc", ("rcvd_drop_bad_icrc",), {}, False),
                ("bad_pad", ("rcvd_drop_bad_length",), {}, False),
                ("bad_length", ("rcvd_drop_bad_length",), {}, False),
                ("unknown_opcode", ("rcvd_drop_unknown_opcode",), {}, False),
                ("rc_write", ("rcvd_drop_bad_pkey",), dict(good, pkey=0x1234), False),
                ("rc_write", ("rcvd_drop_bad_address",), dict(good, src="10.70.0.99"), False),
            ]

        for i in range(len(cases(self.ep.mr, self.ep.mr))):
            mr = self.ep.mr
            denied = MR(self.ep.pd, MR_LEN, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_READ)
            self.assertNotIn(mr.rkey ^ 0x80, (mr.rkey, denied.rkey, self.ep.rbuf.rkey))
            case, rises, kw, fatal = cases(mr, denied)[i]
            with self.subTest(case=case, rises=rises, args=kw):
                self.inject(case, rises, **kw)
                self.assertEqual(self.ep.mr.read(MR_LEN, 0), bytes(MR_LEN))
                attr, _ = self.ep.qp.query(e.IBV_QP_STATE)
                want = e.IBV_QPS_ERR if fatal else e.IBV_QPS_RTS
                self.assertEqual(attr.qp_state, want)
            denied.close()
            if fatal:
                self.reset()
        # Nothing else moved the expected PSN or broke the QP: the good write lands.
        mr = self.ep.mr
        good = dict(rkey=mr.rkey, va=mr.buf + 64, length=16)
        self.inject("rc_write", (wr,), **good)
        self.assertEqual(self.memory(), bytes(64) + b"\xa5" * 16 + bytes(MR_LEN - 80))
        self.inject("rc_read", (rd,), psn=RQ_PSN + 1, **good)
        self.assertEqual(poll(self.ep.cq, 1, seconds=0.5), [], "nothing completed")

    def test_a_duplicate_read_of_no_read_answers_nothing(self):
        # Before the expected PSN, but this QP answered no READ there: nothing is read or sent.
        mr = self.ep.mr
        sent = counters(DEV)["sent_pkts"]
        self.inject("rc_read", ("duplicate_request",), psn=RQ_PSN - 5, rkey=mr.rkey,
                    va=mr.buf, length=MR_LEN)
        # Responses would go out from the QP's work, later: give it time.
        time.sleep(1)
        self.assertEqual(counters(DEV)["sent_pkts"], sent)

    def test_no_read_is_taken_without_read_resources(self):
        # max_dest_rd_atomic 0 grants the peer no READ: one is an invalid request (class C).
        self.ep.close()
        self.ep = Endpoint(DEV, ADDR)
        connect(self.ep.qp, PEER_ADDR, self.ep.gid_index, FAKE_PEER_QPN, max_dest_rd_atomic=0)
        mr = self.ep.mr
        self.inject("rc_read", ("rx_read_requests", "resp_invalid_request"), rkey=mr.rkey,
                    va=mr.buf, length=16)
        attr, _ = self.ep.qp.query(e.IBV_QP_STATE)
        self.assertEqual(attr.qp_state, e.IBV_QPS_ERR)

    def test_an_answer_waits_behind_read_responses(self):
        # Responses leave in PSN order (IBA 9.7.5.1.1): the sequence NAK for a request that
        # comes right after a long READ goes out after the READ's last response, not among
        # them, or the requester would take the responses still to come for lost ones. (The
        # request waits in the QP's backlog while the READ is answered.)
        length = 1 << 20
        npkts = length // 1024
        big = MR(self.ep.pd, length, REMOTE)
        qpn = self.ep.qp.qp_num
        read = peer().packet("rc_read", qpn=qpn, psn=RQ_PSN, rkey=big.rkey, va=big.buf,
                             length=length)
        ahead = peer().packet("rc_write", qpn=qpn, psn=RQ_PSN + npkts + 8, rkey=big.rkey,
                              va=big.buf, length=16)

        def is_response(op):
            return roce_inject.RC_RDMA_READ_RESPONSE_FIRST <= op \
                <= roce_inject.RC_RDMA_READ_RESPONSE_ONLY

        def done(got):
            ops = [op for op, _, _ in got]
            return roce_inject.RC_ACKNOWLEDGE in ops and sum(map(is_response, ops)) == npkts

        with roce_inject.Capture(PEER_NS, ADDR) as cap:
            # Both queued at once, so the second is taken while the READ is answered.
            peer().send_burst([read, ahead])
            got = cap.packets(done, 30)
        big.close()
        responses = [i for i, (op, _, _) in enumerate(got) if is_response(op)]
        naks = [(i, psn, syn) for i, (op, psn, syn) in enumerate(got)
                if op == roce_inject.RC_ACKNOWLEDGE]
        self.assertEqual(len(responses), npkts, "every read response captured")
        self.assertEqual([(p, s) for _, p, s in naks], [(RQ_PSN + npkts, 0x60)])
        self.assertGreater(naks[0][0], responses[-1],
                           f"the NAK left after {naks[0][0]} of {npkts} read responses")

    def test_only_a_gap_within_reach_is_naked(self):
        # The first request of a gap draws a sequence NAK for the expected PSN. One more than
        # 64 Ki PSNs ahead was most likely forged by someone who knew the QPN and not the PSN (a
        # real gap is NAKed by the request right after it): dropped unanswered, or its NAK
        # would have the requester send again all it has in flight. It spends no NAK of the gap.
        nak = (roce_inject.RC_ACKNOWLEDGE, RQ_PSN, 0x60)
        for aheads, want in (((1 << 21,), []), (((1 << 23) - 1,), []), ((65537,), []),
                             ((1 << 21, 65536), [nak])):
            with self.subTest(aheads=aheads):
                self.reset()
                mr = self.ep.mr
                with roce_inject.Capture(PEER_NS, ADDR) as cap:
                    for ahead in aheads:
                        self.inject("rc_write", ("out_of_seq_request",), psn=RQ_PSN + ahead,
                                    rkey=mr.rkey, va=mr.buf, length=16)
                    got = cap.packets(lambda got: len(got) > len(want), 1)
                self.assertEqual(got, want)
                self.assertEqual(self.memory()[:16], bytes(16), "nothing landed")

    def test_a_write_whose_region_goes_midway_lands_no_more(self):
        # The region is deregistered between the first and last packets of a WRITE: the last
        # writes nothing, and the region's pages are unpinned in process context (with
        # CONFIG_DEBUG_ATOMIC_SLEEP, an unpin in softirq logs "sleeping function called").
        mr = MR(self.ep.pd, MR_LEN, REMOTE)
        mr.write(bytes(MR_LEN), MR_LEN)
        kmsg_before = kernel_log()
        self.inject("rc_write_first", ("rx_write_requests",), rkey=mr.rkey, va=mr.buf,
                    length=2048, payload=1024)
        self.assertEqual(mr.read(1024, 0), b"\xa5" * 1024)
        mr.close()
        self.inject("rc_write_last", ("resp_remote_access_errors",), psn=RQ_PSN + 1,
                    payload=1024)
        attr, _ = self.ep.qp.query(e.IBV_QP_STATE)
        self.assertEqual(attr.qp_state, e.IBV_QPS_ERR)
        new = kernel_log()[len(kmsg_before):]
        self.assertNotIn("sleeping function called", new)
        self.assertNotIn("scheduling while atomic", new)

    def test_acks_for_psns_never_sent_complete_nothing(self):
        # Long ACK timeout (69 s): the SEND waits for an ACK that the fake peer never sends.
        ep = self.ep
        ep.qp.close()
        ep.qp = ep.new_qp()
        qa = QPAttr(port_num=1)
        ep.qp.to_init(qa)
        connect(ep.qp, PEER_ADDR, ep.gid_index, FAKE_PEER_QPN, timeout=24)
        ep.qp.post_send(SendWR(wr_id=9, opcode=e.IBV_WR_SEND, num_sge=1,
                               sg=[SGE(ep.mr.buf, 8, ep.mr.lkey)],
                               send_flags=e.IBV_SEND_SIGNALED))
        # The SEND took PSN RQ_PSN; ACKs for later PSNs are forged, whatever they claim.
        for psn in (RQ_PSN + 1, RQ_PSN + 0x1000):
            self.inject("ack_unsolicited", ("rcvd_drop_bad_psn",), psn=psn)
        self.assertEqual(poll(ep.cq, 1, seconds=0.2), [], "a forged ACK completed a SEND")
        # The ACK for what was sent completes it.
        self.inject("ack_unsolicited", (), psn=RQ_PSN)
        wcs = poll(ep.cq, 1)
        self.assertEqual([(w.wr_id, w.status) for w in wcs], [(9, e.IBV_WC_SUCCESS)])

    def scribbled_receive(self, status, fields, sges=()):
        """A receive WQE written straight into a fresh QP's receive ring fails alone."""
        ep = self.ep
        ep.qp.close()
        before = mapped_rings()
        ep.qp = ep.new_qp()
        new = {b: r for b, r in mapped_rings().items() if b not in before}
        rq = [(b, m, z) for b, (m, z) in new.items() if z < 256]
        self.assertEqual(len(new), 2, "the QP mapped its two rings")
        self.assertEqual(len(rq), 1, "one of them is the receive ring")
        ep.qp.to_init(QPAttr(port_num=1))
        connect(ep.qp, PEER_ADDR, ep.gid_index, FAKE_PEER_QPN)
        scribble(rq[0], 0xBAD, fields, sges, RECV_SGES)
        rises = ("resp_cqe_error",)
        if status == e.IBV_WC_LOC_LEN_ERR:
            rises += ("resp_local_length_error",)
        self.inject("rc_send", rises, payload=32)
        wcs = poll(ep.cq, 1)
        self.assertEqual([(w.wr_id, w.status) for w in wcs], [(0xBAD, status)])
        attr, _ = ep.qp.query(e.IBV_QP_STATE)
        self.assertEqual(attr.qp_state, e.IBV_QPS_ERR)

    def test_scribbled_receive_with_more_sges_than_its_slot(self):
        self.scribbled_receive(e.IBV_WC_LOC_LEN_ERR, {RECV_NUM_SGE: ("I", 0xFFFF)})

    def test_scribbled_receive_with_a_forged_lkey(self):
        mr = self.ep.rbuf
        self.scribbled_receive(e.IBV_WC_LOC_PROT_ERR, {RECV_NUM_SGE: ("I", 1)},
                               [(mr.buf, RECV_LEN, mr.lkey ^ 0x80)])

    def test_send_longer_than_its_receive_fails_that_receive(self):
        self.inject("rc_send", ("resp_cqe_error", "resp_local_length_error"),
                    payload=RECV_LEN + 8)
        wcs = poll(self.ep.cq, 4)
        self.assertEqual([(w.wr_id, w.status) for w in wcs],
                         [(100, e.IBV_WC_LOC_LEN_ERR)] + [(i, e.IBV_WC_WR_FLUSH_ERR)
                                                          for i in (101, 102, 103)])
        # The error completion took the QP to the error state.
        attr, _ = self.ep.qp.query(e.IBV_QP_STATE)
        self.assertEqual(attr.qp_state, e.IBV_QPS_ERR)


class ForgedResponses(Injecting, unittest.TestCase):
    """ACKs and NAKs from PEER_NS, forged, at an RC QP with one SEND outstanding (PSN RQ_PSN),
    which only the right ACK may complete: one for a PSN never sent, an old one, one from
    another address or with another P_Key changes nothing."""

    SYNDROMES = {"ACK": 0x1f, "RNR NAK": 0x20 | 14, "sequence NAK": 0x60,
                 "invalid request NAK": 0x61, "remote access NAK": 0x62,
                 "remote operational NAK": 0x63, "invalid RD request NAK": 0x64}

    def setUp(self):
        # A long ACK timeout (69 s): nothing is sent again during the test.
        self.open(timeout=24)

    def open(self, **kw):
        """An RC QP connected with KW, its SEND outstanding."""
        self.ep = Endpoint(DEV, ADDR)
        connect(self.ep.qp, PEER_ADDR, self.ep.gid_index, FAKE_PEER_QPN, **kw)
        mr = self.ep.mr
        self.ep.qp.post_send(SendWR(wr_id=9, opcode=e.IBV_WR_SEND, num_sge=1,
                                    sg=[SGE(mr.buf, 8, mr.lkey)], send_flags=e.IBV_SEND_SIGNALED))

    def tearDown(self):
        self.ep.close()

    def completes_with_the_true_ack(self):
        self.assertEqual(poll(self.ep.cq, 1, seconds=0.2), [], "a forged response completed it")
        attr, _ = self.ep.qp.query(e.IBV_QP_STATE)
        self.assertEqual(attr.qp_state, e.IBV_QPS_RTS)
        self.inject("rc_ack", (), psn=RQ_PSN)
        wcs = poll(self.ep.cq, 1)
        self.assertEqual([(w.wr_id, w.status) for w in wcs], [(9, e.IBV_WC_SUCCESS)])

    def test_every_response_beyond_what_was_sent_is_dropped(self):
        for name, syn in self.SYNDROMES.items():
            for psn in (RQ_PSN + 1, RQ_PSN + 0x1000, RQ_PSN + 0x7fffff):
                with self.subTest(response=name, psn=psn):
                    self.inject("rc_ack", ("rcvd_drop_bad_psn",), psn=psn, syndrome=syn)
        self.completes_with_the_true_ack()

    def test_old_responses_are_ignored(self):
        # Before the oldest unanswered PSN: a late or duplicate answer, or a forged one; none
        # stalls the QP (an old RNR NAK) or fails it (an old NAK).
        for name, syn in self.SYNDROMES.items():
            # (Half the PSN space away from the send end counts as beyond: see the test above.)
            for psn in (RQ_PSN - 2, RQ_PSN - 0x1000, RQ_PSN - 0x7fff00):
                with self.subTest(response=name, psn=psn):
                    self.inject("rc_ack", (), psn=psn, syndrome=syn)
        self.completes_with_the_true_ack()

    def test_responses_from_elsewhere_are_dropped(self):
        for name, syn in self.SYNDROMES.items():
            with self.subTest(response=name):
                self.inject("rc_ack", ("rcvd_drop_bad_address",), psn=RQ_PSN, syndrome=syn,
                            src="10.70.0.99")
                self.inject("rc_ack", ("rcvd_drop_bad_pkey",), psn=RQ_PSN, syndrome=syn,
                            pkey=0x1234)
        self.completes_with_the_true_ack()

    def test_responses_the_completer_takes_count_as_ack_deferred(self):
        # C rxe's name for responses handed to the completer: an old one is, whatever it says;
        # one from elsewhere is dropped before.
        def deferred_rose_to(n):
            for _ in range(50):
                if counters(DEV)["ack_deferred"] - before >= n:
                    break
                time.sleep(0.1)
            self.assertEqual(counters(DEV)["ack_deferred"] - before, n)

        before = counters(DEV)["ack_deferred"]
        self.inject("rc_ack", (), psn=RQ_PSN - 2)
        deferred_rose_to(1)
        self.inject("rc_ack", ("rcvd_drop_bad_address",), psn=RQ_PSN, src="10.70.0.99")
        deferred_rose_to(1)
        self.completes_with_the_true_ack()
        deferred_rose_to(2)

    def test_a_read_response_for_a_send_is_dropped(self):
        # In the window, but at the PSN of a SEND: it answers nothing this QP asked.
        self.inject("rc_read_response", ("rcvd_drop_bad_psn",), psn=RQ_PSN, length=8)
        self.completes_with_the_true_ack()

    def test_a_sequence_nak_for_a_resend_under_way_is_ignored(self):
        # A responder NAKs a gap once, until the request it expects arrives: a second NAK for
        # the PSN the requester went back to asks for what is on its way again (or was forged,
        # to have all in flight sent twice). It neither sends again nor spends a retry.
        with roce_inject.Capture(PEER_NS, ADDR) as cap:
            self.inject("rc_ack", ("rcvd_seq_err",), psn=RQ_PSN, syndrome=0x60)
            got = cap.packets(lambda got: len(got) > 1, 1)
        self.assertEqual([(op, psn) for op, psn, _ in got], [(roce_inject.RC_SEND_ONLY, RQ_PSN)],
                         "the NAK sent the SEND again")
        for _ in range(3):
            with roce_inject.Capture(PEER_NS, ADDR) as cap:
                self.inject("rc_ack", ("rcvd_seq_err",), psn=RQ_PSN, syndrome=0x60)
                self.assertEqual(cap.packets(lambda got: bool(got), 1), [],
                                 "a NAK for the resend under way sent it again")
        # One retry (retry_cnt 1) was spent, and no more: the SEND still waits for its ACK.
        self.completes_with_the_true_ack()

    def test_a_sequence_nak_that_answers_nothing_spends_a_retry(self):
        # An attempt without progress, as a timeout is: with retry_cnt 0 the SEND fails at once
        # (the ACK timeout is 69 s), as it does in the C rxe.
        self.reconnect(timeout=24, retry_cnt=0)
        before = counters(DEV)["retry_exceeded_err"]
        self.inject("rc_ack", ("rcvd_seq_err",), psn=RQ_PSN, syndrome=0x60)
        wcs = poll(self.ep.cq, 1, seconds=2)
        self.assertEqual([(w.wr_id, w.status) for w in wcs], [(9, e.IBV_WC_RETRY_EXC_ERR)])
        self.assertEqual(counters(DEV)["retry_exceeded_err"] - before, 1)

    def reconnect(self, **kw):
        """setUp's QP again, connected with KW instead."""
        self.ep.close()
        self.open(**kw)

    def test_a_sequence_nak_during_an_rnr_wait_spends_no_retry(self):
        # The requester goes back after the RNR NAK's delay already; the requests it sent after
        # the refused one draw a sequence NAK for it, which says nothing new (retry_cnt 0).
        self.reconnect(timeout=24, retry_cnt=0)
        self.inject("rc_ack", ("rcvd_rnr_err",), psn=RQ_PSN, syndrome=0x20)  # 655 ms
        self.inject("rc_ack", ("rcvd_seq_err",), psn=RQ_PSN, syndrome=0x60)
        self.completes_with_the_true_ack()

    def test_a_sequence_nak_that_spends_a_retry_starts_the_timeout_over(self):
        # The ACK timeout runs from the resend, not from the first send: with retry_cnt 1 the
        # NAK's resend gets a whole timeout (1.07 s) before the last retry is found spent.
        self.reconnect(timeout=18, retry_cnt=1)
        time.sleep(0.7)
        naked = time.monotonic()
        self.inject("rc_ack", ("rcvd_seq_err",), psn=RQ_PSN, syndrome=0x60)
        wcs = poll(self.ep.cq, 1, seconds=5)
        waited = time.monotonic() - naked
        self.assertEqual([(w.wr_id, w.status) for w in wcs], [(9, e.IBV_WC_RETRY_EXC_ERR)])
        # From the first send it would end about 0.37 s after the NAK.
        self.assertGreater(waited, 0.75, "the timeout ran from the first send")

    def test_a_nak_fails_the_wqe_it_names(self):
        self.inject("rc_ack", ("req_remote_access_errors",), psn=RQ_PSN, syndrome=0x62)
        wcs = poll(self.ep.cq, 1)
        self.assertEqual([(w.wr_id, w.status) for w in wcs], [(9, e.IBV_WC_REM_ACCESS_ERR)])


class ScribbledSendRing(unittest.TestCase):
    """A WQE written over in the shared send ring fails alone, before it reaches the wire."""

    def setUp(self):
        self.ep = Endpoint(DEV, ADDR, recvs=0)
        self.ro = MR(self.ep.pd, MR_LEN, e.IBV_ACCESS_REMOTE_READ)
        connect(self.ep.qp, PEER_ADDR, self.ep.gid_index, FAKE_PEER_QPN)

    def tearDown(self):
        self.ro.close()
        self.ep.close()

    def send_ring(self):
        """This process's send ring (the only ring with slots of 256 bytes or more)."""
        rings = [(b, m, z) for b, (m, z) in mapped_rings().items() if z >= 256]
        self.assertEqual(len(rings), 1, "one send ring mapped")
        return rings[0]

    def fails_alone(self, status, fields, sges=()):
        sent_before = counters(DEV)["sent_pkts"]
        scribble(self.send_ring(), 0xBAD, fields, sges, WQE_SGES)
        # A good WR behind it rings the doorbell.
        mr = self.ep.mr
        self.ep.qp.post_send(SendWR(wr_id=7, opcode=e.IBV_WR_SEND, num_sge=1,
                                    sg=[SGE(mr.buf, 8, mr.lkey)], send_flags=e.IBV_SEND_SIGNALED))
        wcs = poll(self.ep.cq, 2)
        self.assertEqual([(w.wr_id, w.status) for w in wcs],
                         [(0xBAD, status), (7, e.IBV_WC_WR_FLUSH_ERR)])
        attr, _ = self.ep.qp.query(e.IBV_QP_STATE)
        self.assertEqual(attr.qp_state, e.IBV_QPS_ERR)
        self.assertEqual(counters(DEV)["sent_pkts"], sent_before, "nothing went on the wire")

    def send(self, num_sge=1):
        return {WQE_OPCODE: ("I", e.IBV_WR_SEND), WQE_FLAGS: ("I", e.IBV_SEND_SIGNALED),
                WQE_NUM_SGE: ("I", num_sge)}

    def test_unknown_opcode(self):
        self.fails_alone(e.IBV_WC_LOC_QP_OP_ERR, {WQE_OPCODE: ("I", 0x7F)})

    def test_more_sges_than_the_slot_holds(self):
        self.fails_alone(e.IBV_WC_LOC_LEN_ERR, self.send(num_sge=0xFFFF))

    def test_forged_lkey(self):
        mr = self.ep.mr
        self.fails_alone(e.IBV_WC_LOC_PROT_ERR, self.send(), [(mr.buf, 8, mr.lkey ^ 0x80)])

    def test_sge_beyond_its_region(self):
        mr = self.ep.mr
        self.fails_alone(e.IBV_WC_LOC_PROT_ERR, self.send(),
                         [(mr.buf + MR_LEN - 8, 64, mr.lkey)])

    def test_inline_longer_than_the_slot(self):
        fields = self.send(num_sge=0)
        fields[WQE_FLAGS] = ("I", e.IBV_SEND_SIGNALED | e.IBV_SEND_INLINE)
        fields[WQE_LENGTH] = ("I", 1 << 20)
        self.fails_alone(e.IBV_WC_LOC_LEN_ERR, fields)

    def test_read_into_memory_it_may_not_write(self):
        fields = {WQE_OPCODE: ("I", IBV_WR_RDMA_READ_OPCODE), WQE_FLAGS: ("I", 0),
                  WQE_NUM_SGE: ("I", 1), WQE_REMOTE_ADDR: ("Q", 0x1000), WQE_RKEY: ("I", 1)}
        self.fails_alone(e.IBV_WC_LOC_PROT_ERR, fields, [(self.ro.buf, 8, self.ro.lkey)])

    def atomic(self):
        return {WQE_OPCODE: ("I", e.IBV_WR_ATOMIC_FETCH_AND_ADD), WQE_FLAGS: ("I", 0),
                WQE_NUM_SGE: ("I", 1), WQE_REMOTE_ADDR: ("Q", 0x1000), WQE_RKEY: ("I", 1)}

    def test_atomic_whose_buffer_cannot_take_the_answer(self):
        # Shorter than the 8-byte original value, or in memory it may not write.
        mr = self.ep.mr
        self.fails_alone(e.IBV_WC_LOC_LEN_ERR, self.atomic(), [(mr.buf, 4, mr.lkey)])
        self.tearDown()
        self.setUp()
        self.fails_alone(e.IBV_WC_LOC_PROT_ERR, self.atomic(), [(self.ro.buf, 8, self.ro.lkey)])

    def test_inline_atomic(self):
        fields = self.atomic()
        fields[WQE_FLAGS] = ("I", e.IBV_SEND_INLINE)
        fields[WQE_LENGTH] = ("I", 8)
        self.fails_alone(e.IBV_WC_LOC_LEN_ERR, fields)


class RemoteErrors(unittest.TestCase):
    """A real peer refuses: the requester completes with the remote status, both count it."""

    def setUp(self):
        self.a = Endpoint(DEV, ADDR)
        self.b = Endpoint(PEER_DEV, PEER_ADDR)
        connect(self.a.qp, PEER_ADDR, self.a.gid_index, self.b.qp.qp_num)
        connect(self.b.qp, ADDR, self.b.gid_index, self.a.qp.qp_num)

    def tearDown(self):
        self.a.close()
        self.b.close()

    def refused(self, wr, status, req_counter, resp_counter):
        a0, b0 = counters(DEV), counters(PEER_DEV)
        self.a.qp.post_send(wr)
        wcs = poll(self.a.cq, 1)
        self.assertEqual([(w.wr_id, w.status) for w in wcs], [(1, status)])
        self.assertEqual(counters(DEV)[req_counter] - a0[req_counter], 1)
        self.assertEqual(counters(PEER_DEV)[resp_counter] - b0[resp_counter], 1)
        self.assertEqual(self.b.mr.read(MR_LEN, 0), bytes(MR_LEN))

    def test_write_with_a_wrong_rkey(self):
        mr = self.a.mr
        wr = SendWR(wr_id=1, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
                    sg=[SGE(mr.buf, 16, mr.lkey)], send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_rdma(self.b.mr.rkey ^ 0x80, self.b.mr.buf)
        self.refused(wr, e.IBV_WC_REM_ACCESS_ERR, "req_remote_access_errors",
                     "resp_remote_access_errors")

    def test_read_past_the_region(self):
        mr = self.a.mr
        wr = SendWR(wr_id=1, opcode=e.IBV_WR_RDMA_READ, num_sge=1,
                    sg=[SGE(mr.buf, 64, mr.lkey)], send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_rdma(self.b.mr.rkey, self.b.mr.buf + MR_LEN - 32)
        self.refused(wr, e.IBV_WC_REM_ACCESS_ERR, "req_remote_access_errors",
                     "resp_remote_access_errors")

    def test_send_longer_than_the_receive(self):
        mr = self.a.mr
        wr = SendWR(wr_id=1, opcode=e.IBV_WR_SEND, num_sge=1,
                    sg=[SGE(mr.buf, RECV_LEN * 2, mr.lkey)], send_flags=e.IBV_SEND_SIGNALED)
        self.refused(wr, e.IBV_WC_REM_INV_REQ_ERR, "req_remote_invalid_request",
                     "resp_local_length_error")
        wcs = poll(self.b.cq, 1)
        self.assertEqual([(w.wr_id, w.status) for w in wcs], [(100, e.IBV_WC_LOC_LEN_ERR)])

    def test_good_write_lands(self):
        mr = self.a.mr
        mr.write(b"\x5a" * 32, 32)
        wr = SendWR(wr_id=1, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
                    sg=[SGE(mr.buf, 32, mr.lkey)], send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_rdma(self.b.mr.rkey, self.b.mr.buf + 100)
        self.a.qp.post_send(wr)
        wcs = poll(self.a.cq, 1)
        self.assertEqual([(w.wr_id, w.status) for w in wcs], [(1, e.IBV_WC_SUCCESS)])
        self.assertEqual(self.b.mr.read(32, 100), b"\x5a" * 32)


class Recoveries(unittest.TestCase):
    """Two RC QPs, on DEV and PEER_DEV, that recover: from an RNR NAK in the middle of a
    message, and from a reset to RESET."""

    def setUp(self):
        self.a = Endpoint(DEV, ADDR)
        self.addCleanup(self.a.close)
        self.b = Endpoint(PEER_DEV, PEER_ADDR, recvs=0)
        self.addCleanup(self.b.close)

    def connect(self, **kw):
        connect(self.a.qp, PEER_ADDR, self.a.gid_index, self.b.qp.qp_num, **kw)
        connect(self.b.qp, ADDR, self.b.gid_index, self.a.qp.qp_num, **kw)

    def test_write_with_imm_that_meets_rnr_on_its_last_packet_completes_on_the_retry(self):
        # Three packets; the last needs a receive, which comes later: the first two landed, the
        # responder keeps the WRITE under way, and the resent last packet finishes it.
        self.connect(rnr_retry=7, min_rnr_timer=14)
        n = 3000
        self.a.mr.write(bytes((i * 7) & 0xff for i in range(n)), n)
        wr = SendWR(wr_id=5, opcode=e.IBV_WR_RDMA_WRITE_WITH_IMM, num_sge=1,
                    sg=[SGE(self.a.mr.buf, n, self.a.mr.lkey)], send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_rdma(self.b.mr.rkey, self.b.mr.buf)
        wr.imm_data = 0x1234
        rnr = counters(DEV)["rcvd_rnr_err"]
        self.a.qp.post_send(wr)
        for _ in range(50):
            if counters(DEV)["rcvd_rnr_err"] > rnr:
                break
            time.sleep(0.1)
        self.assertGreater(counters(DEV)["rcvd_rnr_err"], rnr)
        self.assertEqual(poll(self.a.cq, 1, seconds=0.2), [], "completed without a receive")
        self.b.post_recv(0)
        wcs = poll(self.a.cq, 1)
        self.assertEqual([(w.wr_id, w.status) for w in wcs], [(5, e.IBV_WC_SUCCESS)])
        wcs = poll(self.b.cq, 1)
        self.assertEqual([(w.wr_id, w.status, w.opcode, w.byte_len) for w in wcs],
                         [(100, e.IBV_WC_SUCCESS, e.IBV_WC_RECV_RDMA_WITH_IMM, n)])
        self.assertEqual(self.b.mr.read(n, 0), self.a.mr.read(n, 0))

    def send(self, i):
        mr = self.a.mr
        mr.write(bytes([i]) * 32, 32)
        self.a.qp.post_send(SendWR(wr_id=i, opcode=e.IBV_WR_SEND, num_sge=1,
                                   sg=[SGE(mr.buf, 32, mr.lkey)],
                                   send_flags=e.IBV_SEND_SIGNALED))
        wcs = poll(self.a.cq, 1)
        self.assertEqual([(w.wr_id, w.status) for w in wcs], [(i, e.IBV_WC_SUCCESS)])
        wcs = poll(self.b.cq, 1)
        self.assertEqual([(w.status, w.byte_len) for w in wcs], [(e.IBV_WC_SUCCESS, 32)])
        self.assertEqual(self.b.rbuf.read(32, 0), bytes([i]) * 32)

    def test_a_read_without_granted_reads_never_leaves(self):
        # max_rd_atomic 0: the peer granted no READ, so none is sent (as C rxe); the ACK timeout
        # fails it.
        connect(self.a.qp, PEER_ADDR, self.a.gid_index, self.b.qp.qp_num, max_rd_atomic=0)
        connect(self.b.qp, ADDR, self.b.gid_index, self.a.qp.qp_num, max_dest_rd_atomic=0)
        reads = counters(PEER_DEV)["rx_read_requests"]
        mr = self.a.mr
        wr = SendWR(wr_id=3, opcode=e.IBV_WR_RDMA_READ, num_sge=1,
                    sg=[SGE(mr.buf, 64, mr.lkey)], send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_rdma(self.b.mr.rkey, self.b.mr.buf)
        self.a.qp.post_send(wr)
        wcs = poll(self.a.cq, 1)
        self.assertEqual([(w.wr_id, w.status) for w in wcs], [(3, e.IBV_WC_RETRY_EXC_ERR)])
        self.assertEqual(counters(PEER_DEV)["rx_read_requests"], reads)
        attr, _ = self.b.qp.query(e.IBV_QP_STATE)
        self.assertEqual(attr.qp_state, e.IBV_QPS_RTS)

    def test_a_reset_starts_requester_and_responder_over(self):
        # After RESET both sides start again at RQ_PSN: a requester that went on from its old
        # PSN, or a responder that still expected its old one (it would take the new SEND for
        # a duplicate and ACK it unseen), would lose the second SEND.
        self.connect()
        for i in (1, 2):
            self.b.post_recv(0)
            self.send(i)
            for ep in (self.a, self.b):
                ep.qp.modify(QPAttr(qp_state=e.IBV_QPS_RESET), e.IBV_QP_STATE)
                ep.to_init(0)
            self.connect()


class KernelWrLists(unittest.TestCase):
    """A user QP takes work requests from its rings only: a POST_SEND command that carries a WR
    list (the kernel verbs' form) is refused, and nothing is sent; POST_RECV is not a command."""

    def setUp(self):
        self.ep = Endpoint(DEV, ADDR, recvs=0)
        self.addCleanup(self.ep.close)
        connect(self.ep.qp, PEER_ADDR, self.ep.gid_index, FAKE_PEER_QPN)
        self.resp = ctypes.create_string_buffer(b"\xff" * 4, 4)

    def post(self, cmd, handle, wr_size, wrs):
        """struct ib_uverbs_post_{send,recv} (no SGEs), then its WRs, each wr_size bytes."""
        body = struct.pack("=QIIII", ctypes.addressof(self.resp), handle, len(wrs), 0,
                           wr_size) + b"".join(wrs)
        return os.write(self.ep.ctx.cmd_fd, struct.pack("=IHH", cmd, (8 + len(body)) // 4, 1)
                        + body)

    def qp_handle(self):
        """The QP's handle: the one of this context's small handles that takes a doorbell (a
        POST_SEND with no WR, as librxe rings it)."""
        handles = []
        for h in range(16):
            try:
                self.post(IB_USER_VERBS_CMD_POST_SEND, h, SEND_WR_LEN, [])
                handles.append(h)
            except OSError:
                pass
        self.assertEqual(len(handles), 1, handles)
        return handles[0]

    def refused(self, cmd, wr_size, wr):
        handle = self.qp_handle()
        sent = counters(DEV)["sent_pkts"]
        self.resp.raw = b"\xff" * 4
        with self.assertRaises(OSError) as err:
            self.post(cmd, handle, wr_size, [wr])
        self.assertEqual(err.exception.errno, errno.EINVAL)
        # The core writes which WR failed only after the driver's post_send/post_recv refused
        # it: the refusal is the driver's, not the command parser's.
        self.assertEqual(struct.unpack("=I", self.resp.raw)[0], 1)
        time.sleep(0.2)
        self.assertEqual(counters(DEV)["sent_pkts"], sent)
        self.assertEqual(poll(self.ep.cq, 1, seconds=0.2), [])
        attr, _ = self.ep.qp.query(e.IBV_QP_STATE)
        self.assertEqual(attr.qp_state, e.IBV_QPS_RTS)

    def test_a_user_qp_refuses_a_posted_send_list(self):
        # struct ib_uverbs_send_wr: a signaled SEND with no SGE.
        wr = struct.pack("=QIIII32x", 7, 0, e.IBV_WR_SEND, e.IBV_SEND_SIGNALED, 0)
        self.refused(IB_USER_VERBS_CMD_POST_SEND, SEND_WR_LEN, wr)

    def test_no_posted_receive_list_reaches_the_driver(self):
        # As C rxe, the device leaves POST_RECV out of its uverbs_cmd_mask (librxe posts
        # receives into the ring): the core refuses the command before any driver code.
        # Found first: each doorbell it rings writes a response.
        handle = self.qp_handle()
        self.resp.raw = b"\xff" * 4
        with self.assertRaises(OSError) as err:
            self.post(IB_USER_VERBS_CMD_POST_RECV, handle, 16, [struct.pack("=QII", 8, 0, 0)])
        self.assertEqual(err.exception.errno, errno.EOPNOTSUPP)
        self.assertEqual(self.resp.raw, b"\xff" * 4)


class UcRequests(Injecting, unittest.TestCase):
    """Crafted requests at a UC QP in RTS: nothing is answered, and a gap or a refusal costs
    the message it hit and no more. Path MTU 256: first and middle packets carry exactly that
    (IBA 9.7.4)."""

    MTU = 256
    RECV = 300

    def setUp(self):
        self.ep = Endpoint(DEV, ADDR, qp_type=e.IBV_QPT_UC, recv_len=self.RECV)
        connect_uc(self.ep.qp, PEER_ADDR, self.ep.gid_index, FAKE_PEER_QPN, mtu=e.IBV_MTU_256)
        self.sent = counters(DEV)["sent_pkts"]

    def tearDown(self):
        # UC answers nothing: no ACK, NAK or RNR NAK went out.
        self.assertEqual(counters(DEV)["sent_pkts"], self.sent)
        self.ep.close()

    def received(self, want):
        wcs = poll(self.ep.cq, len(want))
        self.assertEqual([(w.wr_id, w.status, w.byte_len, w.opcode) for w in wcs],
                         [(i, e.IBV_WC_SUCCESS, n, e.IBV_WC_RECV) for i, n in want])

    def test_a_gap_drops_its_message_and_the_next_one_takes_the_receive(self):
        self.inject("uc_send_first", (), psn=RQ_PSN, payload=self.MTU)
        # RQ_PSN + 1, a middle packet, is lost: the last one is out of sequence.
        self.inject("uc_send_last", ("out_of_seq_request",), psn=RQ_PSN + 2, payload=16)
        self.assertEqual(poll(self.ep.cq, 1, seconds=0.3), [], "a message with a gap completed")
        # The next message starts at its own PSN and lands in the receive the lost one had.
        self.inject("uc_send_only", ("out_of_seq_request",), psn=RQ_PSN + 5, payload=24)
        self.received([(100, 24)])
        self.assertEqual(self.ep.rbuf.read(24, 0), b"\xa5" * 24)
        self.inject("uc_send_first", (), psn=RQ_PSN + 6, payload=self.MTU)
        self.inject("uc_send_last", (), psn=RQ_PSN + 7, payload=8)
        self.received([(101, self.MTU + 8)])

    def test_a_refused_write_changes_nothing_and_the_next_lands(self):
        mr = self.ep.mr
        good = dict(rkey=mr.rkey, va=mr.buf + 64, length=16)
        self.inject("uc_write", ("rx_write_requests", "resp_remote_access_errors"),
                    **dict(good, rkey=mr.rkey ^ 0x80))
        self.inject("uc_write", ("rx_write_requests", "resp_remote_access_errors"),
                    psn=RQ_PSN + 1, **dict(good, va=mr.buf + MR_LEN - 8))
        self.assertEqual(mr.read(MR_LEN, 0), bytes(MR_LEN))
        self.inject("uc_write", ("rx_write_requests",), psn=RQ_PSN + 2, **good)
        self.assertEqual(mr.read(MR_LEN, 0), bytes(64) + b"\xa5" * 16 + bytes(MR_LEN - 80))
        attr, _ = self.ep.qp.query(e.IBV_QP_STATE)
        self.assertEqual(attr.qp_state, e.IBV_QPS_RTS)

    def test_a_send_without_a_receive_is_dropped(self):
        self.ep.close()
        self.ep = Endpoint(DEV, ADDR, recvs=0, qp_type=e.IBV_QPT_UC)
        connect_uc(self.ep.qp, PEER_ADDR, self.ep.gid_index, FAKE_PEER_QPN)
        self.inject("uc_send_only", ("rcvd_drop_no_recv_wqe",), payload=8)
        self.ep.post_recv(0)
        self.inject("uc_send_only", (), psn=RQ_PSN + 1, payload=8)
        self.received([(100, 8)])

    def test_a_send_longer_than_its_receive_is_dropped_and_the_qp_lives(self):
        # Unlike RC, where the receive completes with an error and the QP fails, UC drops the
        # message and keeps the receive for the next SEND.
        self.inject("uc_send_first", (), payload=self.MTU)
        self.inject("uc_send_middle", ("resp_local_length_error",), psn=RQ_PSN + 1,
                    payload=self.MTU)
        self.inject("uc_send_last", (), psn=RQ_PSN + 2, payload=8)
        self.inject("uc_send_first", (), psn=RQ_PSN + 3, payload=self.MTU)
        self.inject("uc_send_last", ("resp_local_length_error",), psn=RQ_PSN + 4,
                    payload=self.RECV - self.MTU + 4)
        self.assertEqual(poll(self.ep.cq, 1, seconds=0.3), [], "a message too long completed")
        attr, _ = self.ep.qp.query(e.IBV_QP_STATE)
        self.assertEqual(attr.qp_state, e.IBV_QPS_RTS)
        self.inject("uc_send_only", (), psn=RQ_PSN + 5, payload=200)
        self.received([(100, 200)])

    def test_a_first_packet_shorter_than_the_mtu_drops_its_message(self):
        # A FIRST or MIDDLE packet carries exactly one MTU; one that does not is dropped with
        # its message, and the receive waits for the next.
        self.inject("uc_send_first", ("resp_invalid_request",), payload=16)
        self.inject("uc_send_last", (), psn=RQ_PSN + 1, payload=8)
        self.assertEqual(poll(self.ep.cq, 1, seconds=0.3), [], "a malformed message completed")
        self.inject("uc_send_only", (), psn=RQ_PSN + 2, payload=24)
        self.received([(100, 24)])


class UcPeers(unittest.TestCase):
    """Two UC QPs, on DEV and PEER_DEV: multi-packet SENDs and WRITEs complete at the requester
    when sent, and land whole."""

    def setUp(self):
        self.a = Endpoint(DEV, ADDR, recvs=0, qp_type=e.IBV_QPT_UC)
        self.b = Endpoint(PEER_DEV, PEER_ADDR, recvs=0, qp_type=e.IBV_QPT_UC)
        connect_uc(self.a.qp, PEER_ADDR, self.a.gid_index, self.b.qp.qp_num)
        connect_uc(self.b.qp, ADDR, self.b.gid_index, self.a.qp.qp_num)

    def tearDown(self):
        self.a.close()
        self.b.close()

    def test_send_and_write_with_immediate(self):
        a, b = self.a, self.b
        data = bytes((i * 7) & 0xff for i in range(3000))
        a.mr.write(data, len(data))
        # The second receive only completes the WRITE with immediate.
        for i in range(2):
            b.qp.post_recv(RecvWR(wr_id=200 + i, num_sge=1, sg=[SGE(b.mr.buf, 3000, b.mr.lkey)]))
        sge = SGE(a.mr.buf, 3000, a.mr.lkey)
        a.qp.post_send(SendWR(wr_id=1, opcode=e.IBV_WR_SEND, num_sge=1, sg=[sge],
                              send_flags=e.IBV_SEND_SIGNALED))
        wcs = poll(a.cq, 1)
        self.assertEqual([(w.wr_id, w.status, w.opcode) for w in wcs],
                         [(1, e.IBV_WC_SUCCESS, e.IBV_WC_SEND)])
        wcs = poll(b.cq, 1)
        self.assertEqual([(w.wr_id, w.status, w.byte_len) for w in wcs],
                         [(200, e.IBV_WC_SUCCESS, 3000)])
        self.assertEqual(b.mr.read(3000, 0), data)
        # Three packets at MTU 1024, the last with the immediate data.
        wr = SendWR(wr_id=2, opcode=e.IBV_WR_RDMA_WRITE_WITH_IMM, num_sge=1, sg=[sge],
                    send_flags=e.IBV_SEND_SIGNALED, imm_data=0x12345678)
        wr.set_wr_rdma(b.mr.rkey, b.mr.buf + 1000)
        a.qp.post_send(wr)
        wcs = poll(a.cq, 1)
        self.assertEqual([(w.wr_id, w.status, w.opcode) for w in wcs],
                         [(2, e.IBV_WC_SUCCESS, e.IBV_WC_RDMA_WRITE)])
        wcs = poll(b.cq, 1)
        self.assertEqual([(w.wr_id, w.status, w.opcode, w.byte_len) for w in wcs],
                         [(201, e.IBV_WC_SUCCESS, e.IBV_WC_RECV_RDMA_WITH_IMM, 3000)])
        self.assertEqual(b.mr.read(3000, 1000), data)


class InjectedAtomics(Injecting, unittest.TestCase):
    """Crafted atomics from PEER_NS at an RC QP in RTS: done once, however often repeated, and
    refused without a trace when they may not be done."""

    def setUp(self):
        self.ep = Endpoint(DEV, ADDR)
        connect(self.ep.qp, PEER_ADDR, self.ep.gid_index, FAKE_PEER_QPN)

    def tearDown(self):
        self.ep.close()

    def word(self, at=8):
        return struct.unpack("<Q", self.ep.mr.read(8, at))[0]

    def test_an_atomic_is_done_once_however_often_it_is_repeated(self):
        mr = self.ep.mr
        mr.write(struct.pack("<Q", 40), 8, 8)
        at = dict(rkey=mr.rkey, va=mr.buf + 8)
        self.inject("rc_fetch_add", ("rx_atomic_requests",), add=2, **at)
        self.assertEqual(self.word(), 42)
        # The same request again (its ACK was lost): the saved answer, no second add.
        for _ in range(3):
            self.inject("rc_fetch_add", ("duplicate_request",), add=2, **at)
        self.assertEqual(self.word(), 42)
        self.inject("rc_cmp_swap", ("rx_atomic_requests",), psn=RQ_PSN + 1, compare=42,
                    swap=7, **at)
        self.assertEqual(self.word(), 7)
        # A compare that fails swaps nothing; a duplicate of it neither.
        self.inject("rc_cmp_swap", ("rx_atomic_requests",), psn=RQ_PSN + 2, compare=42,
                    swap=9, **at)
        self.inject("rc_cmp_swap", ("duplicate_request",), psn=RQ_PSN + 1, compare=42,
                    swap=9, **at)
        self.assertEqual(self.word(), 7)
        # A duplicate naming another word than the atomic at its PSN did is not answered.
        self.inject("rc_fetch_add", ("duplicate_request",), add=2, rkey=mr.rkey, va=mr.buf)
        self.assertEqual((self.word(0), self.word()), (0, 7))

    def test_an_atomic_inside_a_write_breaks_its_sequence(self):
        # A READ or an atomic is a message of its own: in the middle of a WRITE it is an
        # invalid request (class C), and the word stays as it was.
        mr = self.ep.mr
        self.inject("rc_write_first", ("rx_write_requests",), rkey=mr.rkey, va=mr.buf + 64,
                    length=2048, payload=1024)
        self.inject("rc_fetch_add", ("rx_atomic_requests", "resp_invalid_request"),
                    psn=RQ_PSN + 1, rkey=mr.rkey, va=mr.buf)
        self.assertEqual(self.word(0), 0)

    def test_atomics_that_may_not_be_done_change_nothing(self):
        req = "rx_atomic_requests"
        # (address offset, rkey flip, counter): misaligned, a wrong key, past the region; each
        # a class C error (the QP goes to error, so each gets a fresh one).
        cases = [(4, 0, "resp_invalid_request"), (0, 0x80, "resp_remote_access_errors"),
                 (MR_LEN, 0, "resp_remote_access_errors")]
        for off, flip, counter in cases:
            mr = self.ep.mr
            self.inject("rc_fetch_add", (req, counter), rkey=mr.rkey ^ flip, va=mr.buf + off)
            self.assertEqual(mr.read(MR_LEN, 0), bytes(MR_LEN), (off, flip))
            self.ep.close()
            self.setUp()
        # A QP that grants no atomics refuses one on a region that would allow it.
        self.ep.close()
        self.ep = Endpoint(DEV, ADDR, rc_access=e.IBV_ACCESS_REMOTE_READ)
        connect(self.ep.qp, PEER_ADDR, self.ep.gid_index, FAKE_PEER_QPN)
        self.inject("rc_fetch_add", (req, "resp_remote_access_errors"), rkey=self.ep.mr.rkey,
                    va=self.ep.mr.buf)
        self.assertEqual(self.ep.mr.read(MR_LEN, 0), bytes(MR_LEN))

    def test_an_atomic_write_stores_its_word_once(self):
        mr = self.ep.mr
        at = dict(rkey=mr.rkey, va=mr.buf + 8, length=8)
        self.inject("rc_atomic_write", ("rx_write_requests",), **at)
        self.assertEqual(mr.read(8, 8), b"\xa5" * 8)
        # Its answer was lost and it comes again: answered, not stored again.
        mr.write(bytes(8), 8, 8)
        for _ in range(3):
            self.inject("rc_atomic_write", ("duplicate_request",), **at)
        self.assertEqual(mr.read(MR_LEN, 0), bytes(MR_LEN))
        # The next PSN stores again.
        self.inject("rc_atomic_write", ("rx_write_requests",), psn=RQ_PSN + 1, **at)
        self.assertEqual(mr.read(8, 8), b"\xa5" * 8)

    def test_atomic_writes_that_may_not_be_done_change_nothing(self):
        req = "rx_write_requests"
        # (address offset, rkey flip, RETH length, payload, counter): misaligned, not 8 bytes
        # (RETH or payload), a wrong key, past the region; each a class C error (the QP goes to
        # error, so each gets a fresh one).
        invalid = "resp_invalid_request"
        access = "resp_remote_access_errors"
        cases = [(4, 0, 8, 8, invalid), (0, 0, 16, 16, invalid), (0, 0, 8, 4, invalid),
                 (0, 0, 4, 4, invalid), (0, 0x80, 8, 8, access), (MR_LEN, 0, 8, 8, access)]
        for off, flip, length, payload, counter in cases:
            mr = self.ep.mr
            self.inject("rc_atomic_write", (req, counter), rkey=mr.rkey ^ flip, va=mr.buf + off,
                        length=length, payload=payload)
            self.assertEqual(mr.read(MR_LEN, 0), bytes(MR_LEN), (off, flip, length, payload))
            self.ep.close()
            self.setUp()
        # A QP that no longer grants remote writes (changed in RTS) refuses one.
        qa = QPAttr()
        qa.qp_access_flags = e.IBV_ACCESS_REMOTE_READ
        self.ep.qp.modify(qa, e.IBV_QP_ACCESS_FLAGS)
        self.inject("rc_atomic_write", (req, access), rkey=self.ep.mr.rkey, va=self.ep.mr.buf,
                    length=8)
        self.assertEqual(self.ep.mr.read(MR_LEN, 0), bytes(MR_LEN))


# A region memory windows may be bound to (and no remote rights of its own).
MW_MR_ACCESS = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_MW_BIND


class InjectedWindows(Injecting, unittest.TestCase):
    """Crafted requests from PEER_NS through memory windows of an RC QP in RTS: a window lets in
    what it grants, where it is bound, while it is bound, and nothing else; binds that the
    window, region or QP does not allow fail (a process may write any bind WQE)."""

    def setUp(self):
        self.ep = Endpoint(DEV, ADDR)
        connect(self.ep.qp, PEER_ADDR, self.ep.gid_index, FAKE_PEER_QPN)
        self.wmr = MR(self.ep.pd, MR_LEN, MW_MR_ACCESS)
        self.wmr.write(bytes(MR_LEN), MR_LEN)
        self.objs = []

    def tearDown(self):
        for o in reversed(self.objs):
            o.close()
        self.wmr.close()
        self.ep.close()

    def again(self):
        """A fresh QP and region (the last case's class C error took the QP to error)."""
        self.tearDown()
        self.setUp()

    def mw(self, mw_type=e.IBV_MW_TYPE_2, pd=None):
        mw = MW(pd or self.ep.pd, mw_type)
        self.objs.append(mw)
        return mw

    def bind(self, off, length, access, mr=None, qp=None, mw=None):
        """Binds a type 2 window (a new one unless MW) over MR[off, off + length) from QP;
        returns the bind's completion status and the window's new key."""
        mr = mr or self.wmr
        wr = SendWR(wr_id=7, opcode=e.IBV_WR_BIND_MW, send_flags=e.IBV_SEND_SIGNALED)
        wr.set_bind_wr(mw or self.mw(), MWBindInfo(mr, mr.buf + off, length, access))
        (qp or self.ep.qp).post_send(wr)
        wcs = poll(self.ep.cq, 1)
        self.assertEqual([(w.wr_id, w.opcode) for w in wcs], [(7, e.IBV_WC_BIND_MW)])
        return wcs[0].status, wr.rkey

    def local_inv(self, rkey):
        wr = SendWR(wr_id=8, opcode=e.IBV_WR_LOCAL_INV, send_flags=e.IBV_SEND_SIGNALED)
        wr.imm_data = rkey
        self.ep.qp.post_send(wr)
        wcs = poll(self.ep.cq, 1)
        self.assertEqual(len(wcs), 1)
        return wcs[0].status

    def test_a_window_lets_in_what_it_grants_where_it_is_bound(self):
        st, rkey = self.bind(64, 128, e.IBV_ACCESS_REMOTE_WRITE)
        self.assertEqual(st, e.IBV_WC_SUCCESS)
        self.inject("rc_write", ("rx_write_requests",), rkey=rkey, va=self.wmr.buf + 64,
                    length=128)
        self.assertEqual(self.wmr.read(MR_LEN, 0), bytes(64) + b"\xa5" * 128 + bytes(MR_LEN - 192))

    def test_a_window_refuses_what_it_does_not_grant(self):
        write, access = ("rx_write_requests", "resp_remote_access_errors"), "resp_remote_access_errors"
        w = e.IBV_ACCESS_REMOTE_WRITE
        base = lambda: self.wmr.buf + 64  # noqa: E731
        # (what, setup returning the key, case, counters, va offset from the window, length)
        cases = [
            ("past its end", lambda: self.bind(64, 128, w)[1], "rc_write", write, 120, 16),
            ("before its start", lambda: self.bind(64, 128, w)[1], "rc_write", write, -8, 16),
            ("a READ through a write-only window", lambda: self.bind(64, 128, w)[1], "rc_read",
             ("rx_read_requests", access), 0, 16),
            ("its key before the bind", lambda: self.bind(64, 128, w, mw=self.mw()) and
             self.objs[-1].rkey, "rc_write", write, 0, 16),
            ("a stale tag", lambda: self.bind(64, 128, w)[1] ^ 1, "rc_write", write, 0, 16),
            ("after a local invalidate", lambda: self.inv_after(self.bind(64, 128, w)[1]),
             "rc_write", write, 0, 16),
            ("bound by another QP of the PD", lambda: self.bind(64, 128, w, qp=self.other_qp())[1],
             "rc_write", write, 0, 16),
        ]
        for what, key, case, counters, off, length in cases:
            rkey = key()
            self.inject(case, counters, rkey=rkey, va=base() + off, length=length)
            self.assertEqual(self.wmr.read(MR_LEN, 0), bytes(MR_LEN), what)
            self.again()

    def inv_after(self, rkey):
        self.assertEqual(self.local_inv(rkey), e.IBV_WC_SUCCESS)
        return rkey

    def other_qp(self):
        qp = self.ep.new_qp()
        self.objs.append(qp)
        self.ep.qp_to_init(qp)
        connect(qp, PEER_ADDR, self.ep.gid_index, FAKE_PEER_QPN + 1)
        return qp

    def test_a_type1_window_serves_the_pd_and_no_other(self):
        mw = self.mw(e.IBV_MW_TYPE_1)
        info = MWBindInfo(self.wmr, self.wmr.buf, 64, e.IBV_ACCESS_REMOTE_WRITE)
        # Bound from another QP of the PD: this QP takes its key too.
        self.other_qp().bind_mw(mw, MWBind(info, e.IBV_SEND_SIGNALED))
        self.assertEqual([w.status for w in poll(self.ep.cq, 1)], [e.IBV_WC_SUCCESS])
        self.inject("rc_write", ("rx_write_requests",), rkey=mw.rkey, va=self.wmr.buf)
        self.assertEqual(self.wmr.read(16, 0), b"\xa5" * 16)
        # A window of another process (another context and PD) is not this QP's.
        other = Endpoint(DEV, ADDR)
        self.objs.append(other)
        connect(other.qp, PEER_ADDR, other.gid_index, FAKE_PEER_QPN + 2)
        omr = self.keep(MR(other.pd, MR_LEN, MW_MR_ACCESS))
        omw = self.keep(MW(other.pd, e.IBV_MW_TYPE_1))
        oinfo = MWBindInfo(omr, omr.buf, 64, e.IBV_ACCESS_REMOTE_WRITE)
        other.qp.bind_mw(omw, MWBind(oinfo, e.IBV_SEND_SIGNALED))
        self.assertEqual([w.status for w in poll(other.cq, 1)], [e.IBV_WC_SUCCESS])
        self.inject("rc_write", ("rx_write_requests", "resp_remote_access_errors"),
                    psn=RQ_PSN + 1, rkey=omw.rkey, va=omr.buf)
        self.assertEqual(omr.read(64, 0), bytes(64))

    def test_a_window_whose_region_goes_lets_nothing_in(self):
        st, rkey = self.bind(0, 64, e.IBV_ACCESS_REMOTE_WRITE)
        self.assertEqual(st, e.IBV_WC_SUCCESS)
        va = self.wmr.buf
        self.wmr.close()
        self.inject("rc_write", ("rx_write_requests", "resp_remote_access_errors"), rkey=rkey,
                    va=va, length=16)
        self.wmr = MR(self.ep.pd, MR_LEN, MW_MR_ACCESS)

    def test_a_type1_window_is_bound_and_unbound_by_ibv_bind_mw(self):
        mw = self.mw(e.IBV_MW_TYPE_1)
        for length in (64, 0):
            info = MWBindInfo(self.wmr, self.wmr.buf, length, e.IBV_ACCESS_REMOTE_WRITE)
            self.ep.qp.bind_mw(mw, MWBind(info, e.IBV_SEND_SIGNALED))
            self.assertEqual([w.status for w in poll(self.ep.cq, 1)], [e.IBV_WC_SUCCESS])
            if length:
                self.inject("rc_write", ("rx_write_requests",), rkey=mw.rkey, va=self.wmr.buf)
        # Unbound (length 0): its key lets nothing in.
        self.wmr.write(bytes(16), 16)
        self.inject("rc_write", ("rx_write_requests", "resp_remote_access_errors"),
                    psn=RQ_PSN + 1, rkey=mw.rkey, va=self.wmr.buf)
        self.assertEqual(self.wmr.read(MR_LEN, 0), bytes(MR_LEN))

    def test_a_send_with_invalidate_frees_a_window_of_its_qp_and_says_so(self):
        st, rkey = self.bind(0, 64, e.IBV_ACCESS_REMOTE_WRITE)
        self.assertEqual(st, e.IBV_WC_SUCCESS)
        peer().send(peer().packet("rc_send_inv", qpn=self.ep.qp.qp_num, psn=RQ_PSN, rkey=rkey,
                                  length=8))
        wcs = poll(self.ep.cq, 1)
        self.assertEqual([(w.status, w.opcode, w.byte_len) for w in wcs],
                         [(e.IBV_WC_SUCCESS, e.IBV_WC_RECV, 8)])
        # The user ABI's flag (not the kernel's bit, which reads as IBV_WC_IP_CSUM_OK), and the key.
        self.assertEqual((wcs[0].wc_flags & (e.IBV_WC_WITH_INV | e.IBV_WC_IP_CSUM_OK),
                          wcs[0].imm_data), (e.IBV_WC_WITH_INV, rkey))
        self.inject("rc_write", ("rx_write_requests", "resp_remote_access_errors"),
                    psn=RQ_PSN + 1, rkey=rkey, va=self.wmr.buf, length=16)
        self.assertEqual(self.wmr.read(MR_LEN, 0), bytes(MR_LEN))

    def test_a_send_with_invalidate_of_what_it_may_not_invalidate_fails_its_receive(self):
        type1 = self.mw(e.IBV_MW_TYPE_1)
        info = MWBindInfo(self.wmr, self.wmr.buf, 64, e.IBV_ACCESS_REMOTE_WRITE)
        self.ep.qp.bind_mw(type1, MWBind(info, e.IBV_SEND_SIGNALED))
        poll(self.ep.cq, 1)
        keys = {"a region's key": lambda: self.ep.mr.rkey, "a type 1 window": lambda: type1.rkey,
                "a free window": lambda: self.mw().rkey,
                "a window of another QP": lambda: self.bind(0, 8, 0, qp=self.other_qp())[1]}
        for what, key in keys.items():
            rkey = key()
            self.inject("rc_send_inv", ("resp_cqe_error",), rkey=rkey, length=8)
            wcs = poll(self.ep.cq, 1)
            self.assertEqual([(w.status, w.opcode) for w in wcs],
                             [(e.IBV_WC_REM_INV_REQ_ERR, e.IBV_WC_RECV)], what)
            self.again()
            type1 = self.mw(e.IBV_MW_TYPE_1)
            info = MWBindInfo(self.wmr, self.wmr.buf, 64, e.IBV_ACCESS_REMOTE_WRITE)
            self.ep.qp.bind_mw(type1, MWBind(info, e.IBV_SEND_SIGNALED))
            poll(self.ep.cq, 1)

    def test_binds_the_window_region_or_qp_do_not_allow_fail(self):
        w = e.IBV_ACCESS_REMOTE_WRITE
        cases = {
            "a region without MW_BIND": lambda: self.bind(0, 64, w, mr=self.ep.mr),
            "past the region": lambda: self.bind(MR_LEN - 8, 64, w),
            "a writable window on a region without local write": lambda: self.bind(
                0, 64, w, mr=self.keep(MR(self.ep.pd, MR_LEN, e.IBV_ACCESS_MW_BIND))),
            "a bound type 2 window again": lambda: self.rebind(w),
            "a window of another PD": lambda: self.bind(0, 64, w, mw=self.mw(
                pd=self.keep(PD(self.ep.ctx)))),
            "a zero-length type 2 bind": lambda: self.bind(0, 0, w),
        }
        for what, bind in cases.items():
            self.assertEqual(bind()[0], e.IBV_WC_MW_BIND_ERR, what)
            self.again()
        # A read-only window on a region without local write is fine.
        mr = self.keep(MR(self.ep.pd, MR_LEN, e.IBV_ACCESS_MW_BIND))
        self.assertEqual(self.bind(0, 64, e.IBV_ACCESS_REMOTE_READ, mr=mr)[0], e.IBV_WC_SUCCESS)

    def keep(self, obj):
        self.objs.append(obj)
        return obj

    def rebind(self, access):
        mw = self.mw()
        self.assertEqual(self.bind(0, 64, access, mw=mw)[0], e.IBV_WC_SUCCESS)
        return self.bind(0, 64, access, mw=mw)


class Windows(unittest.TestCase):
    """A window of B (PEER_DEV), written through and then invalidated by a SEND with invalidate
    from A (DEV), both real RC QPs; the key rides on the last of the SEND's three packets."""

    def test_a_send_with_invalidate_from_a_real_requester(self):
        a = Endpoint(DEV, ADDR)
        self.addCleanup(a.close)
        b = Endpoint(PEER_DEV, PEER_ADDR, recv_len=4096)
        self.addCleanup(b.close)
        connect(a.qp, PEER_ADDR, a.gid_index, b.qp.qp_num)
        connect(b.qp, ADDR, b.gid_index, a.qp.qp_num)
        wmr = MR(b.pd, MR_LEN, MW_MR_ACCESS)
        self.addCleanup(wmr.close)
        mw = MW(b.pd, e.IBV_MW_TYPE_2)
        self.addCleanup(mw.close)
        bind = SendWR(wr_id=1, opcode=e.IBV_WR_BIND_MW, send_flags=e.IBV_SEND_SIGNALED)
        bind.set_bind_wr(mw, MWBindInfo(wmr, wmr.buf, 256, e.IBV_ACCESS_REMOTE_WRITE))
        b.qp.post_send(bind)
        self.assertEqual([w.status for w in poll(b.cq, 1)], [e.IBV_WC_SUCCESS])
        rkey = bind.rkey

        def post(opcode, length, wr_id):
            wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=1,
                        sg=[SGE(a.mr.buf, length, a.mr.lkey)], send_flags=e.IBV_SEND_SIGNALED)
            if opcode == e.IBV_WR_RDMA_WRITE:
                wr.set_wr_rdma(rkey, wmr.buf + 8)
            else:
                wr.imm_data = rkey
            a.qp.post_send(wr)
            wcs = poll(a.cq, 1)
            self.assertEqual(len(wcs), 1)
            return wcs[0].status

        a.mr.write(bytes(range(256)) * 16, MR_LEN)
        self.assertEqual(post(e.IBV_WR_RDMA_WRITE, 64, 2), e.IBV_WC_SUCCESS)
        self.assertEqual(wmr.read(64, 8), bytes(range(64)))
        self.assertEqual(post(e.IBV_WR_SEND_WITH_INV, 3000, 3), e.IBV_WC_SUCCESS)
        wcs = poll(b.cq, 1)
        self.assertEqual([(w.status, w.opcode, w.byte_len, w.imm_data) for w in wcs],
                         [(e.IBV_WC_SUCCESS, e.IBV_WC_RECV, 3000, rkey)])
        self.assertEqual(wcs[0].wc_flags & (e.IBV_WC_WITH_INV | e.IBV_WC_IP_CSUM_OK),
                         e.IBV_WC_WITH_INV)
        self.assertEqual(b.rbuf.read(3000, 0), (bytes(range(256)) * 16)[:3000])
        # Invalidated: the window takes no more.
        self.assertEqual(post(e.IBV_WR_RDMA_WRITE, 64, 4), e.IBV_WC_REM_ACCESS_ERR)


class Atomics(unittest.TestCase):
    """Atomics between two real RC QPs (DEV requester, PEER_DEV responder), and many processes'
    atomics on one word."""

    def setUp(self):
        self.a = Endpoint(DEV, ADDR)
        self.addCleanup(self.a.close)
        self.b = Endpoint(PEER_DEV, PEER_ADDR)
        self.addCleanup(self.b.close)
        connect(self.a.qp, PEER_ADDR, self.a.gid_index, self.b.qp.qp_num)
        connect(self.b.qp, ADDR, self.b.gid_index, self.a.qp.qp_num)

    def atomic(self, opcode, compare_add, swap=0, wr_id=1):
        """Posts one atomic on B's word at offset 16; returns its completion and what landed."""
        a, b = self.a, self.b
        a.mr.write(bytes(8), 8, 64)
        wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=1, sg=[SGE(a.mr.buf + 64, 8, a.mr.lkey)],
                    send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_atomic(b.mr.rkey, b.mr.buf + 16, compare_add, swap)
        a.qp.post_send(wr)
        wcs = poll(a.cq, 1)
        self.assertEqual(len(wcs), 1)
        return wcs[0], struct.unpack("<Q", a.mr.read(8, 64))[0]

    def word(self):
        return struct.unpack("<Q", self.b.mr.read(8, 16))[0]

    def test_compare_swap_and_fetch_add_answer_the_original_value(self):
        self.b.mr.write(struct.pack("<Q", 10), 8, 16)
        wc, orig = self.atomic(e.IBV_WR_ATOMIC_FETCH_AND_ADD, 5)
        self.assertEqual((wc.status, wc.opcode, wc.byte_len, orig),
                         (e.IBV_WC_SUCCESS, e.IBV_WC_FETCH_ADD, 8, 10))
        self.assertEqual(self.word(), 15)
        wc, orig = self.atomic(e.IBV_WR_ATOMIC_CMP_AND_SWP, 15, 1 << 63, wr_id=2)
        self.assertEqual((wc.wr_id, wc.status, wc.opcode, wc.byte_len, orig),
                         (2, e.IBV_WC_SUCCESS, e.IBV_WC_COMP_SWAP, 8, 15))
        self.assertEqual(self.word(), 1 << 63)
        # No swap when the compare fails; the add wraps at 2^64.
        wc, orig = self.atomic(e.IBV_WR_ATOMIC_CMP_AND_SWP, 15, 3)
        self.assertEqual((wc.status, orig, self.word()), (e.IBV_WC_SUCCESS, 1 << 63, 1 << 63))
        wc, orig = self.atomic(e.IBV_WR_ATOMIC_FETCH_AND_ADD, (1 << 63) + 1)
        self.assertEqual((wc.status, orig, self.word()), (e.IBV_WC_SUCCESS, 1 << 63, 1))
        self.assertEqual(counters(PEER_DEV)["rx_atomic_requests"] >= 4, True)

    def test_no_update_is_lost(self):
        """PROCS processes, QPS QPs each, ADDS fetch-and-adds per QP on one word of B: the word
        ends exactly PROCS x QPS x ADDS higher."""
        procs, qps, adds = 2, 2, 40
        b = self.b
        b.mr.write(struct.pack("<Q", 1000), 8, 16)
        responders = []
        for _ in range(procs * qps):
            qp = b.new_qp()
            b.qp_to_init(qp)
            responders.append(qp)
        children = []
        for p in range(procs):
            to_child, to_parent = os.pipe(), os.pipe()
            pid = os.fork()
            if pid == 0:
                os._exit(adder(to_child[0], to_parent[1], qps, adds, b.mr.rkey, b.mr.buf + 16))
            os.close(to_child[0])
            os.close(to_parent[1])
            children.append((pid, to_child[1], to_parent[0]))
        for p, (pid, w, r) in enumerate(children):
            qpns = struct.unpack(f"{qps}I", os.read(r, 4 * qps))
            for i, qpn in enumerate(qpns):
                connect(responders[p * qps + i], ADDR, b.gid_index, qpn, max_dest_rd_atomic=4)
            os.write(w, struct.pack(f"{qps}I", *(q.qp_num for q in responders[p * qps:][:qps])))
        statuses = [os.waitpid(pid, 0)[1] for pid, _, _ in children]
        for qp in responders:
            qp.close()
        self.assertEqual(statuses, [0] * procs)
        self.assertEqual(self.word(), 1000 + procs * qps * adds)


def adder(r, w, qps, adds, rkey, va):
    """A child of test_no_update_is_lost: QPS QPs on DEV, connected to the responder QPs the
    parent names, each adding 1 to the word ADDS times, one in flight per QP. Returns the exit
    status."""
    try:
        ctx = Context(name=DEV)
        pd = PD(ctx)
        cq = CQ(ctx, 4 * qps)
        mr = MR(pd, 8 * qps, e.IBV_ACCESS_LOCAL_WRITE)
        ep = Endpoint.__new__(Endpoint)
        ep.qp_type, ep.rc_access = e.IBV_QPT_RC, 0
        cap = QPCap(max_send_wr=4, max_recv_wr=1, max_send_sge=1, max_recv_sge=1)
        mine = [QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
                for _ in range(qps)]
        for qp in mine:
            ep.qp_to_init(qp)
        os.write(w, struct.pack(f"{qps}I", *(qp.qp_num for qp in mine)))
        peers = struct.unpack(f"{qps}I", os.read(r, 4 * qps))
        sgid = gid_index(ctx, ADDR)
        for qp, peer_qpn in zip(mine, peers):
            connect(qp, PEER_ADDR, sgid, peer_qpn, max_rd_atomic=1)
        for _ in range(adds):
            for i, qp in enumerate(mine):
                wr = SendWR(wr_id=i, opcode=e.IBV_WR_ATOMIC_FETCH_AND_ADD, num_sge=1,
                            sg=[SGE(mr.buf + 8 * i, 8, mr.lkey)], send_flags=e.IBV_SEND_SIGNALED)
                wr.set_wr_atomic(rkey, va, 1, 0)
                qp.post_send(wr)
            wcs = poll(cq, qps, seconds=30)
            if len(wcs) != qps or any(wc.status != e.IBV_WC_SUCCESS for wc in wcs):
                return 1
        return 0
    except Exception as ex:  # noqa: BLE001 - the parent sees only the status
        print(f"# adder: {ex!r}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    unittest.main(verbosity=2)

#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Queue pairs of a ferroce device, through pyverbs and rdma-core's rxe provider.

Creating a QP maps its send and receive rings; modify walks the IBTA state machine with the
attributes an RC connection needs (path, PSNs, QPN, timers); query must give them back.
"""

import errno
import sys
import unittest

import pyverbs.enums as e
from pyverbs.addr import AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.mr import MR
from pyverbs.wr import SGE, SendWR

DEV = sys.argv.pop(1) if len(sys.argv) > 1 else "fer0"
ALL = 0x1FFFFFF


def roce_v2_ipv4_gid(ctx):
    """Index and GID of the port's RoCE v2 GID for an IPv4 address."""
    for i in range(ctx.query_port(1).gid_tbl_len):
        try:
            gid = ctx.query_gid(1, i)
            kind = ctx.query_gid_type(1, i)
        except PyverbsRDMAError:
            continue
        if kind == e.IBV_GID_TYPE_SYSFS_ROCE_V2 and str(gid).startswith("0000:0000:0000:0000:0000:ffff"):
            return i, gid
    raise RuntimeError("no RoCE v2 IPv4 GID")


class QpTest(unittest.TestCase):
    def setUp(self):
        self.ctx = Context(name=DEV)
        self.pd = PD(self.ctx)
        self.cq = CQ(self.ctx, 64)

    def tearDown(self):
        self.cq.close()
        self.pd.close()
        self.ctx.close()

    def qp(self, qp_type=e.IBV_QPT_RC, **caps):
        cap = QPCap(max_send_wr=caps.get("send_wr", 16), max_recv_wr=caps.get("recv_wr", 16),
                    max_send_sge=caps.get("send_sge", 2), max_recv_sge=caps.get("recv_sge", 2),
                    max_inline_data=caps.get("inline", 64))
        return QP(self.pd, QPInitAttr(qp_type=qp_type, scq=self.cq, rcq=self.cq, cap=cap))

    def test_caps_are_at_least_those_asked(self):
        qp = self.qp(send_wr=100, recv_wr=3, send_sge=3, recv_sge=5, inline=200)
        attr, init = qp.query(ALL)
        self.assertGreaterEqual(init.cap.max_send_wr, 100)
        self.assertGreaterEqual(init.cap.max_recv_wr, 3)
        self.assertGreaterEqual(init.cap.max_send_sge, 3)
        self.assertGreaterEqual(init.cap.max_recv_sge, 5)
        self.assertGreaterEqual(init.cap.max_inline_data, 200)
        qp.close()

    def test_queues_as_deep_as_c_rxe_allows(self):
        # max_qp_wr is C rxe's 2^20. A receive ring of that depth (128 MiB, user-mapped, as
        # C rxe's); its send ring is as deep (limits.rs) but 4 times larger.
        self.assertEqual(self.ctx.query_device().max_qp_wr, 1 << 20)
        qp = self.qp(send_wr=16, recv_wr=1 << 20, send_sge=1, recv_sge=1, inline=0)
        self.assertGreaterEqual(qp.query(ALL)[1].cap.max_recv_wr, 1 << 20)
        qp.close()

    def test_caps_beyond_limits_fail(self):
        for caps in ({"send_wr": (1 << 20) + 1}, {"recv_wr": (1 << 20) + 1}, {"send_sge": 33},
                     {"recv_sge": 33}, {"inline": 513}):
            with self.assertRaises(PyverbsRDMAError, msg=str(caps)):
                self.qp(**caps)

    def test_numbers_are_unique_and_not_reserved(self):
        qps = [self.qp(qp_type=t) for t in (e.IBV_QPT_RC, e.IBV_QPT_UC, e.IBV_QPT_UD) * 40]
        nums = {qp.qp_num for qp in qps}
        self.assertEqual(len(nums), len(qps))
        self.assertTrue(all(16 <= n < 1 << 24 for n in nums))
        for qp in qps:
            qp.close()

    def test_rc_connects_and_query_gives_attributes_back(self):
        gid_index, gid = roce_v2_ipv4_gid(self.ctx)
        qp = self.qp()
        self.assertEqual(qp.qp_state, e.IBV_QPS_RESET)
        qa = QPAttr(port_num=1)
        qa.qp_access_flags = e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_LOCAL_WRITE
        qp.to_init(qa)
        self.assertEqual(qp.query(ALL)[0].qp_state, e.IBV_QPS_INIT)

        gr = GlobalRoute(dgid=gid, sgid_index=gid_index, hop_limit=7, traffic_class=0x20,
                         flow_label=0x1234)
        qa = QPAttr(port_num=1)
        qa.ah_attr = AHAttr(port_num=1, is_global=1, gr=gr)
        qa.path_mtu = e.IBV_MTU_1024
        qa.dest_qp_num = 0xABCDE
        qa.rq_psn = 0x123456
        qa.max_dest_rd_atomic = 4
        qa.min_rnr_timer = 12
        qp.to_rtr(qa)
        qa.sq_psn = 0x654321
        qa.timeout = 14
        qa.retry_cnt = 7
        qa.rnr_retry = 6
        qa.max_rd_atomic = 8
        qp.to_rts(qa)

        attr, _ = qp.query(ALL)
        self.assertEqual(attr.qp_state, e.IBV_QPS_RTS)
        self.assertEqual(attr.path_mtu, e.IBV_MTU_1024)
        self.assertEqual(attr.dest_qp_num, 0xABCDE)
        self.assertEqual(attr.rq_psn, 0x123456)
        self.assertEqual(attr.sq_psn, 0x654321)
        self.assertEqual((attr.timeout, attr.retry_cnt, attr.rnr_retry), (14, 7, 6))
        self.assertEqual((attr.max_rd_atomic, attr.max_dest_rd_atomic), (8, 4))
        self.assertEqual(attr.min_rnr_timer, 12)
        self.assertEqual(attr.ah_attr.sgid_index, gid_index)
        # The core resolves the route and sets the hop limit from it (TTL 64 here).
        self.assertEqual(attr.ah_attr.hop_limit, 64)
        self.assertEqual(attr.ah_attr.traffic_class, 0x20)
        self.assertEqual(attr.ah_attr.flow_label, 0x1234)
        self.assertEqual(str(attr.ah_attr.dgid), str(gid))
        # Back to reset and to error are always allowed.
        qa = QPAttr()
        qa.qp_state = e.IBV_QPS_ERR
        qp.modify(qa, e.IBV_QP_STATE)
        self.assertEqual(qp.query(ALL)[0].qp_state, e.IBV_QPS_ERR)
        qa.qp_state = e.IBV_QPS_RESET
        qp.modify(qa, e.IBV_QP_STATE)
        self.assertEqual(qp.query(ALL)[0].qp_state, e.IBV_QPS_RESET)
        qp.close()

    def test_invalid_transitions_and_values_fail(self):
        qp = self.qp()
        qa = QPAttr()
        qa.qp_state = e.IBV_QPS_RTS
        with self.assertRaises(PyverbsRDMAError):
            qp.modify(qa, e.IBV_QP_STATE)
        bad = ({"port_num": 2}, {"pkey_index": 1})
        for fields in bad:
            qa = QPAttr(port_num=1)
            qa.qp_state = e.IBV_QPS_INIT
            for k, v in fields.items():
                setattr(qa, k, v)
            mask = e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_ACCESS_FLAGS
            with self.assertRaises(PyverbsRDMAError, msg=str(fields)) as ctx:
                qp.modify(qa, mask)
            self.assertEqual(ctx.exception.error_code, errno.EINVAL)
        self.assertEqual(qp.query(ALL)[0].qp_state, e.IBV_QPS_RESET)
        qp.close()

    def test_a_send_before_rts_fails_at_the_doorbell(self):
        # As on the C rxe: RESET, INIT and RTR refuse a posted send with EINVAL (rdma-core's
        # test_post_send_qp_state_bad_flow checks UD in RESET only).
        gid_index, gid = roce_v2_ipv4_gid(self.ctx)
        # Closed with the PD (pyverbs closes a PD's objects with it).
        mr = MR(self.pd, 64, e.IBV_ACCESS_LOCAL_WRITE)
        for qp_type in (e.IBV_QPT_RC, e.IBV_QPT_UC):
            qp = self.qp(qp_type)
            for step in ("reset", "init", "rtr"):
                if step == "init":
                    qa = QPAttr(port_num=1)
                    qa.qp_access_flags = e.IBV_ACCESS_REMOTE_WRITE
                    qp.to_init(qa)
                elif step == "rtr":
                    qa = QPAttr(port_num=1)
                    qa.ah_attr = AHAttr(port_num=1, is_global=1,
                                        gr=GlobalRoute(dgid=gid, sgid_index=gid_index))
                    qa.path_mtu = e.IBV_MTU_1024
                    qa.dest_qp_num = qp.qp_num
                    qp.to_rtr(qa)
                with self.assertRaises(PyverbsRDMAError, msg=f"{qp_type} {step}") as ex:
                    qp.post_send(SendWR(opcode=e.IBV_WR_SEND, num_sge=1,
                                        sg=[SGE(mr.buf, 8, mr.lkey)]))
                self.assertEqual(ex.exception.error_code, errno.EINVAL)
            qp.close()

    def test_a_path_mtu_that_is_no_ib_mtu_fails(self):
        gid_index, gid = roce_v2_ipv4_gid(self.ctx)
        qp = self.qp()
        qp.to_init(QPAttr(port_num=1))
        # (path_mtu is a byte in the uverbs command.)
        for mtu in (0, 6, 7, 255):
            qa = QPAttr(port_num=1)
            qa.qp_state = e.IBV_QPS_RTR
            qa.ah_attr = AHAttr(port_num=1, is_global=1,
                                gr=GlobalRoute(dgid=gid, sgid_index=gid_index))
            qa.path_mtu = mtu
            qa.dest_qp_num = 0x1234
            qa.min_rnr_timer = 12
            mask = (e.IBV_QP_STATE | e.IBV_QP_AV | e.IBV_QP_PATH_MTU | e.IBV_QP_DEST_QPN
                    | e.IBV_QP_RQ_PSN | e.IBV_QP_MAX_DEST_RD_ATOMIC | e.IBV_QP_MIN_RNR_TIMER)
            with self.assertRaises(PyverbsRDMAError, msg=f"path_mtu {mtu}") as ctx:
                qp.modify(qa, mask)
            self.assertEqual(ctx.exception.error_code, errno.EINVAL)
        self.assertEqual(qp.query(ALL)[0].qp_state, e.IBV_QPS_INIT)
        qp.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)

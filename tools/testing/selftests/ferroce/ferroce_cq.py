#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Completion queues of a ferroce device, driven through rdma-core's rxe provider (pyverbs).

The provider maps each CQ's ring and polls it in user space, so creating, polling, arming and
resizing a CQ exercises the rxe ring ABI: mmap offsets and sizes, the ring header, the
resize response, and the limits.
"""

import errno
import sys
import unittest

from pyverbs.cq import CQ, CompChannel
from pyverbs.device import Context
from pyverbs.pyverbs_error import PyverbsRDMAError

DEV = sys.argv.pop(1) if len(sys.argv) > 1 else "fer0"
MAX_CQE = 32767


class CqTest(unittest.TestCase):
    def setUp(self):
        self.ctx = Context(name=DEV)

    def tearDown(self):
        self.ctx.close()

    def test_sizes_round_up_to_the_ring(self):
        # A ring of 2^k slots keeps one free: the CQ reports 2^k - 1 entries.
        for asked, got in ((1, 1), (2, 3), (100, 127), (4096, 8191), (MAX_CQE, MAX_CQE)):
            with CQ(self.ctx, asked) as cq:
                self.assertEqual(cq.cqe, got, f"cqe {asked}")

    def test_new_cq_is_empty(self):
        with CQ(self.ctx, 10) as cq:
            npolled, wcs = cq.poll(8)
            self.assertEqual((npolled, len(wcs)), (0, 0))

    def test_out_of_range_sizes_fail(self):
        for bad in (0, MAX_CQE + 1, 1 << 20):
            with self.assertRaises(PyverbsRDMAError, msg=f"cqe {bad}") as ctx:
                CQ(self.ctx, bad)
            self.assertEqual(ctx.exception.error_code, errno.EINVAL, f"cqe {bad}")

    def test_bad_comp_vector_fails(self):
        with self.assertRaises(PyverbsRDMAError):
            CQ(self.ctx, 10, comp_vector=1 << 20)

    def test_arm_with_channel(self):
        ch = CompChannel(self.ctx)
        with CQ(self.ctx, 10, None, ch, 0) as cq:
            cq.req_notify()
            cq.req_notify(solicited_only=True)
            self.assertEqual(cq.poll(1)[0], 0)
        ch.close()

    def test_resize_grows_and_shrinks(self):
        with CQ(self.ctx, 10) as cq:
            self.assertEqual(cq.cqe, 15)
            cq.resize(1000)
            self.assertEqual(cq.cqe, 1023)
            self.assertEqual(cq.poll(4)[0], 0)
            cq.resize(3)
            self.assertEqual(cq.cqe, 3)
            self.assertEqual(cq.poll(4)[0], 0)
            with self.assertRaises(PyverbsRDMAError):
                cq.resize(MAX_CQE + 1)
            # A failed resize keeps the old ring.
            self.assertEqual(cq.cqe, 3)
            self.assertEqual(cq.poll(4)[0], 0)

    def test_many_cqs(self):
        cqs = [CQ(self.ctx, 64) for _ in range(256)]
        for cq in cqs:
            self.assertEqual(cq.poll(1)[0], 0)
        for cq in cqs:
            cq.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)

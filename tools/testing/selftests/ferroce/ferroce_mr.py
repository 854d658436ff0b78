#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Memory regions of a ferroce device, through pyverbs and rdma-core's rxe provider.

Registration pins the pages and hands out keys; these tests check the keys (distinct, rkey only
with remote access, a freed key not immediately reused, key bits not predictable) and the
refusals (zero length, bad access flags, memory the process does not have).
"""

import errno
import sys
import unittest

from pyverbs.device import Context
from pyverbs.enums import (IBV_ACCESS_LOCAL_WRITE, IBV_ACCESS_REMOTE_READ,
                           IBV_ACCESS_REMOTE_WRITE)
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError

DEV = sys.argv.pop(1) if len(sys.argv) > 1 else "fer0"
LW, RW, RR = IBV_ACCESS_LOCAL_WRITE, IBV_ACCESS_REMOTE_WRITE, IBV_ACCESS_REMOTE_READ


class MrTest(unittest.TestCase):
    def setUp(self):
        self.ctx = Context(name=DEV)
        self.pd = PD(self.ctx)

    def tearDown(self):
        self.pd.close()
        self.ctx.close()

    def test_register_sizes_and_access(self):
        for size in (1, 4095, 4096, 4097, 1 << 20, 8 << 20):
            for access in (0, LW, LW | RW, LW | RW | RR, RR):
                with MR(self.pd, size, access) as mr:
                    self.assertEqual(mr.length, size)
                    self.assertNotEqual(mr.lkey, 0)
                    remote = access & (RW | RR)
                    self.assertEqual(mr.rkey, mr.lkey if remote else 0, f"{size} {access}")

    def test_keys_are_distinct_and_not_reused_at_once(self):
        mrs = [MR(self.pd, 4096, LW | RW) for _ in range(200)]
        keys = {mr.lkey for mr in mrs}
        self.assertEqual(len(keys), 200)
        old = mrs[0].lkey
        mrs[0].close()
        again = MR(self.pd, 4096, LW | RW)
        self.assertNotEqual(again.lkey, old)
        again.close()
        for mr in mrs[1:]:
            mr.close()

    def test_key_bits_are_not_predictable(self):
        # A key is index << 8 | tag. With a counter for a tag, the next rkey follows from one
        # seen on the wire; the tags must look random (C rxe's do).
        mrs = [MR(self.pd, 4096, LW | RW) for _ in range(64)]
        tags = [mr.rkey & 0xff for mr in mrs]
        for mr in mrs:
            mr.close()
        steps = [(b - a) & 0xff for a, b in zip(tags, tags[1:])]
        # 63 steps of uniform bytes: the commonest step value shows up about 1-4 times.
        common = max(steps.count(s) for s in set(steps))
        self.assertLess(common, 16, f"tags {tags}")
        self.assertGreater(len(set(tags)), 32, f"tags {tags}")

    def test_remote_write_needs_local_write(self):
        with self.assertRaises(PyverbsRDMAError) as ctx:
            MR(self.pd, 4096, RW)
        self.assertEqual(ctx.exception.error_code, errno.EINVAL)

    def test_zero_length_fails(self):
        with self.assertRaises(PyverbsRDMAError):
            MR(self.pd, 0, LW)

    def test_unmapped_memory_fails(self):
        # Page 16 of the address space is never mapped (mmap_min_addr).
        with self.assertRaises(PyverbsRDMAError) as ctx:
            MR(self.pd, 4096, LW, address=0x10000)
        self.assertEqual(ctx.exception.error_code, errno.EFAULT)

    def test_pages_are_released(self):
        # 64 rounds of 16 MiB: pinned pages that were not released would exhaust the guest.
        for _ in range(64):
            with MR(self.pd, 16 << 20, LW) as mr:
                self.assertNotEqual(mr.lkey, 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)

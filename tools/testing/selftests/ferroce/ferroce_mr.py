#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Memory regions of a ferroce device, through pyverbs and rdma-core's rxe provider.

Registration pins the pages and hands out keys; these tests check the keys (distinct, rkey only
with remote access, a freed key not immediately reused, key bits not predictable) and the
refusals (zero length, bad access flags, memory the process does not have), and
reregistration (PD and access changed in place; QPs of DEV on ADDR move the data).

  ferroce_mr.py DEV ADDR
"""

import ctypes
import errno
import os
import struct
import sys
import threading
import unittest

import pyverbs.enums as e
from pyverbs.device import Context
from pyverbs.enums import (IBV_ACCESS_LOCAL_WRITE, IBV_ACCESS_REMOTE_READ,
                           IBV_ACCESS_REMOTE_WRITE)
from pyverbs.mr import MR, MW, MWBind, MWBindInfo
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.wr import SGE, SendWR

if len(sys.argv) != 3:
    sys.exit(__doc__)
DEV, ADDR = sys.argv[1:3]
del sys.argv[1:]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ferroce_pyverbs import MR_LEN, Endpoint, connect, poll  # noqa: E402

LW, RW, RR = IBV_ACCESS_LOCAL_WRITE, IBV_ACCESS_REMOTE_WRITE, IBV_ACCESS_REMOTE_READ
IB_USER_VERBS_CMD_REREG_MR = 11  # enum ib_uverbs_write_cmds
REREG_TRANS, REREG_PD, REREG_ACCESS = 1, 2, 4  # enum ib_mr_rereg_flags


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


def rereg(ctx, mr, flags, pd=None, access=0):
    """ibv_rereg_mr as the kernel takes it (rdma-core's rxe provider has no rereg_mr): the
    REREG_MR command (struct ib_uverbs_rereg_mr) on the context's file; returns (lkey, rkey)."""
    resp = ctypes.create_string_buffer(8)
    body = struct.pack("=QIIQQQII", ctypes.addressof(resp), mr.handle, flags, 0, 0, 0,
                       pd.handle if pd else 0, access)
    os.write(ctx.cmd_fd, struct.pack("=IHH", IB_USER_VERBS_CMD_REREG_MR, (8 + len(body)) // 4,
                                     len(resp) // 4) + body)
    return struct.unpack("=II", resp.raw)


class Rereg(unittest.TestCase):
    """A region of B changes PD or rights in place; A's RDMA WRITEs and READs (over DEV's own
    address) land or are refused accordingly."""

    def setUp(self):
        self.a = Endpoint(DEV, ADDR)
        self.b = Endpoint(DEV, ADDR)
        self.objs = []
        self.connect()

    def connect(self):
        connect(self.a.qp, ADDR, self.a.gid_index, self.b.qp.qp_num)
        connect(self.b.qp, ADDR, self.b.gid_index, self.a.qp.qp_num)

    def again(self):
        """New QPs (the last refusal took A's to the error state), same PDs and regions."""
        for ep in (self.a, self.b):
            self.objs.append(ep.qp)
            ep.qp = ep.new_qp()
            ep.to_init(4)
        self.connect()

    def tearDown(self):
        for o in reversed(self.objs):
            o.close()
        self.a.close()
        self.b.close()

    def keep(self, obj):
        self.objs.append(obj)
        return obj

    def rdma(self, opcode, rkey, target, length, data=None, at=0):
        """A's RDMA WRITE of DATA (or READ of LENGTH bytes) at TARGET's start + AT; returns
        its completion status."""
        if data is not None:
            self.a.mr.write(data, length)
        wr = SendWR(wr_id=1, opcode=opcode, num_sge=1,
                    sg=[SGE(self.a.mr.buf, length, self.a.mr.lkey)],
                    send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_rdma(rkey, target.buf + at)
        self.a.qp.post_send(wr)
        return self.completion(self.a).status

    def completion(self, ep):
        """The next completion of EP's QP (skipping what QPs replaced by again() flushed)."""
        for _ in range(16):
            wcs = poll(ep.cq, 1)
            self.assertEqual(len(wcs), 1)
            if wcs[0].qp_num == ep.qp.qp_num:
                return wcs[0]
        raise AssertionError("no completion from the current QP")

    def write(self, rkey, target, data, at=0):
        return self.rdma(e.IBV_WR_RDMA_WRITE, rkey, target, len(data), data, at)

    def read(self, rkey, target, length):
        return self.rdma(e.IBV_WR_RDMA_READ, rkey, target, length)

    def test_rights_given_and_taken_back(self):
        target = self.keep(MR(self.b.pd, MR_LEN, LW))
        key = target.lkey
        self.assertEqual(target.rkey, 0)
        self.assertEqual(rereg(self.b.ctx, target, REREG_ACCESS, access=LW | RW), (key, key))
        self.assertEqual(self.write(key, target, b"\x11" * 32), e.IBV_WC_SUCCESS)
        self.assertEqual(target.read(32, 0), b"\x11" * 32)
        self.assertEqual(self.read(key, target, 32), e.IBV_WC_REM_ACCESS_ERR)
        self.again()
        self.assertEqual(rereg(self.b.ctx, target, REREG_ACCESS, access=LW | RR), (key, key))
        self.a.mr.write(bytes(32), 32)
        self.assertEqual(self.read(key, target, 32), e.IBV_WC_SUCCESS)
        self.assertEqual(self.a.mr.read(32, 0), b"\x11" * 32)
        self.assertEqual(self.write(key, target, b"\x22" * 32), e.IBV_WC_REM_ACCESS_ERR)
        self.assertEqual(target.read(32, 0), b"\x11" * 32)
        self.again()
        self.assertEqual(rereg(self.b.ctx, target, REREG_ACCESS, access=LW), (key, 0))
        self.assertEqual(self.read(key, target, 32), e.IBV_WC_REM_ACCESS_ERR)

    def test_memory_pinned_read_only_takes_no_writing_rights(self):
        # Rights that write memory pinned read-only would need new memory: refused (EACCES,
        # as every provider answers), and the region stays as it was.
        target = self.keep(MR(self.b.pd, MR_LEN, RR))
        target.write(b"\x33" * 64, 64)
        for rights in (LW, LW | RW, LW | RW | RR, LW | e.IBV_ACCESS_REMOTE_ATOMIC,
                       e.IBV_ACCESS_MW_BIND):
            with self.assertRaises(OSError) as ctx:
                rereg(self.b.ctx, target, REREG_ACCESS, access=rights)
            self.assertEqual(ctx.exception.errno, errno.EACCES, rights)
        self.assertEqual(self.read(target.rkey, target, 64), e.IBV_WC_SUCCESS)
        self.assertEqual(self.a.mr.read(64, 0), b"\x33" * 64)
        self.assertEqual(self.write(target.rkey, target, b"\x34" * 64), e.IBV_WC_REM_ACCESS_ERR)
        self.assertEqual(target.read(64, 0), b"\x33" * 64)

    def test_a_region_moved_between_pds(self):
        other = self.keep(PD(self.b.ctx))
        target = self.keep(MR(other, MR_LEN, LW | RW))
        key = target.rkey
        # In another PD than B's QP: refused.
        self.assertEqual(self.write(key, target, b"\x44" * 16), e.IBV_WC_REM_ACCESS_ERR)
        self.again()
        self.assertEqual(rereg(self.b.ctx, target, REREG_PD, pd=self.b.pd), (key, key))
        self.assertEqual(self.write(key, target, b"\x55" * 16), e.IBV_WC_SUCCESS)
        self.assertEqual(target.read(16, 0), b"\x55" * 16)
        # Moved away again, same rights: refused for the PD alone, locally and remotely.
        self.assertEqual(rereg(self.b.ctx, target, REREG_PD, pd=other), (key, key))
        wr = SendWR(wr_id=2, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(target.buf, 16, key)],
                    send_flags=e.IBV_SEND_SIGNALED)
        self.b.qp.post_send(wr)
        wc = self.completion(self.b)
        self.assertEqual((wc.wr_id, wc.status), (2, e.IBV_WC_LOC_PROT_ERR))
        self.again()
        self.assertEqual(self.write(key, target, b"\x66" * 16), e.IBV_WC_REM_ACCESS_ERR)
        self.assertEqual(target.read(16, 0), b"\x55" * 16)

    def test_refusals_change_nothing(self):
        target = self.keep(MR(self.b.pd, MR_LEN, LW | RW))
        cases = [("new memory (not supported)", REREG_TRANS, LW, errno.EOPNOTSUPP),
                 ("no change asked", 0, LW, errno.EINVAL),
                 ("remote write without local write", REREG_ACCESS, RW, errno.EINVAL),
                 ("an unknown flag", 8, LW, errno.EOPNOTSUPP)]
        for what, flags, access, err in cases:
            with self.assertRaises(OSError, msg=what) as ctx:
                rereg(self.b.ctx, target, flags, access=access)
            self.assertEqual(ctx.exception.errno, err, what)
        self.assertEqual(self.write(target.rkey, target, b"\x77" * 8), e.IBV_WC_SUCCESS)
        self.assertEqual(target.read(8, 0), b"\x77" * 8)

    def test_a_bound_window_stays_bound_until_the_region_changes(self):
        rights = LW | e.IBV_ACCESS_MW_BIND
        target = self.keep(MR(self.b.pd, MR_LEN, rights))
        mw = self.keep(MW(self.b.pd, e.IBV_MW_TYPE_1))
        info = MWBindInfo(target, target.buf, 64, RW)
        self.b.qp.bind_mw(mw, MWBind(info, e.IBV_SEND_SIGNALED))
        self.assertEqual([w.status for w in poll(self.b.cq, 1)], [e.IBV_WC_SUCCESS])
        # Nothing changes (its own PD, its own rights): the window still serves.
        self.assertEqual(rereg(self.b.ctx, target, REREG_PD | REREG_ACCESS, pd=self.b.pd,
                               access=rights), (target.lkey, 0))
        self.assertEqual(self.write(mw.rkey, target, b"\x88" * 8), e.IBV_WC_SUCCESS)
        # New rights: a new registration, which the window was not bound to.
        rereg(self.b.ctx, target, REREG_ACCESS, access=rights | RR)
        self.assertEqual(self.write(mw.rkey, target, b"\x99" * 8), e.IBV_WC_REM_ACCESS_ERR)
        self.assertEqual(target.read(8, 0), b"\x88" * 8)

    def test_writes_under_way_land_while_rights_change(self):
        # Both rights allow the writes: each packet sees the old state or the new one, never
        # neither. 4 KiB writes are 4 packets at the 1 KiB MTU.
        target = self.keep(MR(self.b.pd, MR_LEN, LW | RW))
        done = threading.Event()
        changes = []

        def flip():
            while not done.is_set():
                for rights in (LW | RW | RR, LW | RW):
                    rereg(self.b.ctx, target, REREG_ACCESS, access=rights)
                    changes.append(rights)

        flipper = threading.Thread(target=flip)
        flipper.start()
        try:
            # At least 60 writes, and on until the rights changed 20 times meanwhile.
            for i in range(1000):
                data = bytes([i % 256]) * MR_LEN
                self.assertEqual(self.write(target.rkey, target, data), e.IBV_WC_SUCCESS, i)
                self.assertEqual(target.read(MR_LEN, 0), data, i)
                if i >= 60 and len(changes) >= 20:
                    break
        finally:
            done.set()
            flipper.join()
        self.assertGreaterEqual(len(changes), 20)

    def test_no_page_is_pinned_twice_or_left_pinned(self):
        other = self.keep(PD(self.b.ctx))
        base = pinned_kib()
        target = MR(self.b.pd, 16 << 20, LW | RW)
        held = pinned_kib()
        self.assertGreaterEqual(held - base, 16 << 10)
        for i in range(40):
            rereg(self.b.ctx, target, REREG_ACCESS, access=LW | (RW if i % 2 else RR))
            if i % 3 == 0:
                rereg(self.b.ctx, target, REREG_PD, pd=self.b.pd if i % 2 else other)
        self.assertEqual(pinned_kib(), held)
        target.close()
        self.assertEqual(pinned_kib(), base)


def pinned_kib():
    """This process's pinned memory (VmPin: what registrations pinned), in KiB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmPin:"):
                return int(line.split()[1])
    raise AssertionError("no VmPin in /proc/self/status")


if __name__ == "__main__":
    unittest.main(verbosity=2)

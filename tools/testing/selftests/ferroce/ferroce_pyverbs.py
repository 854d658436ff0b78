# SPDX-License-Identifier: GPL-2.0
"""pyverbs helpers the ferroce selftests share: RC/UC QPs between two devices, counters, and
the rxe ring layout for tests that write into a process's rings."""

import ctypes
import ipaddress
import os
import struct
import subprocess
import time

import pyverbs.enums as e
from pyverbs.addr import GID, AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR

RQ_PSN = 0x100
MR_LEN = 4096
RECV_LEN = 64
REMOTE = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ |
          e.IBV_ACCESS_REMOTE_ATOMIC)

# rdma-core's rxe rings (struct rxe_queue_buf) and send WQEs (struct rxe_send_wqe).
RING_PRODUCER, RING_CONSUMER, RING_HEADER = 128, 256, 384
WQE_OPCODE, WQE_FLAGS, WQE_REMOTE_ADDR, WQE_RKEY = 12, 16, 24, 32
WQE_LENGTH, WQE_NUM_SGE, WQE_SGES = 184, 196, 208
RECV_NUM_SGE, RECV_SGES = 28, 40
IBV_WR_RDMA_READ_OPCODE = 4


def kernel_log():
    return subprocess.run(["dmesg"], capture_output=True, text=True, check=True).stdout


def kernel_warnings():
    """The kernel log's lines that say something went wrong (a test compares before/after)."""
    bad = ("WARNING:", "BUG:", "Oops", "soft lockup", "hung_task", "rcu_sched detected stall",
           "self-detected stall", "kmemleak:", "general protection")
    return [line for line in kernel_log().splitlines() if any(b in line for b in bad)]


def counters(dev):
    d = f"/sys/class/infiniband/{dev}/ports/1/hw_counters"
    values = {}
    for n in os.listdir(d):
        with open(os.path.join(d, n)) as f:
            values[n] = int(f.read())
    return values


def mapped(addr):
    """The RoCE v2 GID of an IPv4 address, as pyverbs spells GIDs."""
    return ipaddress.IPv6Address("::ffff:" + addr).exploded


def gid_index(ctx, addr):
    for i in range(ctx.query_port(1).gid_tbl_len):
        try:
            if (ctx.query_gid_type(1, i) == e.IBV_GID_TYPE_SYSFS_ROCE_V2 and
                    str(ctx.query_gid(1, i)) == mapped(addr)):
                return i
        except Exception:
            continue
    raise AssertionError(f"no RoCE v2 GID for {addr}")


def connect(qp, addr, sgid_index, dest_qpn, timeout=10, max_dest_rd_atomic=1, rnr_retry=1,
            min_rnr_timer=1, max_rd_atomic=1, retry_cnt=1):
    """INIT -> RTS toward `dest_qpn` at IPv4 `addr`; both directions start at RQ_PSN."""
    qa = QPAttr(port_num=1)
    qa.path_mtu = e.IBV_MTU_1024
    qa.dest_qp_num = dest_qpn
    qa.rq_psn = RQ_PSN
    qa.max_dest_rd_atomic = max_dest_rd_atomic
    qa.min_rnr_timer = min_rnr_timer
    qa.ah_attr = AHAttr(port_num=1, is_global=1,
                        gr=GlobalRoute(dgid=GID(mapped(addr)), sgid_index=sgid_index, hop_limit=64))
    qp.to_rtr(qa)
    qa = QPAttr(port_num=1)
    qa.sq_psn = RQ_PSN
    qa.timeout = timeout
    qa.retry_cnt = retry_cnt
    qa.rnr_retry = rnr_retry
    qa.max_rd_atomic = max_rd_atomic
    qp.to_rts(qa)


def connect_uc(qp, addr, sgid_index, dest_qpn, mtu=e.IBV_MTU_1024):
    """INIT -> RTS for a UC QP (no ACK timers or read limits); both directions at RQ_PSN."""
    qa = QPAttr(port_num=1)
    qa.qp_state = e.IBV_QPS_RTR
    qa.path_mtu = mtu
    qa.dest_qp_num = dest_qpn
    qa.rq_psn = RQ_PSN
    qa.ah_attr = AHAttr(port_num=1, is_global=1,
                        gr=GlobalRoute(dgid=GID(mapped(addr)), sgid_index=sgid_index, hop_limit=64))
    qp.modify(qa, e.IBV_QP_STATE | e.IBV_QP_AV | e.IBV_QP_PATH_MTU | e.IBV_QP_DEST_QPN |
              e.IBV_QP_RQ_PSN)
    qa = QPAttr(port_num=1)
    qa.qp_state = e.IBV_QPS_RTS
    qa.sq_psn = RQ_PSN
    qp.modify(qa, e.IBV_QP_STATE | e.IBV_QP_SQ_PSN)


def poll(cq, want, seconds=10):
    wcs = []
    deadline = time.time() + seconds
    while len(wcs) < want and time.time() < deadline:
        n, got = cq.poll(want - len(wcs))
        wcs += got[:n]
        if not n:
            time.sleep(0.01)
    return wcs


def event_fds():
    """The async event files this process has open (one per device context)."""
    fds = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            if "infinibandevent" in os.readlink(f"/proc/self/fd/{fd}"):
                fds.add(int(fd))
        except OSError:
            pass
    return fds


def mapped_rings():
    """Base, mask and slot size of every ring this process maps."""
    rings = {}
    with open("/proc/self/maps") as maps:
        for line in maps:
            if "uverbs" in line and "rw-s" in line:
                base = int(line.split("-")[0], 16)
                log2, mask = struct.unpack("II", ctypes.string_at(base, 8))
                rings[base] = (mask, 1 << log2)
    return rings


def scribble(ring, wr_id, fields, sges, sge_at):
    """Writes a WQE (FIELDS {offset: (fmt, value)}, SGES at SGE_AT) at the ring's producer,
    then moves the producer on, as the provider would."""
    base, mask, size = ring
    prod = ctypes.c_uint32.from_address(base + RING_PRODUCER)
    slot = base + RING_HEADER + (prod.value & mask) * size
    ctypes.memset(slot, 0, size)
    ctypes.memmove(slot, struct.pack("Q", wr_id), 8)
    for off, (fmt, value) in fields.items():
        ctypes.memmove(slot + off, struct.pack(fmt, value), struct.calcsize(fmt))
    for i, (addr, length, lkey) in enumerate(sges):
        ctypes.memmove(slot + sge_at + 16 * i, struct.pack("QII", addr, length, lkey), 16)
    prod.value = (prod.value + 1) & mask


class Endpoint:
    """A PD, CQ, an MR peers may read and write, and an RC (or UC) QP in INIT with posted
    receives."""

    def __init__(self, dev, addr, recvs=4, qp_type=e.IBV_QPT_RC, recv_len=RECV_LEN,
                 rc_access=e.IBV_ACCESS_REMOTE_READ | e.IBV_ACCESS_REMOTE_ATOMIC):
        self.qp_type = qp_type
        self.rc_access = rc_access
        self.recv_len = recv_len
        self.ctx = Context(name=dev)
        self.dev, self.addr = dev, addr
        self.gid_index = gid_index(self.ctx, addr)
        self.pd = PD(self.ctx)
        self.cq = CQ(self.ctx, 64)
        self.mr = MR(self.pd, MR_LEN, REMOTE)
        self.mr.write(bytes(MR_LEN), MR_LEN)
        self.rbuf = MR(self.pd, recv_len * max(recvs, 1), e.IBV_ACCESS_LOCAL_WRITE)
        self.qp = self.new_qp()
        self.to_init(recvs)

    def to_init(self, recvs):
        """RESET -> INIT, then `recvs` receives posted."""
        self.qp_to_init(self.qp)
        for i in range(recvs):
            self.post_recv(i)

    def qp_to_init(self, qp):
        """RESET -> INIT for `qp` (this one's or another of its PD), with the endpoint's rights."""
        qa = QPAttr(port_num=1)
        qa.qp_state = e.IBV_QPS_INIT
        qa.qp_access_flags = e.IBV_ACCESS_REMOTE_WRITE
        if self.qp_type == e.IBV_QPT_RC:
            qa.qp_access_flags |= self.rc_access
        qp.modify(qa, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT |
                  e.IBV_QP_ACCESS_FLAGS)

    def post_recv(self, i):
        sge = SGE(self.rbuf.buf + i * self.recv_len, self.recv_len, self.rbuf.lkey)
        self.qp.post_recv(RecvWR(wr_id=100 + i, num_sge=1, sg=[sge]))

    def new_qp(self):
        cap = QPCap(max_send_wr=8, max_recv_wr=8, max_send_sge=2, max_recv_sge=1,
                    max_inline_data=64)
        return QP(self.pd, QPInitAttr(qp_type=self.qp_type, scq=self.cq, rcq=self.cq, cap=cap))

    def close(self):
        for o in (self.qp, self.rbuf, self.mr, self.cq, self.pd, self.ctx):
            o.close()

#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""A process that scribbles its send ring hurts only itself.

  ferroce_scribble.py DEV ADDR PEER_DEV PEER_ADDR SECONDS BOUND_MIB

An RC QP on DEV does RDMA WRITEs to a QP on PEER_DEV while, for SECONDS, this process moves its
send ring's producer index backwards, forwards and to random values, overwrites the consumer
index, and rings the doorbell. Whatever it writes, the kernel may only work through what the
ring holds: its unreclaimable slab may not grow by more than BOUND_MIB over the run, and the
kernel log may not gain a warning. A QP that the garbage sends to the error state is replaced.
Exits non-zero on a failed check; prints what it did.
"""

import ctypes
import os
import random
import struct
import sys
import time

import pyverbs.enums as e
from pyverbs.pyverbs_error import PyverbsError
from pyverbs.wr import SGE, SendWR

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ferroce_pyverbs import (  # noqa: E402
    RING_CONSUMER, RING_PRODUCER, Endpoint, connect, kernel_warnings, mapped_rings)

DEV, ADDR, PEER_DEV, PEER_ADDR = sys.argv[1:5]
SECONDS, BOUND_MIB = float(sys.argv[5]), int(sys.argv[6])
WRITE_LEN = 64
FIRST_WR = 1 << 20  # wr_ids of the loop's posts; the prefill's are below
IB_USER_VERBS_CMD_POST_SEND = 28  # enum ib_uverbs_write_cmds
POST_SEND_CMD_LEN = 32


def slab_kib():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("SUnreclaim:"):
                return int(line.split()[1])
    raise AssertionError("no SUnreclaim in /proc/meminfo")


class Pair:
    """An RC QP on DEV connected to one on PEER_DEV; `ring` is the DEV QP's send ring."""

    def __init__(self):
        self.b = Endpoint(PEER_DEV, PEER_ADDR, recvs=0)
        before = set(mapped_rings())
        self.a = Endpoint(DEV, ADDR, recvs=0)
        rings = [(base, m, z) for base, (m, z) in mapped_rings().items()
                 if base not in before and z >= 256]
        assert len(rings) == 1, f"one new send ring mapped, found {len(rings)}"
        self.ring = rings[0]
        connect(self.a.qp, PEER_ADDR, self.a.gid_index, self.b.qp.qp_num)
        connect(self.b.qp, ADDR, self.b.gid_index, self.a.qp.qp_num)
        # Every slot holds a valid WRITE, so whatever range the indices name is work to do.
        for i in range(self.ring[1]):
            self.write(i)
        time.sleep(0.5)
        self.a.cq.poll(64)

    def write(self, wr_id):
        """Posts a signalled RDMA WRITE into the peer's region: the provider fills the slot at
        the producer index, moves it on and rings the doorbell."""
        a, b = self.a, self.b
        wr = SendWR(wr_id=wr_id, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
                    sg=[SGE(a.mr.buf, WRITE_LEN, a.mr.lkey)], send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_rdma(b.mr.rkey, b.mr.buf + random.randrange(0, 4096 - WRITE_LEN))
        a.qp.post_send(wr)

    def doorbell(self):
        """Rings the doorbell as librxe does (a POST_SEND command with no WRs), without librxe,
        which would follow the scribbled producer index out of its own mapping. The QP's
        handle is not exposed, so every small handle of this context is tried; only a QP's
        takes it."""
        resp = ctypes.create_string_buffer(4)
        rung = 0
        for handle in range(16):
            cmd = struct.pack("=IHHQIIII", IB_USER_VERBS_CMD_POST_SEND, POST_SEND_CMD_LEN // 4, 1,
                              ctypes.addressof(resp), handle, 0, 0, 128)
            try:
                rung += os.write(self.a.ctx.cmd_fd, cmd) == POST_SEND_CMD_LEN
            except OSError:
                pass  # not a QP's handle
        assert rung == 1, f"the doorbell reached {rung} QPs, not this one alone"

    def index(self, offset):
        return ctypes.c_uint32.from_address(self.ring[0] + offset)

    def in_error(self):
        attr, _ = self.a.qp.query(e.IBV_QP_STATE)
        return attr.qp_state == e.IBV_QPS_ERR

    def close(self):
        self.a.close()
        self.b.close()


def main():
    log_before = kernel_warnings()
    pair = Pair()
    mask = pair.ring[1]
    base = slab_kib()
    peak = base
    moves = {"back": 0, "forward": 0, "random": 0, "consumer": 0, "plain": 0}
    posted = FIRST_WR
    refused = completed = good = replaced = doorbells = 0
    end = time.monotonic() + SECONDS
    while time.monotonic() < end:
        move = random.choice(list(moves))
        moves[move] += 1
        prod, cons = pair.index(RING_PRODUCER), pair.index(RING_CONSUMER)
        if move == "plain":
            try:
                pair.write(posted)
                posted += 1
            except PyverbsError:
                refused += 1  # the provider read the indices as a full ring
        else:
            if move == "back":
                prod.value = (prod.value - random.randint(1, mask + 1)) & 0xffffffff
            elif move == "forward":
                prod.value = (prod.value + random.randint(1, 1 << 20)) & 0xffffffff
            elif move == "random":
                prod.value = random.getrandbits(32)
            else:
                cons.value = random.getrandbits(32)
            pair.doorbell()
            doorbells += 1
            # librxe does not mask what it reads: give it indices it can use.
            prod.value &= mask
            cons.value &= mask
        n, wcs = pair.a.cq.poll(64)
        completed += n
        good += sum(1 for w in wcs[:n] if w.status == e.IBV_WC_SUCCESS and w.wr_id >= FIRST_WR)
        if pair.in_error():
            pair.close()
            pair = Pair()
            replaced += 1
        peak = max(peak, slab_kib())
    pair.close()
    grew = (peak - base) / 1024
    new = kernel_warnings()[len(log_before):]
    print(f"ferroce_scribble: {sum(moves.values())} scribbles {moves}, {doorbells} doorbells "
          f"on them, {posted - FIRST_WR} posted, {refused} refused, {completed} completions "
          f"({good} successful ones of the loop's posts), {replaced} QPs replaced; "
          f"unreclaimable slab {base} kB, peak +{grew:.1f} MiB (bound {BOUND_MIB} MiB)")
    ok = True
    if grew > BOUND_MIB:
        print(f"ferroce_scribble: kernel memory grew {grew:.1f} MiB, over {BOUND_MIB} MiB")
        ok = False
    if not good:
        print("ferroce_scribble: no post of the loop completed: the QP never worked")
        ok = False
    for line in new:
        print(f"ferroce_scribble: kernel: {line}")
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

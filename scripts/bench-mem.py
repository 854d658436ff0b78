#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Kernel memory one RC QP and one MR cost on an RDMA device (make bench, in the guest).

  bench-mem.py DEV GID_INDEX COUNT

Creates COUNT RC QPs (64 send and 64 receive WRs, 1 SGE, moved to INIT), then COUNT MRs of
4 KiB each, and reads the kernel's memory counters (/proc/meminfo: Slab, VmallocUsed,
KernelStack, PageTables, Percpu) before and after each; prints one JSON line with the bytes per
QP and per MR. The MRs' own pages are user memory and not counted.
"""

import json
import sys

import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr

FIELDS = ("Slab", "VmallocUsed", "KernelStack", "PageTables", "Percpu")


def kernel_bytes():
    vals = {}
    with open("/proc/meminfo") as f:
        for line in f:
            name, rest = line.split(":", 1)
            if name in FIELDS:
                vals[name] = int(rest.split()[0]) * 1024
    return sum(vals.values())


def settle():
    # Freed slab objects and vmalloc areas are reclaimed lazily; drop caches for a fair read.
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def main():
    dev, count = sys.argv[1], int(sys.argv[3])
    ctx = Context(name=dev)
    pd = PD(ctx)
    cq = CQ(ctx, 256)
    settle()
    base = kernel_bytes()
    qps = []
    for _ in range(count):
        cap = QPCap(max_send_wr=64, max_recv_wr=64, max_send_sge=1, max_recv_sge=1)
        qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
        qp.to_init(QPAttr(port_num=1))
        qps.append(qp)
    settle()
    after_qps = kernel_bytes()
    mrs = []
    for _ in range(count):
        mrs.append(MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE))
    settle()
    after_mrs = kernel_bytes()
    print(json.dumps({
        "count": count,
        "per_qp": (after_qps - base) / count,
        "per_mr": (after_mrs - after_qps) / count,
    }))
    for mr in mrs:
        mr.close()
    for qp in qps:
        qp.close()
    cq.close()
    pd.close()
    ctx.close()


if __name__ == "__main__":
    main()

#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Kernel memory one RC QP and one MR cost on an RDMA device (make bench, in the guest).

  bench-mem.py DEV GID_INDEX QP_COUNT MR_COUNT

Measures MRs (MR_COUNT of 4 KiB each; their pages are user memory and not counted), then QPs
(QP_COUNT RC QPs, 64 send and 64 receive WRs, 1 SGE, moved to INIT), each kind on its own, three
times: the kernel's memory counters (/proc/meminfo: Slab, VmallocUsed, KernelStack, PageTables,
Percpu) before creating them, with them, and after destroying them, each read with caches
dropped and every slab cache shrunk (free objects left in partial slabs by an earlier phase
would otherwise be reused by the next, or counted against it). Prints one JSON line: the median
bytes per object (with them, less before) and its spread over the three rounds, and the median
bytes per object still held once they were destroyed ("left": slab slack and late frees; a leak
shows as a large one).
"""

import glob
import json
import os
import statistics
import sys
import time

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


SHRUNK = set()


def settled_bytes():
    """Reads the counters with caches dropped and every slab cache shrunk (the ones shrunk are
    counted in SHRUNK), after a pause for RCU's deferred frees."""
    for _ in range(2):
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        for cache in glob.glob("/sys/kernel/slab/*/shrink"):
            try:
                with open(cache, "w") as f:
                    f.write("1\n")
                SHRUNK.add(os.path.realpath(cache))
            except OSError:
                pass
        time.sleep(0.5)
    return kernel_bytes()


def measure(create, count, rounds=3):
    """Median bytes per object while `count` of them exist (over `rounds`), the spread of that
    figure, and the median per object left once they are destroyed."""
    held, left = [], []
    for _ in range(rounds):
        before = settled_bytes()
        objs = [create() for _ in range(count)]
        with_them = settled_bytes()
        for o in objs:
            o.close()
        after = settled_bytes()
        held.append((with_them - before) / count)
        left.append((after - before) / count)
    return statistics.median(held), min(held), max(held), statistics.median(left)


def main():
    dev, qp_count, mr_count = sys.argv[1], int(sys.argv[3]), int(sys.argv[4])
    ctx = Context(name=dev)
    pd = PD(ctx)
    cq = CQ(ctx, 256)

    def new_mr():
        return MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)

    def new_qp():
        cap = QPCap(max_send_wr=64, max_recv_wr=64, max_send_sge=1, max_recv_sge=1)
        qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
        qp.to_init(QPAttr(port_num=1))
        return qp

    per_mr, mr_min, mr_max, mr_left = measure(new_mr, mr_count)
    per_qp, qp_min, qp_max, qp_left = measure(new_qp, qp_count)
    print(json.dumps({
        "qps": qp_count,
        "mrs": mr_count,
        "per_qp": per_qp,
        "qp_spread": [qp_min, qp_max],
        "qp_left": qp_left,
        "per_mr": per_mr,
        "mr_spread": [mr_min, mr_max],
        "mr_left": mr_left,
        "slab_caches_shrunk": len(SHRUNK),
    }))
    cq.close()
    pd.close()
    ctx.close()


if __name__ == "__main__":
    main()

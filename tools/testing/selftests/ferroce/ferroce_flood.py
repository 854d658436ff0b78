#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""A flood at UDP 4791 stalls nothing else on the device.

  ferroce_flood.py DEV ADDR PEER_ADDR FLOOD_NS SECONDS

For SECONDS, FLOOD_NS sends valid-looking RoCEv2 packets (good ICRC) at DEV as fast as it can
(ferroce_spray.py, no rate limit): forged requests and responses at a live QP, and requests for
QPNs that do not exist. Meanwhile, round after round on DEV:
  - an RC QP sends to a peer that never answers; its retransmit timer must still fire, so the
    send completes with a retry error within TIMER_LIMIT seconds;
  - an unrelated RC QP in RTS is destroyed; that must return within DESTROY_LIMIT seconds.
Prints the rounds and what the flood sent; exits non-zero on a failed check.
"""

import os
import subprocess
import sys
import time

import pyverbs.enums as e
from pyverbs.wr import SGE, SendWR

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from ferroce_pyverbs import Endpoint, connect, counters, kernel_warnings, poll  # noqa: E402

DEV, ADDR, PEER_ADDR, FLOOD_NS = sys.argv[1:5]
SECONDS = float(sys.argv[5])
SILENT_PEER_QPN = 0xfff0  # no QP has it: nothing ever answers
ACK_TIMEOUT = 12  # 4.096 us * 2^12 = 17 ms, one retry
TIMER_LIMIT = 2.0
DESTROY_LIMIT = 2.0
NO_QPN = 0xabcdef


def timer_round():
    """Seconds until a send to a silent peer completes with a retry error; None if it never
    does."""
    ep = Endpoint(DEV, ADDR, recvs=0)
    try:
        connect(ep.qp, PEER_ADDR, ep.gid_index, SILENT_PEER_QPN, timeout=ACK_TIMEOUT)
        start = time.monotonic()
        ep.qp.post_send(SendWR(wr_id=1, opcode=e.IBV_WR_SEND, num_sge=1,
                               sg=[SGE(ep.mr.buf, 8, ep.mr.lkey)],
                               send_flags=e.IBV_SEND_SIGNALED))
        wcs = poll(ep.cq, 1, TIMER_LIMIT)
        took = time.monotonic() - start
        if [w.status for w in wcs] != [e.IBV_WC_RETRY_EXC_ERR]:
            print(f"ferroce_flood: silent peer: completions {[w.status for w in wcs]}")
            return None
        return took
    finally:
        ep.close()


def destroy_round():
    """Seconds that destroying an RC QP in RTS takes."""
    ep = Endpoint(DEV, ADDR, recvs=2)
    connect(ep.qp, PEER_ADDR, ep.gid_index, SILENT_PEER_QPN)
    start = time.monotonic()
    ep.qp.close()
    took = time.monotonic() - start
    ep.close()
    return took


def main():
    log_before = kernel_warnings()
    target = Endpoint(DEV, ADDR, recvs=4)
    connect(target.qp, PEER_ADDR, target.gid_index, SILENT_PEER_QPN)
    before = counters(DEV)
    # The flood lasts as long as this placeholder process.
    holder = subprocess.Popen(["sleep", "3600"])
    flood = subprocess.Popen(
        ["ip", "netns", "exec", FLOOD_NS, sys.executable, os.path.join(HERE, "ferroce_spray.py"),
         FLOOD_NS, str(holder.pid), "0",
         f"{ADDR},{target.qp.qp_num},{PEER_ADDR},0x100,0x100",
         f"{ADDR},{NO_QPN},{PEER_ADDR},0,0"],
        stdout=subprocess.PIPE, text=True)
    ok = True
    rounds = 0
    timers, destroys = [], []
    try:
        time.sleep(2)  # the flood is on
        end = time.monotonic() + SECONDS
        while time.monotonic() < end or rounds < 3:
            rounds += 1
            t = timer_round()
            d = destroy_round()
            timers.append(t)
            destroys.append(d)
            if t is None or d > DESTROY_LIMIT:
                ok = False
    finally:
        holder.kill()
        holder.wait()
        report, _ = flood.communicate(timeout=60)
    after = counters(DEV)
    seen = sum(after[n] - before[n] for n in after if n.startswith("rcvd_drop_"))
    fmt = lambda xs: " ".join("never" if x is None else f"{x:.2f}" for x in xs)
    print(f"ferroce_flood: {rounds} rounds in {SECONDS:.0f} s of flood; retry error after "
          f"[{fmt(timers)}] s (limit {TIMER_LIMIT}); destroy_qp took [{fmt(destroys)}] s "
          f"(limit {DESTROY_LIMIT}); {DEV} dropped {seen} packets"
          f" ({after['rcvd_drop_backlog'] - before['rcvd_drop_backlog']} for a full backlog)")
    for line in report.splitlines():
        print(f"ferroce_flood: flood sent to {line}")
    sent = {}
    for line in report.splitlines():
        kinds = dict(w.split("=") for w in line.split()[1:])
        qpn = int(kinds.pop("qpn"), 0)
        sent[qpn] = {k: int(v) for k, v in kinds.items()}
    total = sum(k["total"] for k in sent.values())
    # Forged responses from behind are old answers: ignored, not counted.
    want = total - sent.get(target.qp.qp_num, {}).get("behind_responses", 0)
    rose = {n: after[n] - before[n] for n in ("out_of_seq_request", "duplicate_request")}
    accounted = seen + sum(rose.values())
    print(f"ferroce_flood: {total} sent, {want} to be counted, {accounted} counted "
          f"(drops {seen}, {rose})")
    if total < 1000 * SECONDS / 10:
        print(f"ferroce_flood: the flood sent only {total} packets: not a flood")
        ok = False
    if accounted * 10 < want * 9:
        print("ferroce_flood: most of the flood never reached the device")
        ok = False
    if not rose["out_of_seq_request"]:
        print("ferroce_flood: the live QP saw none of the flood")
        ok = False
    for line in kernel_warnings()[len(log_before):]:
        print(f"ferroce_flood: kernel: {line}")
        ok = False
    target.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

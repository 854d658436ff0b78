#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Sprays forged RoCEv2 packets at live RC QPs while a process still runs.

  ferroce_spray.py NS PID[,PID...] RATE TARGET...
  TARGET = DST,QPN,PEER,SQ_PSN,RQ_PSN   (SQ_PSN, RQ_PSN: the QP's as `rdma res show qp` gave them)
  ferroce_spray.py qps DEV...           waits (up to 30 s) until each DEV has an RC QP in RTS;
                                        prints "QPN SQ_PSN RQ_PSN" for each, in order

From the namespace NS (IPv4, spoofed sources), until one of the PIDs exits or SIGTERM comes, at
about RATE packets a
second (0: as fast as it can), each target QP at DST gets packets that claim to come from its real PEER:
  - responses, "ahead": ACK, every NAK code, RNR NAKs and READ responses (first, middle, last,
    only) with PSNs 2^21..2^22 past SQ_PSN; nothing sent has them, each must be dropped as
    rcvd_drop_bad_psn;
  - responses, "behind": the same, 2^21..2^22 before SQ_PSN; answered long ago, ignored;
  - requests, "ahead": READ, WRITE and SEND 2^21..2^22 past RQ_PSN (out_of_seq_request);
  - requests, "behind": the same before RQ_PSN (duplicate_request), each READ naming no READ
    that is outstanding;
and, at the QP's current PSNs, responses from an address that is not the peer
(rcvd_drop_bad_address) and from the peer with a P_Key it does not have (rcvd_drop_bad_pkey).
A live transfer between the QPs must not notice. Says "spraying" on stderr when it starts, and
at the end prints, per target, how many of each went out:
"DST qpn=Q ahead_responses=N ahead_requests=N behind_requests=N stranger=N bad_pkey=N total=N".
"""

import json
import os
import random
import signal
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import roce_inject as ri  # noqa: E402

ACK = 0x1f
NAKS = [0x60, 0x61, 0x62, 0x63, 0x64]  # PSN sequence error, invalid request, remote access,
#                                         remote operational, invalid RD request
RNR_NAKS = [0x20 | t for t in (0, 1, 14, 31)]
READ_RESPONSE_FIRST, READ_RESPONSE_MIDDLE, READ_RESPONSE_LAST, READ_RESPONSE_ONLY = range(0x0d, 0x11)
STRANGER_HOST = 99  # the stranger is host .99 of the target's /24, which no one has
WRONG_PKEY = 0x7ffe
POOL = 256


def far(psn, ahead):
    """A PSN 2^21..2^22 ahead of (or behind) PSN: out of any window a test can open."""
    d = (1 << 21) + random.randrange(1 << 21)
    return (psn + (d if ahead else -d)) & 0xffffff


def response(qpn, psn):
    """One forged response: an ACK, a NAK, an RNR NAK or a READ response."""
    kind = random.randrange(4)
    if kind == 0:
        return ri.transport(ri.RC_ACKNOWLEDGE, qpn, psn, ext=ri.aeth(ACK, psn))
    if kind == 1:
        return ri.transport(ri.RC_ACKNOWLEDGE, qpn, psn, ext=ri.aeth(random.choice(NAKS), psn))
    if kind == 2:
        return ri.transport(ri.RC_ACKNOWLEDGE, qpn, psn,
                            ext=ri.aeth(random.choice(RNR_NAKS), psn))
    op = random.choice([READ_RESPONSE_FIRST, READ_RESPONSE_MIDDLE, READ_RESPONSE_LAST,
                        READ_RESPONSE_ONLY])
    ext = b"" if op == READ_RESPONSE_MIDDLE else ri.aeth(0, psn)
    return ri.transport(op, qpn, psn, ext=ext, payload=bytes([0xa5]) * 256)


def request(qpn, psn):
    """One forged request: a READ, WRITE or SEND with a random key and address."""
    va, rkey = random.getrandbits(64), random.getrandbits(32)
    kind = random.randrange(3)
    if kind == 0:
        return ri.transport(ri.RC_RDMA_READ_REQUEST, qpn, psn,
                            ext=ri.reth(va, rkey, random.randrange(1, 1 << 31)), ackreq=True)
    if kind == 1:
        return ri.transport(ri.RC_RDMA_WRITE_ONLY, qpn, psn, ext=ri.reth(va, rkey, 64),
                            payload=bytes(64), ackreq=True)
    return ri.transport(ri.RC_SEND_ONLY, qpn, psn, payload=bytes(32), ackreq=True)


def pool(sender, dst, qpn, peer, sq_psn, rq_psn):
    """(kind, packet) pairs for one target, every kind in equal measure."""
    stranger = ".".join(dst.split(".")[:3] + [str(STRANGER_HOST)])
    out = []
    for _ in range(POOL // 8):
        for ahead in (True, False):
            out.append(("ahead_responses" if ahead else "behind_responses",
                        sender.frame(response(qpn, far(sq_psn, ahead)), src=peer, dst=dst)))
            out.append(("ahead_requests" if ahead else "behind_requests",
                        sender.frame(request(qpn, far(rq_psn, ahead)), src=peer, dst=dst)))
        out.append(("stranger", sender.frame(response(qpn, sq_psn), src=stranger, dst=dst)))
        out.append(("stranger", sender.frame(request(qpn, rq_psn), src=stranger, dst=dst)))
        body = bytearray(request(qpn, rq_psn))
        body[2:4] = struct.pack("!H", WRONG_PKEY)
        out.append(("bad_pkey", sender.frame(bytes(body), src=peer, dst=dst)))
        out.append(("ahead_responses", sender.frame(response(qpn, far(sq_psn, True)),
                                                     src=peer, dst=dst)))
    return out


def rts_qps(devs):
    """{dev: (qpn, sq_psn, rq_psn)} of each DEV's first RC QP in RTS, per `rdma res show qp`."""
    out = subprocess.run(["rdma", "-j", "res", "show", "qp"], capture_output=True, text=True,
                         check=True).stdout

    def entries(x):
        if isinstance(x, dict):
            yield x
        elif isinstance(x, list):
            for y in x:
                yield from entries(y)
    found = {}
    for q in entries(json.loads(out or "[]")):
        if q.get("ifname") in devs and q.get("type") == "RC" and q.get("state") == "RTS":
            found.setdefault(q["ifname"], (q["lqpn"], q["sq-psn"], q["rq-psn"]))
    return found


def wait_qps(devs):
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = rts_qps(devs)
        if len(found) == len(devs):
            for d in devs:
                print(*found[d])
            return 0
        time.sleep(0.05)
    print(f"no RC QP in RTS on each of {devs} within 30 s", file=sys.stderr)
    return 1


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "qps":
        return wait_qps(sys.argv[2:])
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    ns, rate = sys.argv[1], int(sys.argv[3])
    pids = [int(p) for p in sys.argv[2].split(",")]
    targets = []
    for t in sys.argv[4:]:
        dst, qpn, peer, sq_psn, rq_psn = t.split(",")
        targets.append((dst, int(qpn, 0), peer, int(sq_psn, 0), int(rq_psn, 0)))
    sender = ri.Sender(targets[0][2], targets[0][0], ns=ns)
    pools = {t[:2]: pool(sender, *t) for t in targets}
    # SPRAY_KINDS="kind ...": only those (for narrowing down a failure by hand).
    only = os.environ.get("SPRAY_KINDS", "").split()
    if only:
        pools = {t: [(k, p) for k, p in ps if k in only] for t, ps in pools.items()}
    sent = {t: {} for t in pools}
    batch = 32
    i = 0
    print("spraying", file=sys.stderr, flush=True)
    while not stop and all(alive(p) for p in pids):
        start = time.monotonic()
        for (dst, qpn), pkts in pools.items():
            for kind, pkt in pkts[i % len(pkts):i % len(pkts) + batch]:
                sender.send(pkt, dst=dst)
                sent[dst, qpn][kind] = sent[dst, qpn].get(kind, 0) + 1
        i += batch
        if rate:
            time.sleep(max(0.0, batch * len(pools) / rate - (time.monotonic() - start)))
    for (dst, qpn), kinds in sent.items():
        print(dst, f"qpn={qpn:#x}", " ".join(f"{k}={v}" for k, v in sorted(kinds.items())),
              f"total={sum(kinds.values())}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

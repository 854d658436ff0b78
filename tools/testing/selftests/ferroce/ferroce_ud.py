#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""UD sends from a ferroce device, checked on the wire by a raw socket in the peer namespace.

  ferroce_ud.py capture OUT N   (in the peer namespace) write the first N RoCEv2 packets seen,
                                as hex lines, to OUT; give up after 60 s
  ferroce_ud.py send DEV DADDR  post the sends below through pyverbs and check their completions
  ferroce_ud.py check OUT SADDR DADDR  check the captured packets against what `send` posted
  ferroce_ud.py forged_source DEV ADDR ADDR6 PEER FOREIGN FOREIGN6
                                UD WQEs written into the send ring with their own address
                                vector (ah_num 0): a source that is not DEV's (FOREIGN,
                                FOREIGN6) sends nothing, to DEV itself or to PEER; DEV's own
                                (ADDR, ADDR6) reaches a QP of DEV
  ferroce_ud.py ce_marked DEV ADDR NS PEER
                                datagrams from PEER (crafted in namespace NS) to a UD QP of DEV
                                at ADDR: CE-marked ones are counted and answered with CNPs to
                                their sender's QP, one per np_min_time_between_cnps at most;
                                unmarked ones, ones with a wrong Q_Key, and any while
                                congestion control is off get none
"""

import ipaddress
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import roce_inject  # noqa: E402

REMOTE_QPN = 0x123
REMOTE_QKEY = 0x2222
QP_QKEY = 0x11111111
PAYLOAD = bytes(range(200))
INLINE = b"inline!"
IMM = 0xCAFEF00D


def capture(out, n):
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP)
    s.settimeout(60)
    got = []
    deadline = time.time() + 60
    while len(got) < n and time.time() < deadline:
        try:
            pkt = s.recv(65535)
        except socket.timeout:
            break
        ihl = (pkt[0] & 0xF) * 4
        if int.from_bytes(pkt[ihl + 2:ihl + 4], "big") == 4791:
            got.append(pkt.hex())
    with open(out, "w") as f:
        f.write("\n".join(got) + "\n")
    return 0 if len(got) >= n else 1


def ud_qp(pd, cq, cap):
    """A UD QP in RTS with Q_Key QP_QKEY."""
    import pyverbs.enums as e
    from pyverbs.qp import QP, QPAttr, QPInitAttr

    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=cq, rcq=cq, cap=cap))
    qa = QPAttr(port_num=1)
    qa.qkey = QP_QKEY
    qp.to_init(qa)
    qp.to_rtr(qa)
    qp.to_rts(qa)
    return qp


def send(dev, daddr):
    import pyverbs.enums as e
    from pyverbs.addr import AH, AHAttr, GID, GlobalRoute
    from pyverbs.cq import CQ
    from pyverbs.device import Context
    from pyverbs.mr import MR
    from pyverbs.pd import PD
    from pyverbs.qp import QPCap
    from pyverbs.wr import SGE, SendWR

    ctx = Context(name=dev)
    gid_index = None
    for i in range(ctx.query_port(1).gid_tbl_len):
        try:
            if (ctx.query_gid_type(1, i) == e.IBV_GID_TYPE_SYSFS_ROCE_V2 and
                    str(ctx.query_gid(1, i)).startswith("0000:0000:0000:0000:0000:ffff")):
                gid_index = i
                break
        except Exception:
            continue
    assert gid_index is not None, "no RoCE v2 IPv4 GID"
    pd = PD(ctx)
    cq = CQ(ctx, 16)
    mr = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE)
    mr.write(PAYLOAD, len(PAYLOAD))
    qp = ud_qp(pd, cq, QPCap(max_send_wr=8, max_recv_wr=8, max_send_sge=2, max_recv_sge=1,
                             max_inline_data=64))
    mapped = ipaddress.IPv6Address("::ffff:" + daddr).exploded
    gr = GlobalRoute(dgid=GID(mapped), sgid_index=gid_index)
    ah = AH(pd, attr=AHAttr(port_num=1, is_global=1, gr=gr))

    def post(wr_id, opcode, sg, flags, qkey=REMOTE_QKEY, imm=0):
        wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=len(sg), sg=sg, send_flags=flags)
        if imm:
            wr.imm_data = imm
        wr.set_wr_ud(ah, REMOTE_QPN, qkey)
        qp.post_send(wr)

    def completion():
        for _ in range(200):
            n, wcs = cq.poll(1)
            if n:
                return wcs[0]
            time.sleep(0.01)
        raise AssertionError("no completion")

    sig = e.IBV_SEND_SIGNALED
    # Two SGEs gathered from one MR.
    post(1, e.IBV_WR_SEND, [SGE(mr.buf, 100, mr.lkey), SGE(mr.buf + 100, 100, mr.lkey)], sig)
    wc = completion()
    assert (wc.wr_id, wc.status, wc.opcode) == (1, e.IBV_WC_SUCCESS, e.IBV_WC_SEND), wc
    # Inline data with immediate, and the QP's own Q_Key (high bit set).
    buf = MR(pd, 64, e.IBV_ACCESS_LOCAL_WRITE)
    buf.write(INLINE, len(INLINE))
    wr = SendWR(wr_id=2, opcode=e.IBV_WR_SEND_WITH_IMM, num_sge=1,
                sg=[SGE(buf.buf, len(INLINE), buf.lkey)], send_flags=sig | e.IBV_SEND_INLINE)
    wr.imm_data = IMM
    wr.set_wr_ud(ah, REMOTE_QPN, 0x80000000)
    qp.post_send(wr)
    wc = completion()
    assert (wc.wr_id, wc.status) == (2, e.IBV_WC_SUCCESS), wc
    # A forged lkey completes with a protection error and sends nothing.
    post(3, e.IBV_WR_SEND, [SGE(mr.buf, 16, mr.lkey ^ 0x100)], sig)
    wc = completion()
    assert (wc.wr_id, wc.status) == (3, e.IBV_WC_LOC_PROT_ERR), wc
    # Longer than the path MTU (1024 on a 1500-byte link).
    big = MR(pd, 8192, e.IBV_ACCESS_LOCAL_WRITE)
    post(4, e.IBV_WR_SEND, [SGE(big.buf, 4096, big.lkey)], sig)
    wc = completion()
    assert (wc.wr_id, wc.status) == (4, e.IBV_WC_LOC_LEN_ERR), wc
    # An AH of another PD may not be used (the kernel checks numbered AHs).
    pd2 = PD(ctx)
    ah2 = AH(pd2, attr=AHAttr(port_num=1, is_global=1, gr=gr))
    wr = SendWR(wr_id=5, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr.buf, 16, mr.lkey)],
                send_flags=sig)
    wr.set_wr_ud(ah2, REMOTE_QPN, REMOTE_QKEY)
    qp.post_send(wr)
    wc = completion()
    assert (wc.wr_id, wc.status) == (5, e.IBV_WC_LOC_QP_OP_ERR), wc
    print(f"qpn {qp.qp_num}", flush=True)
    for o in (qp, ah2, pd2, ah, big, buf, mr, cq, pd, ctx):
        o.close()
    return 0


def check(out, saddr, daddr, qpn):
    with open(out) as f:
        pkts = [bytes.fromhex(l) for l in f.read().split()]
    assert len(pkts) == 2, f"{len(pkts)} packets captured, want 2"
    expect = [(0x64, PAYLOAD, REMOTE_QKEY, None), (0x65, INLINE, QP_QKEY, IMM)]
    for pkt, (opcode, payload, qkey, imm) in zip(pkts, expect):
        ip, udp, rest = pkt[:20], pkt[20:28], pkt[28:]
        assert socket.inet_ntoa(ip[12:16]) == saddr and socket.inet_ntoa(ip[16:20]) == daddr
        assert ip[6] & 0x40, "DF"
        assert int.from_bytes(udp[0:2], "big") >= 0xC000, "RoCE v2 source port range"
        body, crc = rest[:-4], int.from_bytes(rest[-4:], "little")
        assert crc == roce_inject.icrc(ip, udp, body), "ICRC"
        assert body[0] == opcode, hex(body[0])
        pad = (body[1] >> 4) & 3
        assert int.from_bytes(body[5:8], "big") == REMOTE_QPN
        assert int.from_bytes(body[12:16], "big") == qkey, hex(int.from_bytes(body[12:16], "big"))
        assert int.from_bytes(body[17:20], "big") == qpn
        data = body[20:]
        if imm is not None:
            # imm_data is a __be32 that pyverbs fills from a host integer: the wire carries
            # the field's bytes as they are in memory.
            assert int.from_bytes(data[:4], sys.byteorder) == IMM, data[:4].hex()
            data = data[4:]
        assert data[:len(data) - pad] == payload, "payload"
    print("2 packets: ICRC, headers and payload as posted", flush=True)
    return 0


def forged_source(dev, addr, addr6, peer, foreign, foreign6):
    import pyverbs.enums as e
    from pyverbs.addr import AH, AHAttr, GID, GlobalRoute
    from pyverbs.cq import CQ
    from pyverbs.device import Context
    from pyverbs.mr import MR
    from pyverbs.pd import PD
    from pyverbs.qp import QPCap
    from pyverbs.wr import SGE, RecvWR, SendWR

    from ferroce_pyverbs import (WQE_FLAGS, WQE_LENGTH, WQE_NUM_SGE, WQE_OPCODE, WQE_SGES,
                                 counters, gid_index, mapped_rings, scribble)
    # struct rxe_send_wqe: wr.wr.ud and its struct rxe_av.
    ud_qpn, ud_qkey, ud_ah_num, av = 24, 28, 36, 56
    av_type, av_saddr4, av_daddr4, av_saddr6, av_daddr6 = 1, 36, 64, 40, 68

    ctx = Context(name=dev)
    pd = PD(ctx)
    cq = CQ(ctx, 64)
    mr = MR(pd, 8192, e.IBV_ACCESS_LOCAL_WRITE)
    mr.write(PAYLOAD, len(PAYLOAD))

    cap = QPCap(max_send_wr=16, max_recv_wr=16, max_send_sge=1, max_recv_sge=1)
    rx = ud_qp(pd, cq, cap)
    for i in range(8):
        rx.post_recv(RecvWR(wr_id=100 + i, num_sge=1, sg=[SGE(mr.buf + 4096 + 512 * i, 512,
                                                                mr.lkey)]))
    before = set(mapped_rings())
    tx = ud_qp(pd, cq, cap)
    rings = [(b, m, z) for b, (m, z) in mapped_rings().items() if b not in before and z >= 256]
    assert len(rings) == 1, "one new send ring"
    # The doorbell: a good send through a numbered AH to a QPN nobody has.
    gr = GlobalRoute(dgid=GID(ipaddress.IPv6Address("::ffff:" + peer).exploded),
                     sgid_index=gid_index(ctx, addr))
    ah = AH(pd, attr=AHAttr(port_num=1, is_global=1, gr=gr))

    def sent_with_av(wr_id, src, dst):
        """Writes a UD SEND to rx with an address vector from SRC to DST, rings the doorbell;
        returns (packets that went out for it, whether rx received it)."""
        ip = ipaddress.ip_address(src)
        fields = {WQE_OPCODE: ("I", e.IBV_WR_SEND), WQE_FLAGS: ("I", e.IBV_SEND_SIGNALED),
                  WQE_NUM_SGE: ("I", 1), WQE_LENGTH: ("I", 16), ud_qpn: ("I", rx.qp_num),
                  ud_qkey: ("I", QP_QKEY), ud_ah_num: ("I", 0),
                  av + av_type: ("B", 1 if ip.version == 4 else 2)}
        if ip.version == 4:
            fields[av + av_saddr4] = ("4s", ip.packed)
            fields[av + av_daddr4] = ("4s", ipaddress.ip_address(dst).packed)
        else:
            fields[av + av_saddr6] = ("16s", ip.packed)
            fields[av + av_daddr6] = ("16s", ipaddress.ip_address(dst).packed)
        sent = counters(dev)["sent_pkts"]
        scribble(rings[0], wr_id, fields, [(mr.buf, 16, mr.lkey)], WQE_SGES)
        bell = SendWR(wr_id=wr_id + 1, opcode=e.IBV_WR_SEND, num_sge=1,
                      sg=[SGE(mr.buf, 16, mr.lkey)], send_flags=e.IBV_SEND_SIGNALED)
        bell.set_wr_ud(ah, REMOTE_QPN, REMOTE_QKEY)
        tx.post_send(bell)
        got = []
        deadline = time.time() + 3
        while time.time() < deadline and len([w for w in got if w.wr_id < 100]) < 2:
            n, wcs = cq.poll(4)
            got += wcs[:n]
            time.sleep(0.02)
        time.sleep(0.3)
        n, wcs = cq.poll(4)
        got += wcs[:n]
        mine = sorted((w.wr_id, w.status) for w in got if w.wr_id < 100)
        assert mine == [(wr_id, e.IBV_WC_SUCCESS), (wr_id + 1, e.IBV_WC_SUCCESS)], mine
        # The doorbell's packet is one; the rest went out for the forged WQE.
        return counters(dev)["sent_pkts"] - sent - 1, any(w.wr_id >= 100 for w in got)

    cases = [("own address to itself", addr, addr, 1, True),
             ("own IPv6 address to itself", addr6, addr6, 1, True),
             ("foreign source to the device itself", foreign, addr, 0, False),
             ("foreign source to itself (loopback)", foreign, foreign, 0, False),
             ("foreign source to the peer", foreign, peer, 0, False),
             ("foreign IPv6 source to the device itself", foreign6, addr6, 0, False),
             ("foreign IPv6 source to itself (loopback)", foreign6, foreign6, 0, False)]
    ok = True
    for i, (name, src, dst, want_sent, want_recv) in enumerate(cases):
        sent, received = sent_with_av(10 * i + 1, src, dst)
        good = (sent, received) == (want_sent, want_recv)
        ok &= good
        print(f"{'ok' if good else 'WRONG'}: {name} ({src} -> {dst}): {sent} sent, "
              f"{'received' if received else 'not received'}", flush=True)
    for o in (tx, rx, ah, mr, cq, pd, ctx):
        o.close()
    return 0 if ok else 1


# The ECN field of an IP header: CE, and ECT(0).
CE, ECT0 = 3, 2
# The QPN the crafted datagrams name as their source (their DETH).
INJECTED_SRC_QPN = 0x5a5a5


def cc_file(dev, name):
    return f"/sys/kernel/debug/ferroce/{dev}/{name}"


def set_cc(dev, name, value):
    """Sets DEV's congestion-control setting NAME to VALUE; returns what it was."""
    with open(cc_file(dev, name)) as f:
        was = f.read().strip()
    with open(cc_file(dev, name), "w") as f:
        f.write(f"{value}\n")
    return was


def ce_marked(dev, addr, ns, peer):
    import pyverbs.enums as e
    from pyverbs.cq import CQ
    from pyverbs.device import Context
    from pyverbs.mr import MR
    from pyverbs.pd import PD
    from pyverbs.qp import QPCap
    from pyverbs.wr import SGE, RecvWR

    from ferroce_pyverbs import counters

    if not os.path.ismount("/sys/kernel/debug"):
        subprocess.run(["mount", "-t", "debugfs", "none", "/sys/kernel/debug"], check=True)
    ctx = Context(name=dev)
    pd = PD(ctx)
    cq = CQ(ctx, 256)
    mr = MR(pd, 128 * 512, e.IBV_ACCESS_LOCAL_WRITE)
    qp = ud_qp(pd, cq, QPCap(max_send_wr=1, max_recv_wr=128, max_send_sge=1, max_recv_sge=1))
    for i in range(128):
        qp.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(mr.buf + 512 * i, 512, mr.lkey)]))
    tx = roce_inject.Sender(peer, addr, ns=ns, qpn=qp.qp_num, qkey=QP_QKEY,
                            src_qpn=INJECTED_SRC_QPN)

    def received():
        n = 0
        while True:
            got, wcs = cq.poll(16)
            for wc in wcs[:got]:
                assert wc.status == e.IBV_WC_SUCCESS, wc
            n += got
            if got == 0:
                return n

    def run(name, n, tos, qkey=QP_QKEY, burst=False, payload=None, want_recv=None,
            want_marked=0, want_cnps=0, want_bad_qkey=0):
        """Sends N good_ud datagrams with TOS, 20 ms apart or in one burst; checks what DEV
        received, counted and sent back."""
        before = counters(dev)
        pkt = tx.packet("good_ud", tos=tos, qkey=qkey, payload=payload)
        with roce_inject.Capture(ns, addr) as cap:
            if burst:
                tx.send_burst([pkt] * n)
            else:
                for _ in range(n):
                    tx.send(pkt)
                    time.sleep(0.02)
            frames = cap.frames(lambda f: len(f) > want_cnps, 1.5)
        after = counters(dev)
        recv = received()
        marked = after["np_ecn_marked_roce_packets"] - before["np_ecn_marked_roce_packets"]
        sent = after["np_cnp_sent"] - before["np_cnp_sent"]
        good = True
        for f in frames:
            # The IP packet only, whatever padding its frame had.
            f = f[:int.from_bytes(f[2:4], "big")]
            ihl = (f[0] & 0xf) * 4
            ip, udp, body = f[:ihl], f[ihl:ihl + 8], f[ihl + 8:-4]
            icrc = int.from_bytes(f[-4:], "little")
            fields = (body[0], bool(body[4] & 0x40), int.from_bytes(body[5:8], "big"),
                      ip[1] >> 2, ip[1] & 3, socket.inet_ntoa(ip[16:20]), len(body),
                      icrc == roce_inject.icrc(ip, udp, body))
            # A CNP: opcode 0x81, BECN, to the sender's QP, DSCP 48, not ECN-capable, back to
            # the sender's address, 16 reserved bytes after the BTH, a valid ICRC.
            if fields != (0x81, True, INJECTED_SRC_QPN, 48, 0, peer, 12 + 16, True):
                print(f"# {name}: not the CNP expected: {fields}", flush=True)
                good = False
        want_recv = n if want_recv is None else want_recv
        bad_qkey = after["rcvd_drop_bad_qkey"] - before["rcvd_drop_bad_qkey"]
        good &= (recv, marked, sent, len(frames), bad_qkey) == (
            want_recv, want_marked, want_cnps, want_cnps, want_bad_qkey)
        print(f"{'ok' if good else 'WRONG'}: {name}: {n} sent, {recv} received "
              f"(want {want_recv}), {marked} counted marked (want {want_marked}), "
              f"{sent} CNPs sent and {len(frames)} seen (want {want_cnps}), "
              f"{bad_qkey} dropped for their Q_Key (want {want_bad_qkey})", flush=True)
        return good

    ok = run("ECT(0), not marked", 10, ECT0)
    ok &= run("CE-marked, 20 ms apart", 10, CE, want_marked=10, want_cnps=10)
    ok &= run("CE-marked, wrong Q_Key", 10, CE, qkey=QP_QKEY ^ 1, want_recv=0,
              want_bad_qkey=10)
    # A datagram shorter than the CNP would be (payload under 8 bytes) gets none.
    ok &= run("CE-marked, 4 bytes of payload", 5, CE, payload=4, want_marked=5)
    # One CNP per gap: 20 marked datagrams within far less than 131 ms.
    was = set_cc(dev, "cc_params/np_min_time_between_cnps", 131071)
    try:
        ok &= run("CE-marked burst, 131 ms gap", 20, CE, burst=True, want_marked=20,
                  want_cnps=1)
    finally:
        set_cc(dev, "cc_params/np_min_time_between_cnps", was)
    time.sleep(0.2)
    was = set_cc(dev, "cc_enable", 0)
    try:
        ok &= run("CE-marked, congestion control off", 5, CE, want_marked=5)
    finally:
        set_cc(dev, "cc_enable", was)
    tx.close()
    for o in (qp, mr, cq, pd, ctx):
        o.close()
    return 0 if ok else 1


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "capture":
        sys.exit(capture(sys.argv[2], int(sys.argv[3])))
    if cmd == "send":
        sys.exit(send(sys.argv[2], sys.argv[3]))
    if cmd == "check":
        sys.exit(check(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])))
    if cmd == "forged_source":
        sys.exit(forged_source(*sys.argv[2:8]))
    if cmd == "ce_marked":
        sys.exit(ce_marked(*sys.argv[2:6]))
    sys.exit(f"unknown command {cmd}")

#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""UD sends from a ferroce device, checked on the wire by a raw socket in the peer namespace.

  ferroce_ud.py capture OUT N   (in the peer namespace) write the first N RoCEv2 packets seen,
                                as hex lines, to OUT; give up after 60 s
  ferroce_ud.py send DEV DADDR  post the sends below through pyverbs and check their completions
  ferroce_ud.py check OUT SADDR DADDR  check the captured packets against what `send` posted
"""

import ipaddress
import os
import socket
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


def send(dev, daddr):
    import pyverbs.enums as e
    from pyverbs.addr import AH, AHAttr, GID, GlobalRoute
    from pyverbs.cq import CQ
    from pyverbs.device import Context
    from pyverbs.mr import MR
    from pyverbs.pd import PD
    from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
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
    cap = QPCap(max_send_wr=8, max_recv_wr=8, max_send_sge=2, max_recv_sge=1, max_inline_data=64)
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=cq, rcq=cq, cap=cap))
    qa = QPAttr(port_num=1)
    qa.qkey = QP_QKEY
    qp.to_init(qa)
    qp.to_rtr(qa)
    qp.to_rts(qa)
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


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "capture":
        sys.exit(capture(sys.argv[2], int(sys.argv[3])))
    if cmd == "send":
        sys.exit(send(sys.argv[2], sys.argv[3]))
    if cmd == "check":
        sys.exit(check(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])))
    sys.exit(f"unknown command {cmd}")

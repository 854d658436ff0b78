#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Send crafted RoCEv2 packets (UDP port 4791) from a raw socket.

Selftests use it to check how a receiver handles well-formed and malformed packets:

    roce_inject.py --src 10.0.0.2 --dst 10.0.0.1 [--qpn Q] [--psn P] CASE

The rc_* cases are requests for a live RC QP (--qpn, --psn): an RDMA WRITE of --length bytes
at --va under --rkey (--payload bytes of 0xa5 follow, default --length; rc_write_first and
rc_write_last are the first and last packets of a longer one), an RDMA READ of
--length bytes, and a SEND of --payload bytes; rc_ack is an ACK, NAK or RNR NAK with the AETH
syndrome --syndrome (default 0x1f, an ACK). --pkey sets every packet's P_Key.

With --print, each packet is written to stdout as "CASE HEX" (the whole IP packet) instead of
being sent, which needs no privileges.

With --splice (IPv6 only), each packet leaves through a UDP socket, its UDP payload spliced
(sendfile) from a file: the kernel attaches the file's page-cache pages to the skb as fragments
that others may change (SKBFL_SHARED_FRAG), as for any spliced datagram.
"""

import argparse
import ctypes
import ipaddress
import os
import socket
import struct
import sys
import tempfile
import time
import zlib

ROCE_PORT = 4791
IP_ID = 0x1234
TTL = 64
CLONE_NEWNET = 0x40000000
BTH_LEN = 12
IPV4_HDR_LEN = 20
IPV6_HDR_LEN = 40

RC_SEND_ONLY = 0x04
RC_SEND_ONLY_IMM = 0x05
RC_RDMA_WRITE_FIRST = 0x06
RC_RDMA_WRITE_LAST = 0x08
RC_RDMA_WRITE_ONLY = 0x0a
RC_RDMA_READ_REQUEST = 0x0c
RC_RDMA_READ_RESPONSE_FIRST = 0x0d
RC_RDMA_READ_RESPONSE_ONLY = 0x10
RC_ACKNOWLEDGE = 0x11
RC_COMPARE_SWAP = 0x13
RC_FETCH_ADD = 0x14
RC_SEND_ONLY_INV = 0x17
RC_FLUSH = 0x1c
RC_ATOMIC_WRITE = 0x1d
UC_SEND_FIRST = 0x20
UC_SEND_MIDDLE = 0x21
UC_SEND_LAST = 0x22
UC_SEND_ONLY = 0x24
UC_RDMA_WRITE_ONLY = 0x2a
UD_SEND_ONLY = 0x64
CNP = 0x81
UNKNOWN_OPCODE = 0x1f

# setns() and sendmmsg(), which Python's os and socket modules lack (3.11).
LIBC = ctypes.CDLL(None, use_errno=True)

BAD_QPN = 0xabcdef
PAYLOAD = bytes(range(16))


def bth(opcode, qpn, psn, pad=0, tver=0, se=False, ackreq=False, becn=False, pkey=0xffff):
    """Base transport header, 12 bytes."""
    byte1 = se << 7 | (pad & 3) << 4 | (tver & 0xf)
    return struct.pack("!BBHII", opcode, byte1, pkey,
                       becn << 30 | (qpn & 0xffffff), ackreq << 31 | (psn & 0xffffff))


def reth(va, rkey, length):
    """RDMA extended transport header, 16 bytes."""
    return struct.pack("!QII", va, rkey, length)


def atomic_eth(va, rkey, swap_add, compare):
    """Atomic extended transport header, 28 bytes."""
    return struct.pack("!QIQQ", va, rkey, swap_add, compare)


def deth(qkey, src_qpn):
    """Datagram extended transport header, 8 bytes."""
    return struct.pack("!II", qkey, src_qpn & 0xffffff)


def aeth(syndrome, msn):
    """ACK extended transport header, 4 bytes."""
    return struct.pack("!I", syndrome << 24 | (msn & 0xffffff))


def transport(opcode, qpn, psn, ext=b"", payload=b"", pad=None, **kw):
    """BTH, extension headers, payload and pad bytes; pad=N sets the BTH count but adds no bytes."""
    pad_bytes = b""
    if pad is None:
        pad = -len(payload) % 4
        pad_bytes = bytes(pad)
    return bth(opcode, qpn, psn, pad=pad, **kw) + ext + payload + pad_bytes


def inet_checksum(data):
    """RFC 1071 ones' complement sum."""
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff


def ip_header(src, dst, udp_len, tos):
    """IPv4 header (fixed ID, DF, TTL 64, checksum) or the IPv6 header the kernel will build."""
    if src.version == 4:
        hdr = struct.pack("!BBHHHBBH4s4s", 0x45, tos, IPV4_HDR_LEN + udp_len, IP_ID, 0x4000,
                          TTL, socket.IPPROTO_UDP, 0, src.packed, dst.packed)
        return hdr[:10] + struct.pack("!H", inet_checksum(hdr)) + hdr[12:]
    return struct.pack("!IHBB16s16s", 6 << 28 | tos << 20, udp_len, socket.IPPROTO_UDP, TTL,
                       src.packed, dst.packed)


def icrc(ip, udp, rest):
    """RoCEv2 invariant CRC over IP, UDP, BTH (variant fields masked) and what follows the BTH."""
    ip = bytearray(ip)
    if len(ip) == IPV4_HDR_LEN:
        ip[1] = ip[8] = ip[10] = ip[11] = 0xff  # TOS, TTL, header checksum
    else:
        ip[0] |= 0x0f  # traffic class and flow label, then hop limit
        ip[1:4] = b"\xff\xff\xff"
        ip[7] = 0xff
    masked = bytes(8 * [0xff]) + ip + udp[:6] + b"\xff\xff" + rest[:4] + b"\xff" + rest[5:]
    return zlib.crc32(masked) & 0xffffffff


def frame(args, body, with_icrc=True, flip=False):
    """Full IP packet around a transport body; appends the ICRC (one bit flipped if flip)."""
    src, dst = ipaddress.ip_address(args.src), ipaddress.ip_address(args.dst)
    udp_len = 8 + len(body) + (4 if with_icrc else 0)
    ip = ip_header(src, dst, udp_len, args.tos)
    udp = struct.pack("!HHHH", args.sport, ROCE_PORT, udp_len, 0)
    if with_icrc:
        crc = icrc(ip, udp, body) ^ (1 if flip else 0)
        body += struct.pack("<I", crc)
    if src.version == 6:
        pseudo = src.packed + dst.packed + struct.pack("!IxxxB", udp_len, socket.IPPROTO_UDP)
        csum = inet_checksum(pseudo + udp + body) or 0xffff
        udp = udp[:6] + struct.pack("!H", csum)
    return ip + udp + body


def build(case, args):
    """The packet for one CASE."""
    q, p = args.qpn, args.psn

    def good(qpn=q, psn=p, **kw):
        return transport(RC_SEND_ONLY, qpn, psn, payload=PAYLOAD, ackreq=True, pkey=args.pkey,
                         **kw)

    def transport(*a, **kw):
        kw.setdefault("pkey", args.pkey)
        return globals()["transport"](*a, **kw)

    if case == "good":
        return frame(args, good())
    if case == "good_ud":
        data = PAYLOAD if args.payload is None else PAYLOAD[:args.payload]
        return frame(args, transport(UD_SEND_ONLY, q, p, ext=deth(args.qkey, args.src_qpn),
                                     payload=data))
    if case == "bad_icrc":
        return frame(args, good(), flip=True)
    if case == "truncated":
        return frame(args, good()[:8], with_icrc=False)
    if case == "short_icrc":
        return frame(args, good()[:BTH_LEN + 2], with_icrc=False)
    if case == "unknown_opcode":
        return frame(args, transport(UNKNOWN_OPCODE, q, p, payload=PAYLOAD, ackreq=True))
    if case == "bad_version":
        return frame(args, good(tver=1))
    if case == "bad_qpn":
        return frame(args, good(qpn=BAD_QPN))
    if case == "bad_pad":
        return frame(args, transport(RC_SEND_ONLY, q, p, payload=PAYLOAD[:2], pad=3))
    if case == "bad_length":
        return frame(args, transport(RC_RDMA_READ_REQUEST, q, p, ext=reth(0x1000, 0x1234, 64),
                                     payload=PAYLOAD[:8], ackreq=True))
    if case == "ack_unsolicited":
        return frame(args, transport(RC_ACKNOWLEDGE, q, p, ext=aeth(0x1f, 0)))
    if case == "cnp":
        return frame(args, transport(CNP, q, 0, ext=bytes(16), becn=True))
    if case == "psn_far":
        return frame(args, good(psn=(p + 0x800000) & 0xffffff))
    filler = b"\xa5" * (args.length if args.payload is None else args.payload)
    if case == "rc_write":
        return frame(args, transport(RC_RDMA_WRITE_ONLY, q, p,
                                     ext=reth(args.va, args.rkey, args.length),
                                     payload=filler, ackreq=True))
    if case == "rc_write_first":
        return frame(args, transport(RC_RDMA_WRITE_FIRST, q, p,
                                     ext=reth(args.va, args.rkey, args.length), payload=filler))
    if case == "rc_write_last":
        return frame(args, transport(RC_RDMA_WRITE_LAST, q, p, payload=filler, ackreq=True))
    if case == "rc_read":
        return frame(args, transport(RC_RDMA_READ_REQUEST, q, p,
                                     ext=reth(args.va, args.rkey, args.length), ackreq=True))
    if case == "rc_send":
        return frame(args, transport(RC_SEND_ONLY, q, p, payload=filler, ackreq=True))
    if case == "rc_ack":
        return frame(args, transport(RC_ACKNOWLEDGE, q, p, ext=aeth(args.syndrome, 0)))
    if case == "rc_fetch_add":
        return frame(args, transport(RC_FETCH_ADD, q, p,
                                     ext=atomic_eth(args.va, args.rkey, args.add, 0), ackreq=True))
    if case == "rc_cmp_swap":
        return frame(args, transport(RC_COMPARE_SWAP, q, p,
                                     ext=atomic_eth(args.va, args.rkey, args.swap, args.compare),
                                     ackreq=True))
    if case == "rc_send_inv":
        return frame(args, transport(RC_SEND_ONLY_INV, q, p, ext=struct.pack("!I", args.rkey),
                                     payload=filler, ackreq=True))
    if case == "rc_atomic_write":
        return frame(args, transport(RC_ATOMIC_WRITE, q, p,
                                     ext=reth(args.va, args.rkey, args.length),
                                     payload=filler, ackreq=True))
    if case == "rc_flush":
        # FETH (placement type in bits 3-0, selectivity level in 5-4), then RETH; no payload.
        feth = struct.pack("!I", (args.placement & 0xf) | ((args.level & 0x3) << 4))
        return frame(args, transport(RC_FLUSH, q, p, ext=feth + reth(args.va, args.rkey,
                                                                     args.length),
                                     payload=b"\xa5" * (args.payload or 0), ackreq=True))
    if case == "rc_read_response":
        return frame(args, transport(RC_RDMA_READ_RESPONSE_ONLY, q, p, ext=aeth(0x1f, 0),
                                     payload=filler))
    if case in UC_SENDS:
        return frame(args, transport(UC_SENDS[case], q, p, payload=filler))
    if case == "uc_write":
        return frame(args, transport(UC_RDMA_WRITE_ONLY, q, p,
                                     ext=reth(args.va, args.rkey, args.length), payload=filler))
    raise ValueError(case)


CASES = ["good", "good_ud", "bad_icrc", "truncated", "short_icrc", "unknown_opcode",
         "bad_version", "bad_qpn", "bad_pad", "bad_length", "ack_unsolicited", "cnp", "psn_far"]
# Requests for a live RC QP; not part of "all".
RC_CASES = ["rc_write", "rc_write_first", "rc_write_last", "rc_read", "rc_send", "rc_ack",
            "rc_read_response", "rc_fetch_add", "rc_cmp_swap", "rc_atomic_write",
            "rc_send_inv", "rc_flush"]
# SEND packets for a live UC QP, by position in their message; not part of "all".
UC_SENDS = {"uc_send_first": UC_SEND_FIRST, "uc_send_middle": UC_SEND_MIDDLE,
            "uc_send_last": UC_SEND_LAST, "uc_send_only": UC_SEND_ONLY}
UC_CASES = list(UC_SENDS) + ["uc_write"]


def open_socket(args):
    """Raw socket: IPv4 with our own IP header, or IPv6 UDP with the kernel's IPv6 header."""
    try:
        if ipaddress.ip_address(args.src).version == 4:
            return socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_UDP)
    except PermissionError:
        sys.exit("roce_inject: need CAP_NET_RAW (run as root)")
    return ipv6_source(s, args, 0)


def ipv6_source(s, args, port):
    """IPv6 socket S with the traffic class and hop limit of the packets built for ARGS, bound
    to their source address (the ICRC covers it: it must be this one) and PORT."""
    try:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_TCLASS, args.tos)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_UNICAST_HOPS, TTL)
        s.bind((args.src, port))
    except OSError as e:
        sys.exit(f"roce_inject: cannot use source {args.src}: {e.strerror}")
    return s


def in_netns(ns, fn):
    """fn(), called with this thread in the network namespace NS (`ip netns` name); a socket
    it opens stays in NS."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        target = os.open(f"/run/netns/{ns}", os.O_RDONLY)
        try:
            if LIBC.setns(target, CLONE_NEWNET):
                raise OSError(ctypes.get_errno(), f"setns {ns}")
            try:
                return fn()
            finally:
                if LIBC.setns(own, CLONE_NEWNET):
                    raise OSError(ctypes.get_errno(), "setns back")
        finally:
            os.close(target)
    finally:
        os.close(own)


class Sender:
    """Crafted packets from SRC to DST out of a raw socket opened once, in namespace NS if
    given: for scripts that send many, without a process per packet. `fields` are
    defaults for the command-line options (qpn, psn, rkey, ...)."""

    def __init__(self, src, dst, ns=None, **fields):
        self.defaults = fields
        self.args = self.with_fields(src=src, dst=dst)
        self.v4 = ipaddress.ip_address(src).version == 4
        self.sock = in_netns(ns, lambda: open_socket(self.args)) if ns else open_socket(self.args)

    def with_fields(self, **fields):
        """The options a packet is built from: the defaults, then FIELDS. (Parsed once: an
        argument parser per packet is slow.)"""
        base = getattr(self, "args", None)
        if base is None:
            base = parse_args(["--src", fields.pop("src"), "--dst", fields.pop("dst"), "good"])
            fields = {**self.defaults, **fields}
        args = argparse.Namespace(**vars(base))
        for k, v in fields.items():
            setattr(args, k, v)
        return args

    def packet(self, case, **fields):
        """The IP packet for CASE, with FIELDS over the defaults."""
        return build(case, self.with_fields(**fields))

    def frame(self, body, **fields):
        """The IP packet around a transport body of the caller's making."""
        return frame(self.with_fields(**fields), body)

    def send(self, pkt, count=1, dst=None):
        """Sends PKT COUNT times, to DST (default: the sender's destination)."""
        data = pkt if self.v4 else pkt[IPV6_HDR_LEN:]
        for _ in range(count):
            self.sock.sendto(data, (dst or self.args.dst, 0))

    def send_burst(self, pkts):
        """Sends IPv4 PKTS in one sendmmsg() call, microseconds apart: the receiver has them
        all queued before it takes the first (one sendto() each lets it finish the first)."""
        assert self.v4, "send_burst is IPv4 only"
        addr = struct.pack("=H", socket.AF_INET) + struct.pack("!H", 0) \
            + socket.inet_aton(self.args.dst) + bytes(8)
        name = ctypes.create_string_buffer(addr, len(addr))
        bufs = [ctypes.create_string_buffer(p, len(p)) for p in pkts]
        iovs = (_Iovec * len(pkts))(*[_Iovec(ctypes.addressof(b), len(p))
                                      for b, p in zip(bufs, pkts)])
        msgs = (_Mmsghdr * len(pkts))()
        for i in range(len(pkts)):
            msgs[i].hdr.name = ctypes.addressof(name)
            msgs[i].hdr.namelen = len(addr)
            msgs[i].hdr.iov = ctypes.pointer(iovs[i])
            msgs[i].hdr.iovlen = 1
        n = LIBC.sendmmsg(self.sock.fileno(), msgs, len(pkts), 0)
        if n != len(pkts):
            raise OSError(ctypes.get_errno(), f"sendmmsg sent {n} of {len(pkts)}")

    def close(self):
        self.sock.close()


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


class _Msghdr(ctypes.Structure):
    _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint32),
                ("iov", ctypes.POINTER(_Iovec)), ("iovlen", ctypes.c_size_t),
                ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
                ("flags", ctypes.c_int)]


class _Mmsghdr(ctypes.Structure):
    _fields_ = [("hdr", _Msghdr), ("len", ctypes.c_uint)]


class Capture:
    """RoCEv2 packets from SRC (IPv4) as they arrive in namespace NS: an AF_PACKET socket sees
    them ahead of the UDP stack, whoever holds port 4791 there."""

    SO_RCVBUFFORCE = 33
    PACKET_OUTGOING = 4

    def __init__(self, ns, src):
        self.src = socket.inet_aton(src)

        def open_():
            s = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(0x0800))
            # Room for a burst of a few thousand MTU-sized packets while Python catches up.
            s.setsockopt(socket.SOL_SOCKET, self.SO_RCVBUFFORCE, 64 << 20)
            return s
        self.sock = in_netns(ns, open_)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.sock.close()

    def frames(self, done, seconds):
        """Each RoCEv2 packet from SRC, its IP header first, in arrival order, until
        done(list so far) or SECONDS pass."""
        got = []
        self.sock.settimeout(0.2)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not done(got):
            try:
                data, addr = self.sock.recvfrom(65536)
            except socket.timeout:
                continue
            if addr[2] == self.PACKET_OUTGOING or len(data) < IPV4_HDR_LEN:
                continue
            ihl = (data[0] & 0xf) * 4
            udp = data[ihl:ihl + 8]
            if data[9] != 17 or data[12:16] != self.src or len(udp) < 8 \
                    or struct.unpack("!H", udp[2:4])[0] != ROCE_PORT \
                    or len(data) < ihl + 8 + BTH_LEN:
                continue
            got.append(data)
        return got

    def packets(self, done, seconds):
        """(opcode, psn, AETH syndrome or None) of each packet in arrival order, until
        done(list so far) or SECONDS pass."""
        def summary(data):
            b = data[(data[0] & 0xf) * 4 + 8:]
            psn = struct.unpack("!I", b[8:12])[0] & 0xffffff
            syndrome = b[BTH_LEN] if b[0] == RC_ACKNOWLEDGE and len(b) > BTH_LEN else None
            return (b[0], psn, syndrome)

        got = []

        def seen(frames):
            got.extend(summary(f) for f in frames[len(got):])
            return done(got)
        seen(self.frames(seen, seconds))
        return got


def int_arg(s):
    """Integer in any base (0x.. accepted)."""
    return int(s, 0)


def parse_args(argv):
    """Command line; also checks addresses and field ranges."""
    ap = argparse.ArgumentParser(description="Send crafted RoCEv2 packets from a raw socket.")
    ap.add_argument("--src", required=True, help="source IP address (IPv4 or IPv6)")
    ap.add_argument("--dst", required=True, help="destination IP address")
    ap.add_argument("--count", type=int_arg, default=1, help="times each packet is sent")
    ap.add_argument("--qpn", type=int_arg, default=0x11, help="destination QPN (default 0x11)")
    ap.add_argument("--psn", type=int_arg, default=0, help="PSN (default 0)")
    ap.add_argument("--tos", type=int_arg, default=0, help="IPv4 TOS / IPv6 traffic class")
    ap.add_argument("--sport", type=int_arg, default=0xc001, help="UDP source port")
    ap.add_argument("--qkey", type=int_arg, default=0, help="Q_Key of good_ud (default 0)")
    ap.add_argument("--src-qpn", type=int_arg, default=0x11,
                    help="source QPN in good_ud's DETH (default 0x11)")
    ap.add_argument("--rkey", type=int_arg, default=0, help="R_Key of the rc_* cases")
    ap.add_argument("--va", type=int_arg, default=0, help="remote address of the rc_* cases")
    ap.add_argument("--length", type=int_arg, default=16, help="RETH length (default 16)")
    ap.add_argument("--add", type=int_arg, default=1, help="what rc_fetch_add adds (default 1)")
    ap.add_argument("--compare", type=int_arg, default=0, help="what rc_cmp_swap compares with")
    ap.add_argument("--swap", type=int_arg, default=1, help="what rc_cmp_swap swaps in")
    ap.add_argument("--payload", type=int_arg, default=None,
                    help="payload bytes of rc_write/rc_send/rc_atomic_write/uc_* "
                    "(default --length), and of good_ud (at most 16, the default)")
    ap.add_argument("--syndrome", type=int_arg, default=0x1f,
                    help="AETH syndrome of rc_ack (default 0x1f, an ACK)")
    ap.add_argument("--placement", type=int_arg, default=1,
                    help="FETH placement type of rc_flush (default 1, global)")
    ap.add_argument("--level", type=int_arg, default=0,
                    help="FETH selectivity level of rc_flush (default 0, a range)")
    ap.add_argument("--pkey", type=int_arg, default=0xffff, help="P_Key (default 0xffff)")
    ap.add_argument("--print", action="store_true", help="print packets as hex, do not send")
    ap.add_argument("--splice", action="store_true",
                    help="send from a UDP socket, the payload spliced from a file (IPv6 only)")
    ap.add_argument("case", choices=CASES + RC_CASES + UC_CASES + ["all"])
    args = ap.parse_args(argv)
    try:
        src, dst = ipaddress.ip_address(args.src), ipaddress.ip_address(args.dst)
    except ValueError as e:
        ap.error(str(e))
    if src.version != dst.version:
        ap.error("--src and --dst must both be IPv4 or both IPv6")
    # IPv4's ICRC covers the IP ID, which a UDP socket's kernel chooses.
    if args.splice and src.version != 6:
        ap.error("--splice needs IPv6 addresses")
    for name, lim in (("qpn", 1 << 24), ("psn", 1 << 24), ("tos", 1 << 8),
                      ("sport", 1 << 16), ("qkey", 1 << 32), ("count", 1 << 31),
                      ("rkey", 1 << 32), ("va", 1 << 64), ("length", 1 << 32),
                      ("payload", 9000), ("syndrome", 1 << 8), ("pkey", 1 << 16),
                      ("placement", 1 << 4), ("level", 1 << 2)):
        if getattr(args, name) is not None and not 0 <= getattr(args, name) < lim:
            ap.error(f"--{name} out of range")
    return args


def send_spliced(args, packets):
    """Sends each IPv6 packet's UDP payload from a UDP socket bound to the source address and
    port the ICRC covers, by sendfile() from a file that holds it: one datagram per call."""
    with ipv6_source(socket.socket(socket.AF_INET6, socket.SOCK_DGRAM), args, args.sport) as s:
        s.connect((args.dst, ROCE_PORT))
        for c, pkt in packets:
            payload = pkt[IPV6_HDR_LEN + 8:]
            with tempfile.TemporaryFile() as f:
                f.write(payload)
                f.flush()
                for _ in range(args.count):
                    if os.sendfile(s.fileno(), f.fileno(), 0, len(payload)) != len(payload):
                        sys.exit(f"roce_inject: {c}: sendfile sent part of the datagram")
    return 0


def main(argv=None):
    """Build, then print or send, each requested case."""
    args = parse_args(argv)
    cases = CASES if args.case == "all" else [args.case]
    packets = [(c, build(c, args)) for c in cases]
    if args.print:
        for c, pkt in packets:
            print(c, pkt.hex())
        return 0
    if args.splice:
        return send_spliced(args, packets)
    sock = open_socket(args)
    v4 = ipaddress.ip_address(args.src).version == 4
    with sock:
        for c, pkt in packets:
            data = pkt if v4 else pkt[IPV6_HDR_LEN:]
            try:
                for _ in range(args.count):
                    sock.sendto(data, (args.dst, 0))
            except OSError as e:
                sys.exit(f"roce_inject: {c}: sendto {args.dst}: {e.strerror}")
            if args.case == "all":
                print(c, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

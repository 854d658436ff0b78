#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Host unit tests of roce_inject.py: packet layout and ICRC, no root needed."""

import contextlib
import io
import os
import socket
import struct
import sys
import unittest
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import roce_inject as ri  # noqa: E402

ARGS4 = ["--src", "10.0.0.2", "--dst", "10.0.0.1"]
ARGS6 = ["--src", "fd00::2", "--dst", "fd00::1"]


# A UD SEND with immediate (1 byte of payload, 3 of pad) that the C rxe of Linux 7.3.4 sent from
# 10.9.0.2 to 10.9.0.1 in a guest, as tcpdump captured it (IP header on).
C_RXE_UD_SEND = ("4500003cb24c4000401174500a0900020a090001df9412b700280000"
                 "6530ffff000000110067657b111111110000001100000000b4000000135e7051")


def crc32_bitwise(data):
    """CRC-32 (IEEE 802.3) one bit at a time, from its definition: reflected polynomial
    0xEDB88320, initial value and final XOR all ones. Independent of zlib (which roce_inject.py
    uses) and of the driver's table and kernel implementations."""
    crc = 0xffffffff
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0xedb88320 if crc & 1 else 0)
    return crc ^ 0xffffffff


def icrc_by_the_spec(ip, udp, rest):
    """The ICRC as IBTA Annex A17.8 defines it, written out apart from roce_inject.py: 64 bits of
    ones stand for the LRH, then the IP header with its variant fields set to ones (IPv4 TOS,
    TTL, checksum; IPv6 traffic class, flow label, hop limit), the UDP header with its checksum
    set to ones, the BTH with its 8 reserved bits set to ones, and the rest of the packet."""
    ip = bytearray(ip)
    if ip[0] >> 4 == 4:
        for i in (1, 8, 10, 11):
            ip[i] = 0xff
    else:
        ip[0] |= 0x0f
        ip[1] = ip[2] = ip[3] = ip[7] = 0xff
    udp = bytearray(udp)
    udp[6] = udp[7] = 0xff
    rest = bytearray(rest)
    rest[4] = 0xff
    return crc32_bitwise(b"\xff" * 8 + bytes(ip) + bytes(udp) + bytes(rest))


# case: (UDP payload length, opcode, BTH pad count, TVer, valid ICRC)
SHAPES = {
    "good": (12 + 16 + 4, 0x04, 0, 0, True),
    "good_ud": (12 + 8 + 16 + 4, 0x64, 0, 0, True),
    "bad_icrc": (12 + 16 + 4, 0x04, 0, 0, False),
    "truncated": (8, 0x04, 0, 0, False),
    "short_icrc": (14, 0x04, 0, 0, False),
    "unknown_opcode": (12 + 16 + 4, 0x1f, 0, 0, True),
    "bad_version": (12 + 16 + 4, 0x04, 0, 1, True),
    "bad_qpn": (12 + 16 + 4, 0x04, 0, 0, True),
    "bad_pad": (12 + 2 + 4, 0x04, 3, 0, True),
    "bad_length": (12 + 16 + 8 + 4, 0x0c, 0, 0, True),
    "ack_unsolicited": (12 + 4 + 4, 0x11, 0, 0, True),
    "cnp": (12 + 16 + 4, 0x81, 0, 0, True),
    "psn_far": (12 + 16 + 4, 0x04, 0, 0, True),
}


def build(case, argv=ARGS4):
    """Packet of one case for the given command line options."""
    return ri.build(case, ri.parse_args(argv + [case]))


def split(pkt):
    """(IP header, UDP header, UDP payload)."""
    n = ri.IPV4_HDR_LEN if pkt[0] >> 4 == 4 else ri.IPV6_HDR_LEN
    return pkt[:n], pkt[n:n + 8], pkt[n + 8:]


def icrc_ok(pkt):
    """Whether the trailer is the ICRC of the rest of the packet."""
    ip, udp, pay = split(pkt)
    return struct.unpack("<I", pay[-4:])[0] == ri.icrc(ip, udp, pay[:-4])


class IcrcTest(unittest.TestCase):
    def test_bitwise_crc_is_crc32(self):
        # The check value every CRC-32 catalogue lists for "123456789".
        self.assertEqual(crc32_bitwise(b"123456789"), 0xcbf43926)
        # 64 bits of ones from the all-ones start: the ICRC seed rxe and ferroce begin from.
        crc = 0xffffffff
        for byte in b"\xff" * 8:
            crc ^= byte
            for _ in range(8):
                crc = (crc >> 1) ^ (0xedb88320 if crc & 1 else 0)
        self.assertEqual(crc, 0xdebb20e3)

    def test_matches_the_spec_on_every_case(self):
        for argv in (ARGS4, ARGS6):
            for case in SHAPES:
                pkt = build(case, argv)
                ip, udp, pay = split(pkt)
                if len(pay) < 16:
                    continue
                want = icrc_by_the_spec(ip, udp, pay[:-4])
                self.assertEqual(ri.icrc(ip, udp, pay[:-4]), want, case)

    def test_c_rxe_packet(self):
        # A UD SEND the C rxe (Linux 7.3.4) sent in a guest, captured with tcpdump: its ICRC,
        # the last 4 bytes, must be what the spec gives for the rest.
        pkt = bytes.fromhex(C_RXE_UD_SEND)
        ip, udp, pay = split(pkt)
        self.assertEqual(struct.pack("<I", icrc_by_the_spec(ip, udp, pay[:-4])), pay[-4:])
        self.assertTrue(icrc_ok(pkt))

    def test_masked_fields_do_not_matter(self):
        base = build("good")
        ce = build("good", ARGS4 + ["--tos", "0x03"])
        self.assertNotEqual(base[1], ce[1])
        self.assertEqual(base[-4:], ce[-4:])
        self.assertNotEqual(build("good", ARGS4 + ["--sport", "0xc002"])[-4:], base[-4:])

    def test_ipv6_masks_class_and_hop_limit(self):
        pkt = bytearray(build("good", ARGS6))
        self.assertTrue(icrc_ok(pkt))
        pkt[0:4] = b"\x6f\xff\xff\xff"
        pkt[7] = 1
        self.assertTrue(icrc_ok(pkt))


class ShapeTest(unittest.TestCase):
    def check_headers(self, pkt, case):
        ip, udp, pay = split(pkt)
        sport, dport, ulen, csum = struct.unpack("!HHHH", udp)
        self.assertEqual((sport, dport, ulen), (0xc001, 4791, 8 + len(pay)), case)
        if len(ip) == 20:
            self.assertEqual(ip[0], 0x45)
            self.assertEqual(struct.unpack("!H", ip[2:4])[0], len(pkt))
            self.assertEqual(ip[4:10], b"\x12\x34\x40\x00\x40\x11")  # ID, DF, TTL, UDP
            self.assertEqual(ri.inet_checksum(ip), 0)
            self.assertEqual(csum, 0)
        else:
            self.assertEqual(struct.unpack("!HBB", ip[4:8]), (ulen, 17, 64))
            pseudo = ip[8:40] + struct.pack("!IxxxB", ulen, 17)
            self.assertEqual(ri.inet_checksum(pseudo + udp + pay), 0)
            self.assertNotEqual(csum, 0)

    def check_shape(self, argv):
        for case, (ulen, op, pad, tver, valid) in SHAPES.items():
            pkt = build(case, argv)
            self.check_headers(pkt, case)
            pay = split(pkt)[2]
            self.assertEqual(len(pay), ulen, case)
            self.assertEqual(pay[0], op, case)
            if len(pay) >= 12:
                self.assertEqual((pay[1] >> 4) & 3, pad, case)
                self.assertEqual(pay[1] & 0xf, tver, case)
            if len(pay) >= 16:
                self.assertEqual(icrc_ok(pkt), valid, case)

    def test_ipv4(self):
        self.check_shape(ARGS4)

    def test_ipv6(self):
        self.check_shape(ARGS6)

    def test_bth_fields(self):
        argv = ARGS4 + ["--qpn", "0x123456", "--psn", "0x7ffffe"]
        bth = split(build("good", argv))[2][:12]
        self.assertEqual(bth, bytes([0x04, 0, 0xff, 0xff, 0, 0x12, 0x34, 0x56,
                                     0x80, 0x7f, 0xff, 0xfe]))
        self.assertEqual(split(build("bad_qpn", argv))[2][5:8], b"\xab\xcd\xef")
        self.assertEqual(split(build("psn_far", argv))[2][9:12], b"\xff\xff\xfe")
        self.assertEqual(split(build("cnp", argv))[2][4], 0x40)  # BECN
        self.assertEqual(split(build("cnp", argv))[2][12:28], bytes(16))

    def test_ext_headers(self):
        ud = split(build("good_ud", ARGS4 + ["--qkey", "0x80010000"]))[2]
        self.assertEqual(ud[12:20], b"\x80\x01\x00\x00\x00\x00\x00\x11")
        rd = split(build("bad_length"))[2]
        self.assertEqual(struct.unpack("!QII", rd[12:28])[2], 64)
        self.assertEqual(split(build("ack_unsolicited"))[2][12:16], b"\x1f\x00\x00\x00")

    def test_rc_requests_for_a_live_qp(self):
        argv = ARGS4 + ["--rkey", "0x1234", "--va", "0x7f0000001000", "--length", "24"]
        wr = split(build("rc_write", argv))[2]
        self.assertEqual(wr[0], ri.RC_RDMA_WRITE_ONLY)
        self.assertEqual(struct.unpack("!QII", wr[12:28]), (0x7f0000001000, 0x1234, 24))
        self.assertEqual(wr[28:-4], b"\xa5" * 24)
        short = split(build("rc_write", argv + ["--payload", "8"]))[2]
        self.assertEqual((len(short[28:-4]), struct.unpack("!QII", short[12:28])[2]), (8, 24))
        rd = split(build("rc_read", argv))[2]
        self.assertEqual((rd[0], len(rd)), (ri.RC_RDMA_READ_REQUEST, 12 + 16 + 4))
        ack = split(build("rc_ack", ARGS4 + ["--syndrome", "0x62", "--pkey", "0x8001"]))[2]
        self.assertEqual((ack[0], ack[2:4], ack[12]), (0x11, b"\x80\x01", 0x62))
        rr = split(build("rc_read_response", argv))[2]
        self.assertEqual((rr[0], rr[12], rr[16:-4]),
                         (ri.RC_RDMA_READ_RESPONSE_ONLY, 0x1f, b"\xa5" * 24))
        sd = split(build("rc_send", ARGS4 + ["--payload", "6"]))[2]
        self.assertEqual(((sd[1] >> 4) & 3, sd[12:-4]), (2, b"\xa5" * 6 + b"\0\0"))
        for case in ri.RC_CASES:
            self.assertTrue(icrc_ok(build(case, argv)), case)

    def test_atomic_requests_carry_their_operands_big_endian(self):
        argv = ARGS4 + ["--rkey", "0x1234", "--va", "0x7f0000001008"]
        fa = split(build("rc_fetch_add", argv + ["--add", "0x0102030405060708"]))[2]
        self.assertEqual((fa[0], fa[8] >> 7, len(fa)), (ri.RC_FETCH_ADD, 1, 12 + 28 + 4))
        self.assertEqual(struct.unpack("!QIQQ", fa[12:40]),
                         (0x7f0000001008, 0x1234, 0x0102030405060708, 0))
        cs = split(build("rc_cmp_swap", argv + ["--compare", "5", "--swap", "9"]))[2]
        self.assertEqual((cs[0], struct.unpack("!QIQQ", cs[12:40])),
                         (ri.RC_COMPARE_SWAP, (0x7f0000001008, 0x1234, 9, 5)))

    def test_an_atomic_write_carries_a_reth_and_its_word(self):
        argv = ARGS4 + ["--rkey", "0x1234", "--va", "0x7f0000001008", "--length", "8"]
        aw = split(build("rc_atomic_write", argv))[2]
        self.assertEqual((aw[0], aw[8] >> 7, len(aw)), (ri.RC_ATOMIC_WRITE, 1, 12 + 16 + 8 + 4))
        self.assertEqual(struct.unpack("!QII", aw[12:28]), (0x7f0000001008, 0x1234, 8))
        self.assertEqual(aw[28:-4], b"\xa5" * 8)

    def test_a_flush_carries_a_feth_then_a_reth_and_no_payload(self):
        argv = ARGS4 + ["--rkey", "0x1234", "--va", "0x7f0000001000", "--length", "4096",
                        "--placement", "2", "--level", "1"]
        fl = split(build("rc_flush", argv))[2]
        self.assertEqual((fl[0], fl[8] >> 7, len(fl)), (ri.RC_FLUSH, 1, 12 + 4 + 16 + 4))
        self.assertEqual(struct.unpack("!I", fl[12:16]), (0x12,))
        self.assertEqual(struct.unpack("!QII", fl[16:32]), (0x7f0000001000, 0x1234, 4096))

    def test_a_send_with_invalidate_names_its_key_in_an_ieth(self):
        argv = ARGS4 + ["--rkey", "0x80001234", "--length", "8"]
        si = split(build("rc_send_inv", argv))[2]
        self.assertEqual((si[0], si[8] >> 7, len(si)), (ri.RC_SEND_ONLY_INV, 1, 12 + 4 + 8 + 4))
        self.assertEqual((struct.unpack("!I", si[12:16])[0], si[16:-4]),
                         (0x80001234, b"\xa5" * 8))

    def test_uc_requests_for_a_live_qp(self):
        argv = ARGS4 + ["--rkey", "0x1234", "--va", "0x1000", "--length", "16", "--psn", "7"]
        ops = {"uc_send_first": 0x20, "uc_send_middle": 0x21, "uc_send_last": 0x22,
               "uc_send_only": 0x24}
        for case, op in ops.items():
            bth = split(build(case, argv))[2]
            # UC asks for no ACK; the payload follows the BTH directly.
            self.assertEqual((bth[0], bth[8] >> 7, bth[11], bth[12:-4]),
                             (op, 0, 7, b"\xa5" * 16), case)
        wr = split(build("uc_write", argv))[2]
        self.assertEqual(wr[0], 0x2a)
        self.assertEqual(struct.unpack("!QII", wr[12:28]), (0x1000, 0x1234, 16))
        for case in ri.UC_CASES:
            self.assertTrue(icrc_ok(build(case, argv)), case)

    def test_bad_icrc_differs_only_in_one_icrc_bit(self):
        good, bad = build("good"), build("bad_icrc")
        self.assertEqual(len(good), len(bad))
        self.assertEqual(good[:-4], bad[:-4])
        diff = int.from_bytes(good[-4:], "little") ^ int.from_bytes(bad[-4:], "little")
        self.assertEqual(bin(diff).count("1"), 1)


class CliTest(unittest.TestCase):
    def run_main(self, argv):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = ri.main(argv)
        return rc, out.getvalue().splitlines()

    def test_print_all_in_order(self):
        rc, lines = self.run_main(ARGS4 + ["--print", "all"])
        self.assertEqual(rc, 0)
        self.assertEqual([ln.split()[0] for ln in lines], ri.CASES)
        self.assertEqual(bytes.fromhex(lines[0].split()[1]), build("good"))

    def test_bad_arguments(self):
        for argv in (["--src", "10.0.0.2", "--dst", "fd00::1", "good"],
                     ARGS4 + ["--qpn", "0x1000000", "good"], ARGS4 + ["nonsense"]):
            with contextlib.redirect_stderr(io.StringIO()), self.assertRaises(SystemExit) as cm:
                ri.main(argv)
            self.assertNotEqual(cm.exception.code, 0)

    def test_no_cap_net_raw(self):
        with mock.patch.object(socket, "socket", side_effect=PermissionError(1, "denied")):
            with self.assertRaises(SystemExit) as cm:
                ri.main(ARGS4 + ["good"])
        self.assertIn("need CAP_NET_RAW", str(cm.exception.code))

    def test_sends_count_packets(self):
        sock = mock.MagicMock()
        sock.__enter__.return_value = sock
        with mock.patch.object(socket, "socket", return_value=sock):
            rc, lines = self.run_main(ARGS4 + ["--count", "3", "all"])
        self.assertEqual((rc, lines), (0, ri.CASES))
        self.assertEqual(sock.sendto.call_count, 3 * len(ri.CASES))
        sock.sendto.assert_any_call(build("good"), ("10.0.0.1", 0))

    def test_spliced_datagrams_carry_the_udp_payload_whole(self):
        """--splice over ::1, unprivileged: each sendfile() is one datagram, the packet from
        its BTH to its ICRC, from the source port the ICRC covers (to a free port of its own
        instead of 4791)."""
        rx = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        tx = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        with rx, tx:
            rx.bind(("::1", 0))
            tx.bind(("::1", 0))
            sport = tx.getsockname()[1]
            tx.close()
            rx.settimeout(5)
            args = ["--src", "::1", "--dst", "::1", "--sport", str(sport), "--count", "2"]
            with mock.patch.object(ri, "ROCE_PORT", rx.getsockname()[1]):
                rc, _ = self.run_main(args + ["--splice", "good"])
                want = ri.build("good", ri.parse_args(args + ["good"]))[ri.IPV6_HDR_LEN + 8:]
            got = [rx.recvfrom(4096) for _ in range(2)]
        self.assertEqual(rc, 0)
        self.assertEqual([(d, a[1]) for d, a in got], [(want, sport)] * 2)

    def test_splice_needs_ipv6(self):
        with contextlib.redirect_stderr(io.StringIO()), self.assertRaises(SystemExit) as cm:
            ri.main(ARGS4 + ["--splice", "good"])
        self.assertEqual(cm.exception.code, 2)


if __name__ == "__main__":
    unittest.main()

// SPDX-License-Identifier: GPL-2.0

//! The base transport header (BTH), 12 bytes at the start of every RoCEv2 UDP payload.

use super::icrc::BTH_LEN;
use super::psn::Psn;

/// A parsed base transport header, fields in host order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Bth {
    /// Opcode: transport class in bits 7:5, operation in bits 4:0.
    pub(crate) opcode: u8,
    /// Solicited event.
    pub(crate) solicited: bool,
    /// Migration request.
    pub(crate) mig_req: bool,
    /// Pad bytes (0-3) after the payload, before the ICRC.
    pub(crate) pad: u8,
    /// Partition key.
    pub(crate) pkey: u16,
    /// Forward explicit congestion notification.
    pub(crate) fecn: bool,
    /// Backward explicit congestion notification.
    pub(crate) becn: bool,
    /// Destination queue pair number (24 bits).
    pub(crate) dest_qpn: u32,
    /// Acknowledge request.
    pub(crate) ack_req: bool,
    /// Packet sequence number.
    pub(crate) psn: Psn,
}

/// Why a BTH was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BthError {
    /// Fewer than 12 bytes.
    Truncated,
    /// Transport header version is not 0.
    BadVersion,
}

/// Mask of the 24-bit queue pair number.
pub(crate) const QPN_MASK: u32 = 0x00ff_ffff;

/// The destination QP number of multicast packets (IBA 9.8.1): no QP has it.
pub(crate) const MULTICAST_QPN: u32 = 0x00ff_ffff;

/// Whether a packet's P_Key admits it to a QP whose P_Key is `qp_pkey` (IBA 10.9.3): the same
/// 15-bit key, and at least one of the two a full member (the top bit set).
pub(crate) const fn pkey_matches(pkt_pkey: u16, qp_pkey: u16) -> bool {
    pkt_pkey & 0x7fff == qp_pkey & 0x7fff && (pkt_pkey | qp_pkey) & 0x8000 != 0
}

impl Bth {
    /// A BTH to `dest_qpn` with `psn`, no flags, no pad and the default P_Key; callers set what
    /// differs with struct update syntax.
    pub(crate) const fn new(opcode: u8, dest_qpn: u32, psn: Psn) -> Self {
        Self {
            opcode,
            solicited: false,
            mig_req: false,
            pad: 0,
            pkey: 0xffff,
            fecn: false,
            becn: false,
            dest_qpn,
            ack_req: false,
            psn,
        }
    }

    /// Parses the BTH at the start of `buf`. Only structure is checked here; whether the opcode,
    /// QPN and PSN make sense is up to the receiver.
    pub(crate) fn parse(buf: &[u8]) -> Result<Self, BthError> {
        let b: &[u8; BTH_LEN] = buf
            .get(..BTH_LEN)
            .and_then(|b| b.try_into().ok())
            .ok_or(BthError::Truncated)?;
        if b[1] & 0x0f != 0 {
            return Err(BthError::BadVersion);
        }
        Ok(Self {
            opcode: b[0],
            solicited: b[1] & 0x80 != 0,
            mig_req: b[1] & 0x40 != 0,
            pad: (b[1] >> 4) & 0x3,
            pkey: u16::from_be_bytes([b[2], b[3]]),
            fecn: b[4] & 0x80 != 0,
            becn: b[4] & 0x40 != 0,
            dest_qpn: u32::from_be_bytes([0, b[5], b[6], b[7]]),
            ack_req: b[8] & 0x80 != 0,
            psn: Psn::new(u32::from_be_bytes([0, b[9], b[10], b[11]])),
        })
    }

    /// Writes the header in wire format; out-of-range fields are truncated to their width.
    pub(crate) fn write(&self, out: &mut [u8; BTH_LEN]) {
        let qpn = (self.dest_qpn & QPN_MASK).to_be_bytes();
        let psn = self.psn.get().to_be_bytes();
        let pkey = self.pkey.to_be_bytes();
        *out = [
            self.opcode,
            u8::from(self.solicited) << 7 | u8::from(self.mig_req) << 6 | (self.pad & 0x3) << 4,
            pkey[0],
            pkey[1],
            u8::from(self.fecn) << 7 | u8::from(self.becn) << 6,
            qpn[1],
            qpn[2],
            qpn[3],
            u8::from(self.ack_req) << 7,
            psn[1],
            psn[2],
            psn[3],
        ];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkeys_match_by_key_and_membership() {
        assert!(pkey_matches(0xffff, 0xffff));
        assert!(pkey_matches(0x7fff, 0xffff));
        assert!(pkey_matches(0xffff, 0x7fff));
        // Two limited members may not talk; another key never.
        assert!(!pkey_matches(0x7fff, 0x7fff));
        assert!(!pkey_matches(0x8001, 0xffff));
        assert!(!pkey_matches(0x0000, 0xffff));
    }

    /// The RoCEv2 CNP of the Mellanox packet-format example: opcode 0x81, BECN, QPN 0xd2.
    const CNP: [u8; 12] = [
        0x81, 0x00, 0xff, 0xff, 0x40, 0x00, 0x00, 0xd2, 0x00, 0x00, 0x00, 0x00,
    ];

    #[test]
    fn parses_the_cnp_example() {
        let bth = Bth::parse(&CNP).unwrap();
        assert_eq!(bth.opcode, 0x81);
        assert_eq!(bth.pkey, 0xffff);
        assert!(bth.becn && !bth.fecn && !bth.ack_req && !bth.solicited);
        assert_eq!(bth.dest_qpn, 0xd2);
        assert_eq!(bth.psn, Psn::new(0));
    }

    #[test]
    fn write_then_parse_round_trips() {
        let bth = Bth {
            opcode: 0x0a,
            solicited: true,
            mig_req: true,
            pad: 3,
            pkey: 0x8001,
            fecn: true,
            becn: false,
            dest_qpn: 0xab_cdef,
            ack_req: true,
            psn: Psn::new(0xff_fffe),
        };
        let mut wire = [0u8; 12];
        bth.write(&mut wire);
        assert_eq!(
            wire,
            [0x0a, 0xf0, 0x80, 0x01, 0x80, 0xab, 0xcd, 0xef, 0x80, 0xff, 0xff, 0xfe]
        );
        assert_eq!(Bth::parse(&wire), Ok(bth));
        let mut cnp = [0u8; 12];
        Bth::parse(&CNP).unwrap().write(&mut cnp);
        assert_eq!(cnp, CNP);
    }

    #[test]
    fn rejects_short_and_bad_version() {
        assert_eq!(Bth::parse(&CNP[..11]), Err(BthError::Truncated));
        let mut v1 = CNP;
        v1[1] = 0x01;
        assert_eq!(Bth::parse(&v1), Err(BthError::BadVersion));
    }

    #[test]
    fn write_truncates_wide_fields() {
        let mut wire = [0u8; 12];
        Bth {
            opcode: 4,
            solicited: false,
            mig_req: false,
            pad: 7,
            pkey: 0xffff,
            fecn: false,
            becn: false,
            dest_qpn: 0xff12_3456,
            ack_req: false,
            psn: Psn::new(1),
        }
        .write(&mut wire);
        assert_eq!(&wire[5..8], &[0x12, 0x34, 0x56]);
        assert_eq!(wire[1], 0x30);
    }
}

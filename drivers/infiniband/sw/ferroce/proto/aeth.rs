// SPDX-License-Identifier: GPL-2.0

//! The AETH syndrome (IBA 9.3.5, table 44): what an ACK packet says. One type for the responder
//! that encodes it and the requester that decodes it.

use super::wqe::WcStatus;

/// A NAK's reason (the low five bits of a class 3 syndrome).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Nak {
    /// A request came out of PSN order: send again from the NAK's PSN.
    PsnSequence,
    InvalidRequest,
    RemoteAccess,
    RemoteOperational,
    InvalidRdRequest,
    /// A code the spec reserves; the requester takes it as a remote operational error.
    Reserved(u8),
}

/// An ACK, RNR NAK or NAK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Syndrome {
    /// Sent with the credit field "invalid" (0x1f): end-to-end flow control is not used. Any
    /// credit count is accepted.
    Ack,
    /// Receiver not ready: try again after the delay of `timer` (see
    /// [`super::timeouts::rnr_delay_us`]).
    RnrNak {
        timer: u8,
    },
    Nak(Nak),
}

const CLASS_ACK: u8 = 0;
const CLASS_RNR_NAK: u8 = 1;
const CLASS_NAK: u8 = 3;
const NO_CREDITS: u8 = 0x1f;

impl Syndrome {
    /// The syndrome byte on the wire.
    pub(crate) const fn to_u8(self) -> u8 {
        let (class, low) = match self {
            Syndrome::Ack => (CLASS_ACK, NO_CREDITS),
            Syndrome::RnrNak { timer } => (CLASS_RNR_NAK, timer),
            Syndrome::Nak(nak) => (
                CLASS_NAK,
                match nak {
                    Nak::PsnSequence => 0,
                    Nak::InvalidRequest => 1,
                    Nak::RemoteAccess => 2,
                    Nak::RemoteOperational => 3,
                    Nak::InvalidRdRequest => 4,
                    Nak::Reserved(code) => code,
                },
            ),
        };
        class << 5 | low & 0x1f
    }

    /// Reads a syndrome byte; `None` for class 2 and for the top bit set, which the spec
    /// reserves.
    pub(crate) const fn from_u8(b: u8) -> Option<Self> {
        let low = b & 0x1f;
        Some(match b >> 5 {
            CLASS_ACK => Syndrome::Ack,
            CLASS_RNR_NAK => Syndrome::RnrNak { timer: low },
            CLASS_NAK => Syndrome::Nak(match low {
                0 => Nak::PsnSequence,
                1 => Nak::InvalidRequest,
                2 => Nak::RemoteAccess,
                3 => Nak::RemoteOperational,
                4 => Nak::InvalidRdRequest,
                code => Nak::Reserved(code),
            }),
            _ => return None,
        })
    }

    pub(crate) const fn is_ack(self) -> bool {
        matches!(self, Syndrome::Ack)
    }
}

impl Nak {
    /// The status a requester's WQE completes with when the responder NAKs it this way (IBA
    /// 10.8.3.1, table 147); a sequence NAK does not complete a WQE, it asks for a resend.
    pub(crate) const fn status(self) -> Option<WcStatus> {
        match self {
            Nak::PsnSequence => None,
            Nak::InvalidRequest => Some(WcStatus::RemInvReqErr),
            Nak::RemoteAccess => Some(WcStatus::RemAccessErr),
            Nak::RemoteOperational | Nak::InvalidRdRequest | Nak::Reserved(_) => {
                Some(WcStatus::RemOpErr)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn naks_complete_wqes_as_table_147_says() {
        let table = [
            (Nak::PsnSequence, None),
            (Nak::InvalidRequest, Some(WcStatus::RemInvReqErr)),
            (Nak::RemoteAccess, Some(WcStatus::RemAccessErr)),
            (Nak::RemoteOperational, Some(WcStatus::RemOpErr)),
            (Nak::InvalidRdRequest, Some(WcStatus::RemOpErr)),
            (Nak::Reserved(0x1f), Some(WcStatus::RemOpErr)),
        ];
        for (nak, status) in table {
            assert_eq!(nak.status(), status, "{nak:?}");
            assert!(!Syndrome::Nak(nak).is_ack());
        }
        assert!(Syndrome::Ack.is_ack());
        assert!(!Syndrome::RnrNak { timer: 0 }.is_ack());
    }

    #[test]
    fn wire_values() {
        // IBA table 44; 0x1f is "ACK, credits invalid", as C rxe sends it.
        let table = [
            (Syndrome::Ack, 0x1f),
            (Syndrome::RnrNak { timer: 0 }, 0x20),
            (Syndrome::RnrNak { timer: 14 }, 0x2e),
            (Syndrome::Nak(Nak::PsnSequence), 0x60),
            (Syndrome::Nak(Nak::InvalidRequest), 0x61),
            (Syndrome::Nak(Nak::RemoteAccess), 0x62),
            (Syndrome::Nak(Nak::RemoteOperational), 0x63),
            (Syndrome::Nak(Nak::InvalidRdRequest), 0x64),
        ];
        for (s, b) in table {
            assert_eq!(s.to_u8(), b, "{s:?}");
            assert_eq!(Syndrome::from_u8(b), Some(s), "{b:#x}");
        }
    }

    #[test]
    fn every_byte_decodes_and_encodes_back() {
        for b in 0..=u8::MAX {
            match Syndrome::from_u8(b) {
                // Class 2 and the top bit are reserved.
                None => assert!(b >> 5 == 2 || b & 0x80 != 0, "{b:#x}"),
                // An ACK with a credit count reads as an ACK; it is sent without one.
                Some(Syndrome::Ack) => assert_eq!(b >> 5, 0),
                Some(s) => assert_eq!(s.to_u8(), b, "{b:#x}"),
            }
        }
        assert_eq!(Syndrome::from_u8(0x00), Some(Syndrome::Ack));
        assert_eq!(
            Syndrome::from_u8(0x7f),
            Some(Syndrome::Nak(Nak::Reserved(0x1f)))
        );
    }
}

// SPDX-License-Identifier: GPL-2.0

//! The opcodes a RoCEv2 BTH may carry, and what each implies for the rest of the packet.
//!
//! One table row per opcode says which extension headers follow the BTH, in wire order; every
//! other property (header length, payload, request or response) is derived from the row, so the
//! table cannot contradict itself.

use super::icrc::BTH_LEN;

/// The transport service an opcode belongs to (bits 7:5 of the opcode, and CNP).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Transport {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram.
    Ud,
    /// RoCEv2 congestion notification; belongs to no queue pair's data stream.
    Cnp,
}

/// What an opcode does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OpKind {
    /// SEND, with or without immediate data or invalidate.
    Send,
    /// RDMA WRITE, with or without immediate data.
    Write,
    /// RDMA READ request.
    ReadRequest,
    /// RDMA READ response.
    ReadResponse,
    /// Atomic compare-and-swap or fetch-and-add request.
    Atomic,
    /// ATOMIC WRITE request: 8 bytes stored whole, answered as a zero-length READ (IBA 1.5).
    AtomicWrite,
    /// FLUSH request: what was written before it to a range or a region is placed (made
    /// visible, or persistent) before it is answered, as a zero-length READ (IBA 1.5).
    Flush,
    /// ACK or NAK.
    Ack,
    /// Response to an atomic request, carrying the original value.
    AtomicAck,
    /// Congestion notification packet.
    Cnp,
}

/// Where a packet sits in its message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Position {
    /// First packet of a multi-packet message.
    First,
    /// Neither first nor last.
    Middle,
    /// Last packet of a multi-packet message.
    Last,
    /// The whole message in one packet; also every packet that is not part of a message.
    Only,
}

impl Position {
    /// Whether the packet starts its message (first or only).
    pub(crate) const fn starts(self) -> bool {
        matches!(self, Self::First | Self::Only)
    }

    /// Whether the packet ends its message (last or only).
    pub(crate) const fn ends(self) -> bool {
        matches!(self, Self::Last | Self::Only)
    }

    /// Where packet `index` of a message of `count` packets sits.
    pub(crate) const fn of(index: u32, count: u32) -> Self {
        match (index == 0, index >= count.saturating_sub(1)) {
            (true, true) => Self::Only,
            (true, false) => Self::First,
            (false, true) => Self::Last,
            (false, false) => Self::Middle,
        }
    }
}

/// The extension headers that may follow a BTH.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ExtHdr {
    /// RDMA extended transport header: virtual address, R_Key, DMA length.
    Reth,
    /// ACK extended transport header: syndrome and MSN.
    Aeth,
    /// Datagram extended transport header: Q_Key and source QP.
    Deth,
    /// Immediate data.
    ImmDt,
    /// Atomic extended transport header: address, R_Key, swap/add and compare data.
    AtomicEth,
    /// Atomic ACK extended transport header: the original remote value.
    AtomicAckEth,
    /// Invalidate extended transport header: the R_Key to invalidate.
    Ieth,
    /// FLUSH extended transport header: placement type and selectivity level.
    Feth,
    /// The 16 reserved bytes a CNP carries after its BTH. Not an IBTA header, but placing them
    /// here gives CNPs a fixed header length and no payload, like every other opcode.
    CnpReserved,
}

impl ExtHdr {
    /// Length of the header on the wire.
    pub(crate) const fn len(self) -> usize {
        match self {
            ExtHdr::Reth => 16,
            ExtHdr::Aeth => 4,
            ExtHdr::Deth => 8,
            ExtHdr::ImmDt => 4,
            ExtHdr::AtomicEth => 28,
            ExtHdr::AtomicAckEth => 8,
            ExtHdr::Ieth => 4,
            ExtHdr::Feth => 4,
            ExtHdr::CnpReserved => 16,
        }
    }

    /// A distinct bit per header, for [`OpInfo::has`].
    const fn bit(self) -> u16 {
        1 << self as u8
    }
}

/// Everything the opcode alone says about a packet.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct OpInfo {
    /// The opcode this describes.
    pub(crate) opcode: Opcode,
    /// Its transport service.
    pub(crate) transport: Transport,
    /// What it does.
    pub(crate) kind: OpKind,
    /// Where the packet sits in its message.
    pub(crate) position: Position,
    /// Extension headers after the BTH, in wire order.
    pub(crate) exts: &'static [ExtHdr],
    /// BTH plus extension headers: where the payload starts.
    pub(crate) hdr_len: usize,
    /// One [`ExtHdr::bit`] per header in `exts`.
    ext_mask: u16,
}

impl OpInfo {
    const fn new(
        opcode: Opcode,
        transport: Transport,
        kind: OpKind,
        position: Position,
        exts: &'static [ExtHdr],
    ) -> Self {
        let mut hdr_len = BTH_LEN;
        let mut ext_mask = 0;
        let mut i = 0;
        while i < exts.len() {
            hdr_len += exts[i].len();
            ext_mask |= exts[i].bit();
            i += 1;
        }
        Self {
            opcode,
            transport,
            kind,
            position,
            exts,
            hdr_len,
            ext_mask,
        }
    }

    /// Looks up a BTH opcode; `None` for reserved and unsupported transports (RD, XRC).
    pub(crate) const fn lookup(op: u8) -> Option<&'static OpInfo> {
        match Opcode::from_u8(op) {
            Some(op) => Some(op.info()),
            None => None,
        }
    }

    /// Whether the packet carries payload after its headers (possibly zero bytes of it).
    pub(crate) const fn has_payload(&self) -> bool {
        matches!(
            self.kind,
            OpKind::Send | OpKind::Write | OpKind::ReadResponse | OpKind::AtomicWrite
        )
    }

    /// Whether the requester sends it.
    pub(crate) const fn is_request(&self) -> bool {
        matches!(
            self.kind,
            OpKind::Send
                | OpKind::Write
                | OpKind::ReadRequest
                | OpKind::Atomic
                | OpKind::AtomicWrite
                | OpKind::Flush
        )
    }

    /// Whether the responder sends it (ACK, NAK, read or atomic response).
    pub(crate) const fn is_response(&self) -> bool {
        matches!(
            self.kind,
            OpKind::ReadResponse | OpKind::Ack | OpKind::AtomicAck
        )
    }
}

// The rest of the vocabulary serves the host's table tests and fuzzers.
#[cfg(ferroce_host)]
impl OpInfo {
    /// Whether extension header `ext` follows the BTH.
    pub(crate) const fn has(&self, ext: ExtHdr) -> bool {
        self.ext_mask & ext.bit() != 0
    }

    /// Whether it is a SEND.
    pub(crate) const fn is_send(&self) -> bool {
        matches!(self.kind, OpKind::Send)
    }

    /// Whether it is an RDMA WRITE.
    pub(crate) const fn is_write(&self) -> bool {
        matches!(self.kind, OpKind::Write)
    }

    /// Whether it is an RDMA READ request or response.
    pub(crate) const fn is_read(&self) -> bool {
        matches!(self.kind, OpKind::ReadRequest | OpKind::ReadResponse)
    }

    /// Whether it is an atomic request.
    pub(crate) const fn is_atomic(&self) -> bool {
        matches!(self.kind, OpKind::Atomic)
    }

    /// Whether it carries immediate data, which completes the message with it.
    pub(crate) const fn has_imm(&self) -> bool {
        self.has(ExtHdr::ImmDt)
    }

    /// Whether it carries an R_Key to invalidate.
    pub(crate) const fn has_inv(&self) -> bool {
        self.has(ExtHdr::Ieth)
    }

    /// Whether the responder must answer it. True for every RC request: sends and writes get an
    /// ACK (possibly coalesced with later ones), reads a read response, atomics an atomic ACK.
    pub(crate) const fn requires_ack(&self) -> bool {
        matches!(self.transport, Transport::Rc) && self.is_request()
    }
}

/// Writes the `Opcode` enum, its byte conversion and its [`OpInfo`] from one table, so that a row
/// cannot be missing from one of them.
macro_rules! opcodes {
    ($(
        $(#[doc = $doc:literal])*
        $name:ident = $value:literal: $transport:ident, $kind:ident, $position:ident, [$($ext:ident),*];
    )*) => {
        /// A BTH opcode that ferroce knows.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(u8)]
        pub(crate) enum Opcode {
            $($(#[doc = $doc])* $name = $value,)*
        }

        impl Opcode {
            /// Every known opcode, in table order.
            #[cfg(ferroce_host)]
            pub(crate) const ALL: &'static [Opcode] = &[$(Opcode::$name,)*];

            /// The opcode for a BTH opcode byte, if known.
            pub(crate) const fn from_u8(op: u8) -> Option<Self> {
                match op {
                    $($value => Some(Opcode::$name),)*
                    _ => None,
                }
            }

            /// What this opcode implies for the packet.
            pub(crate) const fn info(self) -> &'static OpInfo {
                match self {
                    $(Opcode::$name => {
                        const INFO: OpInfo = OpInfo::new(
                            Opcode::$name,
                            Transport::$transport,
                            OpKind::$kind,
                            Position::$position,
                            &[$(ExtHdr::$ext),*],
                        );
                        &INFO
                    })*
                }
            }
        }
    };
}

opcodes! {
    /// RC SEND first.
    RcSendFirst = 0x00: Rc, Send, First, [];
    /// RC SEND middle.
    RcSendMiddle = 0x01: Rc, Send, Middle, [];
    /// RC SEND last.
    RcSendLast = 0x02: Rc, Send, Last, [];
    /// RC SEND last with immediate.
    RcSendLastImm = 0x03: Rc, Send, Last, [ImmDt];
    /// RC SEND only.
    RcSendOnly = 0x04: Rc, Send, Only, [];
    /// RC SEND only with immediate.
    RcSendOnlyImm = 0x05: Rc, Send, Only, [ImmDt];
    /// RC RDMA WRITE first.
    RcWriteFirst = 0x06: Rc, Write, First, [Reth];
    /// RC RDMA WRITE middle.
    RcWriteMiddle = 0x07: Rc, Write, Middle, [];
    /// RC RDMA WRITE last.
    RcWriteLast = 0x08: Rc, Write, Last, [];
    /// RC RDMA WRITE last with immediate.
    RcWriteLastImm = 0x09: Rc, Write, Last, [ImmDt];
    /// RC RDMA WRITE only.
    RcWriteOnly = 0x0a: Rc, Write, Only, [Reth];
    /// RC RDMA WRITE only with immediate.
    RcWriteOnlyImm = 0x0b: Rc, Write, Only, [Reth, ImmDt];
    /// RC RDMA READ request.
    RcReadRequest = 0x0c: Rc, ReadRequest, Only, [Reth];
    /// RC RDMA READ response first.
    RcReadResponseFirst = 0x0d: Rc, ReadResponse, First, [Aeth];
    /// RC RDMA READ response middle.
    RcReadResponseMiddle = 0x0e: Rc, ReadResponse, Middle, [];
    /// RC RDMA READ response last.
    RcReadResponseLast = 0x0f: Rc, ReadResponse, Last, [Aeth];
    /// RC RDMA READ response only.
    RcReadResponseOnly = 0x10: Rc, ReadResponse, Only, [Aeth];
    /// RC ACKNOWLEDGE (ACK or NAK, by the AETH syndrome).
    RcAck = 0x11: Rc, Ack, Only, [Aeth];
    /// RC ATOMIC ACKNOWLEDGE.
    RcAtomicAck = 0x12: Rc, AtomicAck, Only, [Aeth, AtomicAckEth];
    /// RC CmpSwap.
    RcCompareSwap = 0x13: Rc, Atomic, Only, [AtomicEth];
    /// RC FetchAdd.
    RcFetchAdd = 0x14: Rc, Atomic, Only, [AtomicEth];
    /// RC SEND last with invalidate.
    RcSendLastInv = 0x16: Rc, Send, Last, [Ieth];
    /// RC SEND only with invalidate.
    RcSendOnlyInv = 0x17: Rc, Send, Only, [Ieth];
    /// RC FLUSH.
    RcFlush = 0x1c: Rc, Flush, Only, [Feth, Reth];
    /// RC ATOMIC WRITE.
    RcAtomicWrite = 0x1d: Rc, AtomicWrite, Only, [Reth];
    /// UC SEND first.
    UcSendFirst = 0x20: Uc, Send, First, [];
    /// UC SEND middle.
    UcSendMiddle = 0x21: Uc, Send, Middle, [];
    /// UC SEND last.
    UcSendLast = 0x22: Uc, Send, Last, [];
    /// UC SEND last with immediate.
    UcSendLastImm = 0x23: Uc, Send, Last, [ImmDt];
    /// UC SEND only.
    UcSendOnly = 0x24: Uc, Send, Only, [];
    /// UC SEND only with immediate.
    UcSendOnlyImm = 0x25: Uc, Send, Only, [ImmDt];
    /// UC RDMA WRITE first.
    UcWriteFirst = 0x26: Uc, Write, First, [Reth];
    /// UC RDMA WRITE middle.
    UcWriteMiddle = 0x27: Uc, Write, Middle, [];
    /// UC RDMA WRITE last.
    UcWriteLast = 0x28: Uc, Write, Last, [];
    /// UC RDMA WRITE last with immediate.
    UcWriteLastImm = 0x29: Uc, Write, Last, [ImmDt];
    /// UC RDMA WRITE only.
    UcWriteOnly = 0x2a: Uc, Write, Only, [Reth];
    /// UC RDMA WRITE only with immediate.
    UcWriteOnlyImm = 0x2b: Uc, Write, Only, [Reth, ImmDt];
    /// UD SEND only.
    UdSendOnly = 0x64: Ud, Send, Only, [Deth];
    /// UD SEND only with immediate.
    UdSendOnlyImm = 0x65: Ud, Send, Only, [Deth, ImmDt];
    /// RoCEv2 congestion notification packet.
    Cnp = 0x81: Cnp, Cnp, Only, [CnpReserved];
}

impl Opcode {
    /// The UC opcode with the same operation and position as this RC SEND or WRITE opcode: the
    /// UC transport's opcodes are the RC ones with bits 7:5 set to 001. `None` for what UC lacks
    /// (READ, atomics, ACKs, SEND with invalidate).
    pub(crate) const fn to_uc(self) -> Option<Opcode> {
        let info = self.info();
        match (info.transport, info.kind) {
            (Transport::Rc, OpKind::Send | OpKind::Write) => Opcode::from_u8(self as u8 | 0x20),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn position_of_a_packet_index() {
        // (index, count, position)
        let table = [
            (0, 1, Position::Only),
            (0, 2, Position::First),
            (1, 2, Position::Last),
            (0, 3, Position::First),
            (1, 3, Position::Middle),
            (2, 3, Position::Last),
        ];
        for (i, n, pos) in table {
            assert_eq!(Position::of(i, n), pos, "{i} of {n}");
        }
    }

    #[test]
    fn byte_and_opcode_agree() {
        for &op in Opcode::ALL {
            assert_eq!(Opcode::from_u8(op as u8), Some(op));
            assert_eq!(op.info().opcode, op);
        }
        let known = (0..=255u8)
            .filter(|&b| Opcode::from_u8(b).is_some())
            .count();
        assert_eq!(known, Opcode::ALL.len());
        assert_eq!(known, 25 + 12 + 2 + 1);
    }

    #[test]
    fn reserved_and_unsupported_opcodes_are_unknown() {
        for op in [
            0x15, 0x18, 0x1f, 0x2c, 0x40, 0x60, 0x63, 0x66, 0x80, 0xa0, 0xff,
        ] {
            assert!(OpInfo::lookup(op).is_none(), "{op:#x}");
        }
        // UC has no reads, atomics or invalidate.
        for op in 0x2c..=0x37 {
            assert!(OpInfo::lookup(op).is_none(), "{op:#x}");
        }
    }

    #[test]
    fn header_lengths_add_up() {
        for &op in Opcode::ALL {
            let info = op.info();
            let sum: usize = info.exts.iter().map(|e| e.len()).sum();
            assert_eq!(info.hdr_len, BTH_LEN + sum, "{op:?}");
            assert_eq!(info.hdr_len % 4, 0, "{op:?}");
            for &e in info.exts {
                assert!(info.has(e));
            }
            // No header appears twice, and `has` sees only listed headers.
            let mask = info.exts.iter().fold(0u16, |m, e| m | e.bit());
            assert_eq!(mask.count_ones() as usize, info.exts.len(), "{op:?}");
        }
        let len = |op: u8| OpInfo::lookup(op).unwrap().hdr_len;
        assert_eq!(len(0x04), 12);
        assert_eq!(len(0x06), 28);
        assert_eq!(len(0x0b), 32);
        assert_eq!(len(0x0c), 28);
        assert_eq!(len(0x11), 16);
        assert_eq!(len(0x12), 24);
        assert_eq!(len(0x13), 40);
        assert_eq!(len(0x17), 16);
        // FLUSH: FETH, then RETH.
        assert_eq!(len(0x1c), 32);
        assert_eq!(len(0x1d), 28);
        assert_eq!(len(0x64), 20);
        assert_eq!(len(0x65), 24);
        assert_eq!(len(0x81), 28);
    }

    #[test]
    fn transport_follows_the_high_bits() {
        for &op in Opcode::ALL {
            let expect = match op as u8 >> 5 {
                0 => Transport::Rc,
                1 => Transport::Uc,
                3 => Transport::Ud,
                _ => Transport::Cnp,
            };
            assert_eq!(op.info().transport, expect, "{op:?}");
        }
    }

    #[test]
    fn flags_are_consistent() {
        for &op in Opcode::ALL {
            let i = op.info();
            assert!(!(i.is_request() && i.is_response()), "{op:?}");
            let kinds = [i.is_send(), i.is_write(), i.is_read(), i.is_atomic()];
            assert!(kinds.iter().filter(|&&k| k).count() <= 1, "{op:?}");
            // Headers that only make sense with payload, and vice versa.
            if i.has_imm() || i.has_inv() {
                assert!(i.has_payload() && i.position.ends(), "{op:?}");
            }
            if i.has(ExtHdr::Reth) {
                assert!(i.position.starts(), "{op:?}");
            }
            if i.position != Position::Only {
                assert!(i.has_payload(), "{op:?}");
            }
            assert_eq!(i.has(ExtHdr::Deth), i.transport == Transport::Ud, "{op:?}");
            assert_eq!(
                i.requires_ack(),
                i.transport == Transport::Rc && i.is_request(),
                "{op:?}"
            );
        }
        let cnp = OpInfo::lookup(0x81).unwrap();
        assert_eq!(cnp.kind, OpKind::Cnp);
        assert!(!cnp.is_request() && !cnp.is_response() && !cnp.has_payload());
        let ack = Opcode::RcAck.info();
        assert!(ack.is_response() && !ack.has_payload() && ack.has(ExtHdr::Aeth));
        let rd = Opcode::RcReadRequest.info();
        assert!(rd.is_read() && rd.is_request() && rd.requires_ack() && !rd.has_payload());
        let w = Opcode::RcWriteOnlyImm.info();
        assert_eq!(w.exts, &[ExtHdr::Reth, ExtHdr::ImmDt]);
        assert!(w.is_write() && w.has_imm() && w.position == Position::Only);
        let uc = Opcode::UcSendOnly.info();
        assert!(uc.is_request() && !uc.requires_ack());
        assert_eq!(
            Opcode::RcAtomicAck.info().exts,
            &[ExtHdr::Aeth, ExtHdr::AtomicAckEth]
        );
        assert_eq!(
            Opcode::UdSendOnlyImm.info().exts,
            &[ExtHdr::Deth, ExtHdr::ImmDt]
        );
    }

    #[test]
    fn uc_opcodes_mirror_rc_sends_and_writes() {
        let mut mapped = 0;
        for &op in Opcode::ALL {
            let rc = op.info();
            match op.to_uc() {
                Some(uc) => {
                    mapped += 1;
                    let u = uc.info();
                    assert_eq!(rc.transport, Transport::Rc, "{op:?}");
                    assert_eq!(u.transport, Transport::Uc, "{op:?}");
                    assert_eq!(
                        (u.kind, u.position, u.exts),
                        (rc.kind, rc.position, rc.exts)
                    );
                }
                None => assert!(
                    rc.transport != Transport::Rc
                        || !matches!(rc.kind, OpKind::Send | OpKind::Write)
                        || rc.has_inv(),
                    "{op:?}"
                ),
            }
        }
        // SEND first..only-with-immediate and WRITE first..only-with-immediate.
        assert_eq!(mapped, 12);
        assert_eq!(Opcode::RcWriteOnlyImm.to_uc(), Some(Opcode::UcWriteOnlyImm));
        assert_eq!(Opcode::RcReadRequest.to_uc(), None);
    }

    #[test]
    fn positions_start_and_end_messages() {
        assert!(Position::First.starts() && !Position::First.ends());
        assert!(!Position::Middle.starts() && !Position::Middle.ends());
        assert!(!Position::Last.starts() && Position::Last.ends());
        assert!(Position::Only.starts() && Position::Only.ends());
    }
}

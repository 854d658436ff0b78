// SPDX-License-Identifier: GPL-2.0

//! The receive path: from the UDP socket's encapsulation hook to the queue pair a packet is for.
//!
//! Everything here comes from the wire and is untrusted. In softirq, a packet's headers are
//! copied out of the skb (which may be non-linear: it is linearised only if its fragments are
//! pages its sender may change, see [`deliver`]) and parsed, lengths first; its QP is found by
//! number without a lock; the QP then checks the ICRC before it acts on anything, and takes the
//! packet at once or, if it is busy, queues it (see [`crate::qp::QpShared::receive`]). Every
//! drop is counted by reason.

use crate::{
    counters::Counter,
    device::{Ferroce, FerroceDevice},
    proto::bth::{Bth, MULTICAST_QPN},
    proto::{
        dcqcn,
        icrc::{Icrc, BTH_LEN, ICRC_LEN, IPV4_HDR_LEN, IPV6_HDR_LEN, UDP_HDR_LEN},
        opcode::{OpInfo, OpKind, Transport},
        packet::{self, DropReason, ExtHeaders, Headers, MAX_HDR_LEN},
        psn::Psn,
    },
    qp::QpShared,
};
use kernel::{
    net::{skbuff::SkBuff, udp_tunnel::EncapRecv},
    prelude::*,
    rdma::device::Device,
};

/// Receives the datagrams of every ferroce socket.
pub(crate) struct Receiver;

impl EncapRecv for Receiver {
    fn recv(skb: SkBuff) {
        // Only packets that arrive on a netdev with a ferroce device are ours (a VLAN upper of
        // such a netdev is not: links are refused on VLANs, and the lower device's port owns
        // only untagged traffic).
        let Some(dev) = skb.dev().and_then(Device::<Ferroce>::get_by_netdev) else {
            return;
        };
        deliver(dev.data(), skb, false);
    }
}

/// Hands one packet (`data` at its UDP header) to its QP: one from the socket, or, with
/// `looped`, one a QP of the same device sent to the device's own address.
pub(crate) fn deliver(data: &FerroceDevice, mut skb: SkBuff, looped: bool) {
    let counters = &data.counters;
    let pkt = match RxHeaders::parse(&skb) {
        Ok(h) => h,
        Err(r) => return counters.inc(drop_counter(Reject::Packet(r))),
    };
    // A datagram spliced from a file or a process's pages (by this kernel, over veth or
    // loopback) is copied before its payload is read: its sender may change those pages
    // meanwhile. After parsing, so that only a packet of a valid size costs the copy.
    if skb.unshare_frags().is_err() {
        return counters.inc(Counter::DropNoMem);
    }
    if pkt.bth.dest_qpn == MULTICAST_QPN {
        return deliver_multicast(data, skb, pkt, looped);
    }
    // A packet to a group names no QP but the multicast one (IBA 10.5.2.2).
    let qp = (!pkt.is_for_group())
        .then(|| data.qps.get(pkt.bth.dest_qpn))
        .flatten();
    match qp {
        Some(qp) => QpShared::receive(&qp, skb, pkt, looped, counters),
        // The ICRC decides whether this was a packet for no one or a corrupt one.
        None => counters.inc(match pkt.verify_icrc(&skb) {
            true => Counter::DropBadQpn,
            false => Counter::DropIcrc,
        }),
    }
}

/// Hands a multicast packet to every QP attached to its group (its destination address), each
/// its own clone of the skb. The ICRC is checked, and the packet counted as received, once,
/// here; what each member makes of it is counted by each.
fn deliver_multicast(data: &FerroceDevice, skb: SkBuff, mut pkt: RxHeaders, looped: bool) {
    let counters = &data.counters;
    if !pkt.verify_icrc(&skb) {
        return counters.inc(Counter::DropIcrc);
    }
    // Multicast carries UD sends only, to a group.
    if pkt.info.transport != Transport::Ud || !pkt.is_for_group() {
        return counters.inc(Counter::DropBadQpn);
    }
    let members = match data.mcast.members(&pkt.dgid()) {
        Ok(m) => m,
        Err(_) => return counters.inc(Counter::DropNoMem),
    };
    let Some((last, others)) = members.split_last() else {
        return counters.inc(Counter::DropBadQpn);
    };
    pkt.icrc_checked = true;
    counters.inc(Counter::RcvdPkts);
    counters.add(Counter::RcvdBytes, pkt.payload_len as u64);
    // A group's senders get no CNP (one per member would multiply them); the mark counts once.
    if dcqcn::is_ce(pkt.ip()) {
        counters.inc(Counter::NpEcnMarked);
    }
    for qp in others {
        match skb.clone_shared(GFP_ATOMIC) {
            Ok(copy) => QpShared::receive(qp, copy, pkt, looped, counters),
            Err(_) => counters.inc(Counter::DropNoMem),
        }
    }
    QpShared::receive(last, skb, pkt, looped, counters);
}

/// A received packet's headers, copied out of its skb: what is known before the payload is
/// touched.
#[derive(Clone, Copy)]
pub(crate) struct RxHeaders {
    /// The IP header (20 bytes for IPv4, 40 for IPv6), as received.
    ip: [u8; IPV6_HDR_LEN],
    ip_len: usize,
    udp: [u8; UDP_HDR_LEN],
    /// The BTH, as received (the ICRC covers it masked).
    bth_raw: [u8; BTH_LEN],
    pub(crate) bth: Bth,
    pub(crate) info: &'static OpInfo,
    pub(crate) ext: ExtHeaders,
    /// Where the payload starts, from `data` (the UDP header).
    payload_off: usize,
    payload_len: usize,
    /// Where the ICRC starts, from `data`.
    icrc_off: usize,
    /// The ICRC was found right already (a multicast packet, for each of its QPs).
    icrc_checked: bool,
}

impl RxHeaders {
    /// Parses the headers of the packet in `skb`: IP (linear: the stack pulled it), UDP (at
    /// `data`), BTH and extension headers (copied, wherever they lie).
    pub(crate) fn parse(skb: &SkBuff) -> Result<Self, DropReason> {
        let (bytes, udp_off) = skb.network_and_data().ok_or(DropReason::BadHeader)?;
        let ip_bytes = bytes.get(..udp_off).ok_or(DropReason::BadHeader)?;
        // RoCEv2 carries no IPv4 options or IPv6 extension headers: the ICRC covers a
        // fixed-size IP header.
        let ip_len = match ip_bytes.first().map(|b| b >> 4) {
            Some(4) => IPV4_HDR_LEN,
            Some(6) => IPV6_HDR_LEN,
            _ => return Err(DropReason::BadHeader),
        };
        if ip_bytes.len() != ip_len {
            return Err(DropReason::BadHeader);
        }
        let mut ip = [0u8; IPV6_HDR_LEN];
        ip[..ip_len].copy_from_slice(ip_bytes);
        let skb_len = skb.len() as usize;
        // The UDP length is what was sent; anything after it (link padding) is not the packet.
        let mut udp = [0u8; UDP_HDR_LEN];
        skb.copy_bits(0, &mut udp)
            .map_err(|_| DropReason::Truncated)?;
        let udp_len = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
        if udp_len < UDP_HDR_LEN || udp_len > skb_len {
            return Err(DropReason::Truncated);
        }
        let len = udp_len - UDP_HDR_LEN;
        let mut head = [0u8; MAX_HDR_LEN];
        let head_len = len.min(MAX_HDR_LEN);
        skb.copy_bits(UDP_HDR_LEN, &mut head[..head_len])
            .map_err(|_| DropReason::Truncated)?;
        let h: Headers = packet::parse_headers(&head[..head_len], len)?;
        let mut bth_raw = [0u8; BTH_LEN];
        bth_raw.copy_from_slice(&head[..BTH_LEN]);
        Ok(Self {
            ip,
            ip_len,
            udp,
            bth_raw,
            bth: h.bth,
            info: h.info,
            ext: h.ext,
            payload_off: UDP_HDR_LEN + h.hdr_len,
            payload_len: h.payload_len,
            icrc_off: UDP_HDR_LEN + h.icrc_offset(),
            icrc_checked: false,
        })
    }

    /// Whether this is a duplicate RDMA READ request for a QP whose responder expects
    /// `inner`'s PSN: one that asks again for responses, and answers nothing new.
    pub(crate) fn rewinds_read(&self, inner: &crate::qp::QpInner) -> bool {
        self.info.kind == OpKind::ReadRequest && self.bth.psn.before(Psn::new(inner.attr.rq_psn))
    }

    /// The IP header as received.
    pub(crate) fn ip(&self) -> &[u8] {
        &self.ip[..self.ip_len]
    }

    /// Whether it is a multicast packet (to QPN 0xffffff): one of the copies
    /// [`deliver_multicast`] hands to each member of its group, where it was counted.
    pub(crate) fn is_multicast(&self) -> bool {
        self.bth.dest_qpn == MULTICAST_QPN
    }

    /// Whether the destination address is a multicast one.
    pub(crate) fn is_for_group(&self) -> bool {
        crate::ah::is_multicast(&self.dgid())
    }

    /// The destination address as a GID (IPv4-mapped for IPv4).
    pub(crate) fn dgid(&self) -> [u8; 16] {
        self.gid_at(16, 24)
    }

    /// The source address as a GID (IPv4-mapped for IPv4).
    pub(crate) fn sgid(&self) -> [u8; 16] {
        self.gid_at(12, 8)
    }

    /// The address at byte `v4` of an IPv4 header or `v6` of an IPv6 one, as a GID.
    fn gid_at(&self, v4: usize, v6: usize) -> [u8; 16] {
        match self.ip_len {
            IPV4_HDR_LEN => {
                let mut addr = [0u8; 4];
                addr.copy_from_slice(&self.ip[v4..v4 + 4]);
                crate::ah::ipv4_mapped(addr)
            }
            _ => {
                let mut gid = [0u8; 16];
                gid.copy_from_slice(&self.ip[v6..v6 + 16]);
                gid
            }
        }
    }

    /// Whether the ICRC at the end of the packet is right: every byte after the BTH is read
    /// once, piece by piece (the skb must be the one the headers came from).
    pub(crate) fn verify_icrc(&self, skb: &SkBuff) -> bool {
        if self.icrc_checked {
            return true;
        }
        let mut icrc = match self.ip_len {
            IPV4_HDR_LEN => {
                let ip: &[u8; IPV4_HDR_LEN] = match self.ip[..IPV4_HDR_LEN].try_into() {
                    Ok(ip) => ip,
                    Err(_) => return false,
                };
                Icrc::ipv4(ip, &self.udp, &self.bth_raw)
            }
            _ => Icrc::ipv6(&self.ip, &self.udp, &self.bth_raw),
        };
        let from = UDP_HDR_LEN + BTH_LEN;
        let Some(len) = self.icrc_off.checked_sub(from) else {
            return false;
        };
        if skb
            .for_each_piece(from, len, |piece| {
                icrc.update(piece);
                Ok(())
            })
            .is_err()
        {
            return false;
        }
        let mut wire = [0u8; ICRC_LEN];
        skb.copy_bits(self.icrc_off, &mut wire).is_ok() && u32::from_le_bytes(wire) == icrc.finish()
    }
}

/// A packet a QP takes: its headers and, to be read piece by piece, its payload.
pub(crate) struct Packet<'a> {
    pub(crate) hdr: &'a RxHeaders,
    pub(crate) bth: Bth,
    pub(crate) info: &'static OpInfo,
    pub(crate) ext: ExtHeaders,
    pub(crate) payload: Payload<'a>,
}

impl<'a> Packet<'a> {
    pub(crate) fn new(skb: &'a SkBuff, hdr: &'a RxHeaders) -> Self {
        Self {
            hdr,
            bth: hdr.bth,
            info: hdr.info,
            ext: hdr.ext,
            payload: Payload {
                skb,
                off: hdr.payload_off,
                len: hdr.payload_len,
            },
        }
    }
}

/// The payload of a received packet, in its skb: read in place (linearised only if it was
/// shared, see [`deliver`]).
pub(crate) struct Payload<'a> {
    skb: &'a SkBuff,
    off: usize,
    len: usize,
}

impl Payload<'_> {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies the whole payload into `out`, which must be exactly as long: `EINVAL` if not.
    pub(crate) fn copy_to(&self, out: &mut [u8]) -> Result {
        if out.len() != self.len {
            return Err(EINVAL);
        }
        self.for_each(
            |at, piece| {
                out.get_mut(at..at + piece.len())
                    .ok_or(EINVAL)?
                    .copy_from_slice(piece);
                Ok(())
            },
            EINVAL,
        )
    }

    /// Calls `f(offset in the payload, bytes)` for each contiguous piece, in order; the first
    /// error ends the walk and is returned, and `short` if the skb cannot be read to the end.
    /// `f` must not sleep.
    pub(crate) fn for_each<E: Copy>(
        &self,
        mut f: impl FnMut(usize, &[u8]) -> Result<(), E>,
        short: E,
    ) -> Result<(), E> {
        let mut at = 0;
        let mut failed = None;
        let res = self.skb.for_each_piece(self.off, self.len, |piece| {
            if let Err(e) = f(at, piece) {
                failed = Some(e);
                return Err(EINVAL);
            }
            at += piece.len();
            Ok(())
        });
        match (res, failed) {
            (Ok(()), _) => Ok(()),
            (Err(_), Some(e)) => Err(e),
            // The skb could not be read to the end: shorter than its headers said (parsing
            // rules that out), with shared fragments (`deliver` unshares them first), or with
            // a fragment the walk could not map.
            (Err(_), None) => Err(short),
        }
    }
}

/// Why a packet is dropped: a flaw in the packet itself, or no one to take it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reject {
    Packet(DropReason),
    /// The QP refused it.
    Qp(QpDrop),
}

/// Why a QP refuses a valid packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QpDrop {
    /// Not for this QP's transport, or the QP is not in a receiving state.
    BadState,
    /// A UD packet whose Q_Key does not match.
    BadQkey,
    /// No receive WQE posted (UD drops; RC answers with an RNR NAK).
    NoRecvWqe,
    /// No memory to take the receive WQE.
    NoMem,
    /// An RC response for a PSN this QP has not sent.
    BadPsn,
    /// A read response that does not fit where it would land.
    BadLength,
    /// A P_Key that does not admit it to the QP.
    BadPkey,
    /// An RC or UC packet from someone other than the QP's peer, or to another address.
    BadAddress,
}

pub(crate) fn drop_counter(d: Reject) -> Counter {
    match d {
        Reject::Qp(QpDrop::BadState) => Counter::DropBadState,
        Reject::Qp(QpDrop::BadQkey) => Counter::DropBadQkey,
        Reject::Qp(QpDrop::NoRecvWqe) => Counter::DropNoRecvWqe,
        Reject::Qp(QpDrop::NoMem) => Counter::DropNoMem,
        Reject::Qp(QpDrop::BadPsn) => Counter::DropBadPsn,
        Reject::Qp(QpDrop::BadLength) => Counter::DropBadLength,
        Reject::Qp(QpDrop::BadPkey) => Counter::DropBadPkey,
        Reject::Qp(QpDrop::BadAddress) => Counter::DropBadAddress,
        Reject::Packet(r) => match r {
            DropReason::Truncated => Counter::DropTruncated,
            DropReason::BadHeader => Counter::DropBadHeader,
            DropReason::UnknownOpcode => Counter::DropUnknownOpcode,
            DropReason::BadLength => Counter::DropBadLength,
            DropReason::BadIcrc => Counter::DropIcrc,
        },
    }
}

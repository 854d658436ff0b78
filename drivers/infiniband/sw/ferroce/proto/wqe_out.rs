// SPDX-License-Identifier: GPL-2.0

//! Work queue entries a kernel consumer's WRs become: written into a kernel QP's own ring in the
//! layout rdma-core's rxe provider writes (`rdma_user_rxe.h`), so one RC engine, reading them with
//! [`super::wqe::SendWqe`] and [`super::wqe::RecvWqe`], serves user and kernel QPs alike.

use super::wqe::{
    off, sge_off, RegMr, Sge, WrOpcode, RECV_NUM_SGE, RECV_WQE_HEADER, SEND_INLINE,
    SEND_WQE_HEADER, SGE_SIZE,
};

/// Offset of `dma.length` in a receive WQE.
const RECV_LENGTH: usize = 16;

/// The peer memory a send WQE names, or the registration a REG_MR asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Remote {
    /// None: a SEND, or an invalidation.
    None,
    /// A fast registration (`IB_WR_REG_MR`).
    Reg(RegMr),
    /// An RDMA WRITE's or READ's target (`wr.rdma`).
    Rdma { addr: u64, rkey: u32 },
    /// An atomic's word and operands (`wr.atomic`).
    Atomic {
        addr: u64,
        compare_add: u64,
        swap: u64,
        rkey: u32,
    },
}

/// What goes in a send WQE besides its data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SendHeader {
    pub(crate) wr_id: u64,
    pub(crate) opcode: WrOpcode,
    /// `IB_SEND_*`.
    pub(crate) send_flags: u32,
    /// `ex`, as its bytes lie in the WR: immediate data in wire order, or the key to
    /// invalidate in host order.
    pub(crate) ex: [u8; 4],
    pub(crate) remote: Remote,
}

/// Why a WR does not fit its QP's slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TooBig {
    /// More SGEs than the slot holds.
    Sges,
    /// More inline bytes than the slot holds.
    Inline,
}

/// Whether `n` SGEs after a header of `header` bytes fit a slot of `slot` bytes.
fn fits(header: usize, n: usize, slot: usize) -> bool {
    matches!(n.checked_mul(SGE_SIZE).and_then(|b| b.checked_add(header)), Some(end) if end <= slot)
}

fn put(slot: &mut [u8], at: usize, v: &[u8]) {
    if let Some(dst) = slot.get_mut(at..at + v.len()) {
        dst.copy_from_slice(v);
    }
}

fn put_sge(slot: &mut [u8], at: usize, s: &Sge) {
    put(slot, at + sge_off::ADDR, &s.addr.to_ne_bytes());
    put(slot, at + sge_off::LENGTH, &s.len.to_ne_bytes());
    put(slot, at + sge_off::LKEY, &s.lkey.to_ne_bytes());
}

/// Writes the header of a send WQE into `slot` (every byte of it: a reused slot keeps nothing
/// of its last WQE).
fn put_header(slot: &mut [u8], h: &SendHeader) {
    let end = SEND_WQE_HEADER.min(slot.len());
    slot[..end].fill(0);
    put(slot, off::WR_ID, &h.wr_id.to_ne_bytes());
    put(slot, off::OPCODE, &(h.opcode as u32).to_ne_bytes());
    put(slot, off::SEND_FLAGS, &h.send_flags.to_ne_bytes());
    put(slot, off::IMM, &h.ex);
    match h.remote {
        Remote::None => {}
        Remote::Reg(r) => {
            put(slot, off::REG_IOVA, &r.iova.to_ne_bytes());
            put(slot, off::REG_LENGTH, &r.length.to_ne_bytes());
            put(slot, off::REG_KEY, &r.key.to_ne_bytes());
            put(slot, off::REG_ACCESS, &r.access.to_ne_bytes());
            put(slot, off::REG_PAGE_SHIFT, &r.page_shift.to_ne_bytes());
        }
        Remote::Rdma { addr, rkey } => {
            put(slot, off::RDMA_REMOTE_ADDR, &addr.to_ne_bytes());
            put(slot, off::RDMA_RKEY, &rkey.to_ne_bytes());
        }
        Remote::Atomic {
            addr,
            compare_add,
            swap,
            rkey,
        } => {
            put(slot, off::ATOMIC_REMOTE_ADDR, &addr.to_ne_bytes());
            put(slot, off::ATOMIC_COMPARE_ADD, &compare_add.to_ne_bytes());
            put(slot, off::ATOMIC_SWAP, &swap.to_ne_bytes());
            put(slot, off::ATOMIC_RKEY, &rkey.to_ne_bytes());
        }
    }
}

/// Writes a send WQE whose data the SGEs name. The slot must be a whole ring slot.
pub(crate) fn send_with_sges(
    slot: &mut [u8],
    h: &SendHeader,
    sges: impl ExactSizeIterator<Item = Sge>,
) -> Result<(), TooBig> {
    let n = sges.len();
    if !fits(SEND_WQE_HEADER, n, slot.len()) {
        return Err(TooBig::Sges);
    }
    put_header(slot, h);
    let mut total = 0u32;
    for (i, s) in sges.enumerate() {
        put_sge(slot, SEND_WQE_HEADER + i * SGE_SIZE, &s);
        total = total.wrapping_add(s.len);
    }
    // The requester adds the SGEs up itself; the total is for the WQE's readers' sake.
    put(slot, off::DMA_LENGTH, &total.to_ne_bytes());
    // CAST: At most the slot's SGEs, a few dozen.
    put(slot, off::DMA_NUM_SGE, &(n as u32).to_ne_bytes());
    Ok(())
}

/// Writes a send WQE that carries its data inline: `fill` copies `len` bytes into the buffer it
/// is given. `IB_SEND_INLINE` is set.
pub(crate) fn send_inline<E>(
    slot: &mut [u8],
    h: &SendHeader,
    len: usize,
    fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
) -> Result<Result<(), E>, TooBig> {
    let end = SEND_WQE_HEADER
        .checked_add(len)
        .filter(|&e| e <= slot.len())
        .ok_or(TooBig::Inline)?;
    let len32 = u32::try_from(len).map_err(|_| TooBig::Inline)?;
    let h = SendHeader {
        send_flags: h.send_flags | SEND_INLINE,
        ..*h
    };
    put_header(slot, &h);
    put(slot, off::DMA_LENGTH, &len32.to_ne_bytes());
    Ok(fill(&mut slot[SEND_WQE_HEADER..end]))
}

/// Writes a receive WQE. The slot must be a whole ring slot.
pub(crate) fn recv(
    slot: &mut [u8],
    wr_id: u64,
    sges: impl ExactSizeIterator<Item = Sge>,
) -> Result<(), TooBig> {
    let n = sges.len();
    if !fits(RECV_WQE_HEADER, n, slot.len()) {
        return Err(TooBig::Sges);
    }
    slot[..RECV_WQE_HEADER].fill(0);
    put(slot, 0, &wr_id.to_ne_bytes());
    let mut total = 0u32;
    for (i, s) in sges.enumerate() {
        put_sge(slot, RECV_WQE_HEADER + i * SGE_SIZE, &s);
        total = total.wrapping_add(s.len);
    }
    put(slot, RECV_LENGTH, &total.to_ne_bytes());
    // CAST: As above.
    put(slot, RECV_NUM_SGE, &(n as u32).to_ne_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::wqe::{RecvWqe, SendWqe, SEND_SIGNALED};
    use super::*;

    const A: Sge = Sge {
        addr: 0xffff_8880_1234_5000,
        len: 3000,
        lkey: 0x1a2b,
    };
    const B: Sge = Sge {
        addr: 0xffff_8880_0000_0040,
        len: 96,
        lkey: 0x33,
    };

    fn header(opcode: WrOpcode, remote: Remote) -> SendHeader {
        SendHeader {
            wr_id: 0xdead_beef_0000_0001,
            opcode,
            send_flags: SEND_SIGNALED,
            ex: [0xca, 0xfe, 0xf0, 0x0d],
            remote,
        }
    }

    #[test]
    fn send_wqes_read_back_as_written() {
        // Garbage from an earlier WQE must not survive.
        let mut slot = [0xa5u8; SEND_WQE_HEADER + 4 * SGE_SIZE];
        let h = header(WrOpcode::SendWithImm, Remote::None);
        send_with_sges(&mut slot, &h, [A, B].into_iter()).unwrap();
        let w = SendWqe::new(&slot);
        assert_eq!(w.wr_id(), h.wr_id);
        assert_eq!(w.opcode(), Some(WrOpcode::SendWithImm));
        assert_eq!(w.send_flags(), SEND_SIGNALED);
        assert_eq!(w.imm(), 0xcafe_f00d);
        assert_eq!((w.num_sge(), w.length()), (2, 3096));
        assert_eq!((w.sge(0), w.sge(1)), (Some(A), Some(B)));
        assert_eq!(w.rdma_rkey(), 0);
        assert_eq!(w.ud_ah_num(), 0);
    }

    #[test]
    fn remote_fields_land_where_the_requester_reads_them() {
        let mut slot = [0u8; SEND_WQE_HEADER + SGE_SIZE];
        let rdma = Remote::Rdma {
            addr: 0x7000_0000_1000,
            rkey: 0x4455,
        };
        send_with_sges(
            &mut slot,
            &header(WrOpcode::RdmaRead, rdma),
            [A].into_iter(),
        )
        .unwrap();
        let w = SendWqe::new(&slot);
        assert_eq!(
            (w.rdma_remote_addr(), w.rdma_rkey()),
            (0x7000_0000_1000, 0x4455)
        );

        let atomic = Remote::Atomic {
            addr: 0x8008,
            compare_add: 5,
            swap: 9,
            rkey: 0x77,
        };
        let h = header(WrOpcode::AtomicCmpAndSwp, atomic);
        send_with_sges(&mut slot, &h, [A].into_iter()).unwrap();
        let w = SendWqe::new(&slot);
        assert_eq!(
            (
                w.atomic_remote_addr(),
                w.atomic_compare_add(),
                w.atomic_swap(),
                w.atomic_rkey()
            ),
            (0x8008, 5, 9, 0x77)
        );

        // REG_MR: what it registers, read back by the requester.
        let reg = RegMr {
            iova: 0xffff_8880_0000_1040,
            length: 8000,
            key: 0x1234_5601,
            access: 7,
            page_shift: 12,
        };
        send_with_sges(
            &mut slot,
            &header(WrOpcode::RegMr, Remote::Reg(reg)),
            core::iter::empty(),
        )
        .unwrap();
        let w = SendWqe::new(&slot);
        assert_eq!((w.opcode(), w.reg_mr()), (Some(WrOpcode::RegMr), reg));

        // SEND_WITH_INV: the key, in host order, where LOCAL_INV's is.
        let mut h = header(WrOpcode::SendWithInv, Remote::None);
        h.ex = 0x1234_5678u32.to_ne_bytes();
        send_with_sges(&mut slot, &h, core::iter::empty()).unwrap();
        assert_eq!(SendWqe::new(&slot).invalidate_rkey(), 0x1234_5678);
    }

    #[test]
    fn inline_data_follows_the_header() {
        let mut slot = [0u8; SEND_WQE_HEADER + 64];
        let h = header(WrOpcode::Send, Remote::None);
        let r = send_inline(&mut slot, &h, 5, |b| {
            b.copy_from_slice(b"hello");
            Ok::<_, ()>(())
        });
        assert_eq!(r, Ok(Ok(())));
        let w = SendWqe::new(&slot);
        assert_eq!(w.send_flags(), SEND_SIGNALED | SEND_INLINE);
        assert_eq!((w.length(), w.inline_data(5)), (5, Some(&b"hello"[..])));
        assert_eq!(
            send_inline(&mut slot, &h, 65, |_| Ok::<_, ()>(())),
            Err(TooBig::Inline)
        );
    }

    #[test]
    fn too_many_sges_are_refused_before_anything_is_written() {
        let mut slot = [0x11u8; SEND_WQE_HEADER + SGE_SIZE];
        let h = header(WrOpcode::Send, Remote::None);
        assert_eq!(
            send_with_sges(&mut slot, &h, [A, B].into_iter()),
            Err(TooBig::Sges)
        );
        assert!(slot.iter().all(|&b| b == 0x11));
        let mut slot = [0u8; RECV_WQE_HEADER + SGE_SIZE];
        assert_eq!(recv(&mut slot, 1, [A, B].into_iter()), Err(TooBig::Sges));
    }

    #[test]
    fn recv_wqes_read_back_as_written() {
        let mut slot = [0x5au8; RECV_WQE_HEADER + 2 * SGE_SIZE];
        recv(&mut slot, 77, [B].into_iter()).unwrap();
        let w = RecvWqe::new(&slot);
        assert_eq!((w.wr_id(), w.num_sge(), w.sge(0)), (77, 1, Some(B)));
        assert_eq!(&slot[RECV_LENGTH..RECV_LENGTH + 4], &96u32.to_ne_bytes());
    }
}

// SPDX-License-Identifier: GPL-2.0

//! Scatter/gather lists against the MR table: each SGE a WQE names is checked (key, PD, access,
//! bounds) before its memory is touched, and a bad one fails only its own WR.

use crate::{
    mr::{MrRef, MrTable},
    net::recv::Payload,
    proto::wqe::{access, Sge, WcStatus},
};

/// Where an SGE's bytes start in its region, checked against the region's key and PD.
fn locate(mrs: &MrTable, pd: usize, sge: &Sge, write: bool) -> Result<(MrRef, usize), WcStatus> {
    let mr = mrs.get(sge.lkey).ok_or(WcStatus::LocProtErr)?;
    if mr.pd != pd || (write && mr.access & access::LOCAL_WRITE == 0) {
        return Err(WcStatus::LocProtErr);
    }
    let start = sge.addr.checked_sub(mr.iova).ok_or(WcStatus::LocProtErr)?;
    let start = usize::try_from(start).map_err(|_| WcStatus::LocProtErr)?;
    Ok((mr, start))
}

/// Checks every SGE (key, PD, bounds, and local write access for `write`) before a message
/// starts, and returns their total length. `LocLenErr` if an SGE lies outside its WQE.
pub(crate) fn check(
    mrs: &MrTable,
    pd: usize,
    sges: impl Iterator<Item = Option<Sge>>,
    write: bool,
) -> Result<u64, WcStatus> {
    let mut total = 0u64;
    for sge in sges {
        let sge = sge.ok_or(WcStatus::LocLenErr)?;
        if sge.len == 0 {
            continue;
        }
        let (mr, start) = locate(mrs, pd, &sge, write)?;
        match start.checked_add(sge.len as usize) {
            Some(end) if end <= mr.mem.len() => total += u64::from(sge.len),
            _ => return Err(WcStatus::LocProtErr),
        }
    }
    Ok(total)
}

/// Fills `out` from the SGEs, which must add up to exactly its length.
pub(crate) fn gather(
    mrs: &MrTable,
    pd: usize,
    sges: impl Iterator<Item = Option<Sge>>,
    out: &mut [u8],
) -> Result<(), WcStatus> {
    let mut done = 0usize;
    for sge in sges {
        let sge = sge.ok_or(WcStatus::LocLenErr)?;
        let dst = done
            .checked_add(sge.len as usize)
            .and_then(|end| out.get_mut(done..end))
            .ok_or(WcStatus::LocLenErr)?;
        if dst.is_empty() {
            continue;
        }
        let (mr, start) = locate(mrs, pd, &sge, false)?;
        mr.mem.read(start, dst).map_err(|_| WcStatus::LocProtErr)?;
        done += sge.len as usize;
    }
    if done != out.len() {
        return Err(WcStatus::LocLenErr);
    }
    Ok(())
}

/// Walks the SGEs from byte `offset` on for `len` bytes, calling `copy(region, region offset,
/// message range)` for each piece, after checking its key, PD and (for `write`) access.
/// `LocLenErr` if the SGEs end first.
fn walk(
    mrs: &MrTable,
    pd: usize,
    sges: impl Iterator<Item = Option<Sge>>,
    mut offset: usize,
    len: usize,
    write: bool,
    mut copy: impl FnMut(&MrRef, usize, core::ops::Range<usize>) -> Result<(), WcStatus>,
) -> Result<(), WcStatus> {
    let mut done = 0;
    for sge in sges {
        if done == len {
            return Ok(());
        }
        let sge = sge.ok_or(WcStatus::LocLenErr)?;
        let sge_len = sge.len as usize;
        if offset >= sge_len {
            offset -= sge_len;
            continue;
        }
        let n = (sge_len - offset).min(len - done);
        let (mr, start) = locate(mrs, pd, &sge, write)?;
        let at = start.checked_add(offset).ok_or(WcStatus::LocProtErr)?;
        copy(&mr, at, done..done + n)?;
        done += n;
        offset = 0;
    }
    if done == len {
        Ok(())
    } else {
        Err(WcStatus::LocLenErr)
    }
}

/// Fills `out` from the SGEs' bytes starting `offset` bytes into them (one packet of a message).
/// `LocLenErr` if the SGEs end first.
pub(crate) fn gather_at(
    mrs: &MrTable,
    pd: usize,
    sges: impl Iterator<Item = Option<Sge>>,
    offset: usize,
    out: &mut [u8],
) -> Result<(), WcStatus> {
    let len = out.len();
    walk(mrs, pd, sges, offset, len, false, |mr, at, range| {
        mr.mem
            .read(at, &mut out[range])
            .map_err(|_| WcStatus::LocProtErr)
    })
}

/// Writes `data` into the SGEs, starting `offset` bytes into them. `LocLenErr` if the SGEs
/// end first.
pub(crate) fn scatter_bytes(
    mrs: &MrTable,
    pd: usize,
    sges: impl Iterator<Item = Option<Sge>>,
    offset: usize,
    data: &[u8],
) -> Result<(), WcStatus> {
    walk(mrs, pd, sges, offset, data.len(), true, |mr, at, range| {
        mr.mem
            .write(at, &data[range])
            .map_err(|_| WcStatus::LocProtErr)
    })
}

/// Writes a packet's payload into the SGEs, starting `offset` bytes into them (a message
/// arrives packet by packet), straight from the skb's pieces. `LocLenErr` if the SGEs end
/// first.
pub(crate) fn scatter(
    mrs: &MrTable,
    pd: usize,
    sges: impl Iterator<Item = Option<Sge>> + Clone,
    offset: usize,
    data: &Payload<'_>,
) -> Result<(), WcStatus> {
    data.for_each(
        |at, piece| scatter_bytes(mrs, pd, sges.clone(), offset + at, piece),
        WcStatus::LocLenErr,
    )
}

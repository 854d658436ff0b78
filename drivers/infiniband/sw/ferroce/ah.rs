// SPDX-License-Identifier: GPL-2.0

//! Address handles, numbered so that UD WQEs name them (`ah_num`) as rdma-core's rxe provider
//! expects; the send path looks the path up here instead of trusting one in the WQE.

use crate::{
    device::Ferroce,
    limits,
    proto::build::{flow_label, udp_sport, Ipv4Path, Ipv6Path, Path},
};
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::{
    new_spinlock_irq,
    prelude::*,
    rbtree::RBTree,
    rdma::{pd::Pd, qp::AhAttr, udata::Udata},
    sync::{Arc, SpinLockIrq},
};

/// `struct rxe_create_ah_resp`: `ah_num`, reserved.
const CREATE_AH_RESP_SIZE: usize = 8;

/// Where packets to a peer go, by GIDs: IPv4-mapped GIDs are IPv4 addresses.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Av {
    pub(crate) sgid: [u8; 16],
    pub(crate) dgid: [u8; 16],
    pub(crate) tclass: u8,
    /// 0 for the default, 64.
    pub(crate) hop_limit: u8,
    /// 0 for one derived from the QPNs.
    pub(crate) flow_label: u32,
}

impl Av {
    /// The path from QP `lqpn` to QP `rqpn`; `None` if one GID is IPv4 and the other not.
    pub(crate) fn path(&self, lqpn: u32, rqpn: u32) -> Option<Path> {
        let fl = match self.flow_label & 0xf_ffff {
            0 => flow_label(lqpn, rqpn),
            fl => fl,
        };
        let hop_limit = match self.hop_limit {
            0 => 64,
            h => h,
        };
        match (mapped_ipv4(&self.sgid), mapped_ipv4(&self.dgid)) {
            (Some(saddr), Some(daddr)) => Some(Path::V4(Ipv4Path {
                saddr,
                daddr,
                tos: self.tclass,
                ttl: hop_limit,
                sport: udp_sport(fl),
            })),
            (None, None) => Some(Path::V6(Ipv6Path {
                saddr: self.sgid,
                daddr: self.dgid,
                tclass: self.tclass,
                hop_limit,
                flow_label: fl,
                sport: udp_sport(fl),
            })),
            _ => None,
        }
    }
}

/// The IPv4-mapped GID of an IPv4 address.
pub(crate) fn ipv4_mapped(addr: [u8; 4]) -> [u8; 16] {
    let mut gid = [0u8; 16];
    gid[10] = 0xff;
    gid[11] = 0xff;
    gid[12..].copy_from_slice(&addr);
    gid
}

/// What the send path needs of an AH.
pub(crate) struct AhState {
    /// The PD it belongs to ([`Pd::id`]); a QP of another PD may not use it.
    pub(crate) pd: usize,
    pub(crate) av: Av,
}

/// Whether `gid` is a multicast address: IPv4-mapped 224.0.0.0/4, or IPv6 ff00::/8.
pub(crate) fn is_multicast(gid: &[u8; 16]) -> bool {
    match mapped_ipv4(gid) {
        Some(addr) => addr[0] & 0xf0 == 0xe0,
        None => gid[0] == 0xff,
    }
}

/// The IPv4 address in an IPv4-mapped GID (`::ffff:a.b.c.d`).
pub(crate) fn mapped_ipv4(gid: &[u8; 16]) -> Option<[u8; 4]> {
    let (prefix, addr) = gid.split_at(12);
    (prefix == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]).then(|| addr.try_into().ok())?
}

/// A device's AHs by number (1 ..= max_ah). Its lock keeps interrupts off: UD sends look AHs
/// up under their QP's lock, which softirqs take, and AHs are created and destroyed from any
/// context (the CM does it under its own spinlocks).
#[pin_data]
pub(crate) struct AhTable {
    #[pin]
    ahs: SpinLockIrq<RBTree<u32, Arc<AhState>>>,
    cursor: AtomicU32,
}

impl AhTable {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            ahs <- new_spinlock_irq!(RBTree::new(), "ferroce::AhTable::ahs"),
            cursor: AtomicU32::new(0),
        })
    }

    /// Stores `state` under a free number; returns it. Does not sleep.
    fn insert(&self, state: Arc<AhState>) -> Result<u32> {
        let max = limits::DEVICE_LIMITS.max_ah;
        let mut ahs = self.ahs.lock();
        let start = self.cursor.fetch_add(1, Ordering::Relaxed);
        let num = (0..max)
            .map(|i| start.wrapping_add(i) % max + 1)
            .find(|n| ahs.get(n).is_none())
            .ok_or(ENOMEM)?;
        ahs.try_create_and_insert(num, state, GFP_ATOMIC)?;
        Ok(num)
    }

    /// The AH numbered `num`, if it exists. Any context.
    pub(crate) fn get(&self, num: u32) -> Option<Arc<AhState>> {
        self.ahs.lock().get(&num).cloned()
    }

    fn remove(&self, num: u32) {
        // Freed after the lock (the last reference may be this one; freeing does not sleep).
        let removed = self.ahs.lock().remove(&num);
        drop(removed);
    }
}

/// The driver data of one AH: its number in the device's table.
pub(crate) struct FerroceAh {
    table: Arc<AhTable>,
    num: u32,
    state: Arc<AhState>,
    /// As created, for `rdma_query_ah`.
    attr: AhAttr,
}

impl FerroceAh {
    /// What the send path needs of this AH.
    pub(crate) fn state(&self) -> Arc<AhState> {
        self.state.clone()
    }

    /// The attributes it was created with.
    pub(crate) fn attr(&self) -> AhAttr {
        self.attr
    }
}

impl FerroceAh {
    pub(crate) fn create(
        pd: &Pd<Ferroce>,
        attr: &AhAttr,
        udata: Option<&mut Udata<'_>>,
    ) -> Result<impl PinInit<Self, Error>> {
        if !attr.roce_v2 {
            return Err(EINVAL);
        }
        let av = Av {
            sgid: attr.sgid,
            dgid: attr.dgid,
            tclass: attr.traffic_class,
            hop_limit: attr.hop_limit,
            flow_label: attr.flow_label & 0xf_ffff,
        };
        if av.path(0, 0).is_none() {
            return Err(EINVAL);
        }
        let table = pd.device().data().ahs.clone();
        // Kernel consumers (the CM) create AHs under spinlocks: nothing here may sleep.
        let state = Arc::new(AhState { pd: pd.id(), av }, GFP_ATOMIC)?;
        let num = table.insert(state.clone())?;
        let this = Self {
            table,
            num,
            state,
            attr: *attr,
        };
        if let Some(udata) = udata {
            let mut resp = [0u8; CREATE_AH_RESP_SIZE];
            resp[..4].copy_from_slice(&num.to_ne_bytes());
            // On failure `this` drops and frees the number.
            udata.write(&resp)?;
        }
        Ok(Ok::<_, Error>(this))
    }
}

impl Drop for FerroceAh {
    fn drop(&mut self) {
        self.table.remove(self.num);
    }
}

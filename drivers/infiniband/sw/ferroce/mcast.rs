// SPDX-License-Identifier: GPL-2.0

//! Multicast groups: UD QPs attached to a group's GID each receive the datagrams sent to it.
//!
//! A device keeps its groups by GID. Attaching and detaching (process context, one at a time)
//! change a group's members under a short softirq-off lock; the receive path copies the member
//! list out under that lock and delivers outside it, one clone of the skb per member. A group's
//! first member joins it on the netdev (IGMP or MLD, and the link-layer address filter), so
//! that its packets reach the host; its last one leaves.

use crate::{
    ah::{is_multicast, mapped_ipv4},
    limits::DEVICE_LIMITS,
    qp::QpShared,
};
use kernel::{
    net::{ipv4, ipv6, netdevice::NetDevice},
    new_mutex, new_spinlock_bh,
    prelude::*,
    rbtree::{RBTree, RBTreeNode, RBTreeNodeReservation},
    rdma::qp::QpType,
    sync::{Arc, Mutex, SpinLockBh},
};

/// A group's GID: an IPv4-mapped or IPv6 multicast address.
type Gid = [u8; 16];

/// The netdev's membership of a group.
enum Membership {
    V4(#[expect(dead_code, reason = "held for its Drop")] ipv4::Membership),
    V6(#[expect(dead_code, reason = "held for its Drop")] ipv6::Membership),
}

impl Membership {
    /// Joins `gid` on `netdev`. Sleeps.
    fn join(netdev: &NetDevice, gid: &Gid) -> Result<Self> {
        match mapped_ipv4(gid) {
            Some(addr) => ipv4::Membership::join(netdev, addr).map(Self::V4),
            None => ipv6::Membership::join(netdev, *gid).map(Self::V6),
        }
    }
}

/// What attaching and detaching keep: the netdev's memberships and the counts the limits bound.
struct Control {
    joined: RBTree<Gid, Membership>,
    groups: u32,
    attachments: u32,
}

/// A QP in a group, and how many times it was attached: the core counts every attach that
/// names another MLID (which RoCE ignores), and expects as many detaches.
#[derive(Clone)]
struct Member {
    qp: Arc<QpShared>,
    attached: u32,
}

/// A device's multicast groups.
#[pin_data]
pub(crate) struct McastTable {
    /// Serialises attaching and detaching, which may sleep (joining and leaving do).
    #[pin]
    control: Mutex<Control>,
    /// Each group's members, for the receive path.
    #[pin]
    members: SpinLockBh<RBTree<Gid, KVec<Member>>>,
}

impl McastTable {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            control <- new_mutex!(Control {
                joined: RBTree::new(),
                groups: 0,
                attachments: 0,
            }),
            members <- new_spinlock_bh!(RBTree::new(), "ferroce::McastTable::members"),
        })
    }

    /// Attaches the UD QP `qp` to the group `gid`, joining it on `netdev` if it is the first
    /// member; attaching it again only counts. `ENOMEM` past the device's limits. Sleeps.
    pub(crate) fn attach(&self, netdev: &NetDevice, qp: &Arc<QpShared>, gid: &Gid) -> Result {
        if qp.qp_type() != QpType::Ud || !is_multicast(gid) {
            return Err(EINVAL);
        }
        let mut ctl = self.control.lock();
        if ctl.attachments >= DEVICE_LIMITS.max_total_mcast_qp_attach {
            return Err(ENOMEM);
        }
        let count = {
            let mut members = self.members.lock();
            match members.get_mut(gid) {
                Some(list) => match list.iter_mut().find(|m| Arc::ptr_eq(&m.qp, qp)) {
                    Some(m) => {
                        m.attached += 1;
                        drop(members);
                        ctl.attachments += 1;
                        return Ok(());
                    }
                    None => Some(list.len()),
                },
                None => None,
            }
        };
        let member = Member {
            qp: qp.clone(),
            attached: 1,
        };
        match count {
            Some(n) => {
                if n >= DEVICE_LIMITS.max_mcast_qp_attach as usize {
                    return Err(ENOMEM);
                }
                // Only attaching grows a list, and it is serialised: room made now is there
                // under the lock.
                let mut spare = KVec::with_capacity(n + 1, GFP_KERNEL)?;
                let mut members = self.members.lock();
                let list = members.get_mut(gid).ok_or(EINVAL)?;
                if list.capacity() > n {
                    list.push_within_capacity(member).map_err(|_| ENOMEM)?;
                } else {
                    spare.extend_from_slice(list, GFP_ATOMIC)?;
                    spare.push_within_capacity(member).map_err(|_| ENOMEM)?;
                    core::mem::swap(list, &mut spare);
                }
                drop(members);
                // The old list's references go here, not under the lock.
                drop(spare);
            }
            None => {
                if ctl.groups >= DEVICE_LIMITS.max_mcast_grp {
                    return Err(ENOMEM);
                }
                let mut list = KVec::with_capacity(4, GFP_KERNEL)?;
                list.push_within_capacity(member).map_err(|_| ENOMEM)?;
                let node = RBTreeNode::new(*gid, list, GFP_KERNEL)?;
                // Allocated before the join: nothing fails after it.
                let slot = RBTreeNodeReservation::new(GFP_KERNEL)?;
                ctl.joined
                    .insert(slot.into_node(*gid, Membership::join(netdev, gid)?));
                self.members.lock().insert(node);
                ctl.groups += 1;
            }
        }
        ctl.attachments += 1;
        Ok(())
    }

    /// Undoes one attach of `qp` to the group `gid`; the last one takes it out of the group,
    /// and the group's last member leaves it on the netdev. `EINVAL` if it was not attached.
    /// Sleeps; allocates nothing, so it cannot fail for an attached QP (the core destroys no
    /// QP before every attach is undone).
    pub(crate) fn detach(&self, qp: &Arc<QpShared>, gid: &Gid) -> Result {
        let mut ctl = self.control.lock();
        let (gone, emptied) = {
            let mut members = self.members.lock();
            let list = members.get_mut(gid).ok_or(EINVAL)?;
            let at = list
                .iter()
                .position(|m| Arc::ptr_eq(&m.qp, qp))
                .ok_or(EINVAL)?;
            if list[at].attached > 1 {
                list[at].attached -= 1;
                (None, None)
            } else {
                let gone = list.remove(at).map_err(|_| EINVAL)?;
                let emptied = list.is_empty().then(|| members.remove(gid)).flatten();
                (Some(gone), emptied)
            }
        };
        drop(gone);
        ctl.attachments -= 1;
        let left = if emptied.is_some() {
            ctl.groups -= 1;
            ctl.joined.remove(gid)
        } else {
            None
        };
        drop(ctl);
        drop(emptied);
        // Leaving takes RTNL: after our own lock.
        drop(left);
        Ok(())
    }

    /// The QPs of the group `gid` (none if there is no such group); `ENOMEM` if there is no
    /// memory to list them. Any context.
    pub(crate) fn members(&self, gid: &Gid) -> Result<KVec<Arc<QpShared>>> {
        let members = self.members.lock();
        let Some(list) = members.get(gid) else {
            return Ok(KVec::new());
        };
        let mut out = KVec::with_capacity(list.len(), GFP_ATOMIC)?;
        for m in list.iter() {
            out.push_within_capacity(m.qp.clone()).map_err(|_| ENOMEM)?;
        }
        Ok(out)
    }
}

// SPDX-License-Identifier: GPL-2.0

//! Socket buffers (`struct sk_buff`).
//!
//! C header: [`include/linux/skbuff.h`](srctree/include/linux/skbuff.h)

use super::netdevice::NetDevice;
use crate::{
    bindings,
    error::to_result,
    prelude::*,
    time::{Instant, Monotonic},
    types::Opaque,
};
use core::ptr::NonNull;

/// What `ip_local_out` or `ip6_local_out` returned, as `net_xmit_eval` reads it: an error, or
/// `ENOBUFS` if the packet was dropped as it was queued (`NET_XMIT_DROP`), so that the sender
/// can count it; a congestion notice (`NET_XMIT_CN`) means it was queued.
pub(crate) fn local_out_result(ret: c_int) -> Result {
    if ret < 0 {
        Err(Error::from_errno(ret))
    } else if ret == 0 || ret as u32 == bindings::NET_XMIT_CN {
        Ok(())
    } else {
        Err(ENOBUFS)
    }
}

/// An owned socket buffer; dropping it frees it as a drop (`kfree_skb`), [`SkBuff::consume`]
/// frees it as consumed.
///
/// Clones ([`SkBuff::clone_shared`]) share the packet's data: nothing here writes to the data
/// of an skb it did not build, and an accessor that would must unshare it first.
///
/// # Invariants
///
/// The pointer is a valid `sk_buff` that this object exclusively owns (its header; the data
/// may be shared with clones).
pub struct SkBuff(NonNull<bindings::sk_buff>);

impl SkBuff {
    /// Takes ownership of `skb`.
    ///
    /// # Safety
    ///
    /// `skb` is valid and the caller hands over its reference.
    pub unsafe fn from_raw(skb: NonNull<bindings::sk_buff>) -> Self {
        // INVARIANT: Per the safety requirement.
        Self(skb)
    }

    fn as_raw(&self) -> *mut bindings::sk_buff {
        self.0.as_ptr()
    }

    /// The skb, for a change the caller's `&mut` makes exclusive.
    pub(crate) fn as_raw_mut(&mut self) -> *mut bindings::sk_buff {
        self.0.as_ptr()
    }

    /// Gives up ownership, for a call that takes the skb.
    pub(crate) fn into_raw(self) -> *mut bindings::sk_buff {
        let skb = self.as_raw();
        core::mem::forget(self);
        skb
    }

    /// A fresh skb holding the `len` bytes `fill` writes (a whole IP packet, its network
    /// header at the start), with headroom for `dev`'s link-layer header. `gfp` is
    /// [`GFP_ATOMIC`] where the caller may not sleep.
    pub fn new_packet(
        dev: &NetDevice,
        len: usize,
        gfp: crate::alloc::Flags,
        fill: impl FnOnce(&mut [u8]) -> Result,
    ) -> Result<Self> {
        // LL_RESERVED_SPACE(): room for the link-layer header, aligned as the stack expects.
        // SAFETY: `dev` is valid for the call.
        let headroom = unsafe {
            let d = dev.as_raw();
            let hh = usize::from((*d).hard_header_len) + usize::from((*d).needed_headroom);
            (hh & !(bindings::HH_DATA_MOD as usize - 1)) + bindings::HH_DATA_MOD as usize
        };
        let total = u32::try_from(headroom + len).map_err(|_| EMSGSIZE)?;
        // SAFETY: Plain allocation; NULL on failure.
        let skb = unsafe { bindings::__alloc_skb(total, gfp.as_raw(), 0, bindings::NUMA_NO_NODE) };
        // INVARIANT: A fresh skb is ours alone; on an early return `drop` frees it.
        let this = Self(NonNull::new(skb).ok_or(ENOMEM)?);
        // SAFETY: We own the skb, which has `total` bytes of room.
        let data = unsafe {
            bindings::skb_reserve(skb, headroom as c_int);
            // CAST: `len` fit in `total` above.
            let data = bindings::skb_put(skb, len as c_uint).cast::<u8>();
            core::ptr::write_bytes(data, 0, len);
            bindings::skb_reset_network_header(skb);
            data
        };
        // SAFETY: `skb_put` returned `len` bytes of the linear area, which we own.
        fill(unsafe { core::slice::from_raw_parts_mut(data, len) })?;
        Ok(this)
    }

    /// Moves `data` on by `len` bytes of the linear area (past a header, say).
    pub fn pull(&mut self, len: usize) -> Result {
        let skb = self.as_raw();
        // SAFETY: By the type invariant we own the skb.
        if len > unsafe { bindings::skb_headlen(skb) } as usize {
            return Err(EINVAL);
        }
        // CAST: Checked against the linear length, a `u32`.
        // SAFETY: As above; `len` bytes of the linear area are there to pull.
        unsafe { bindings::skb_pull(skb, len as c_uint) };
        Ok(())
    }

    /// Another skb for the same packet (`skb_clone`): its own header and offsets, the data
    /// shared (nothing here writes to received data in place). `ENOMEM` if there is no memory.
    pub fn clone_shared(&self, gfp: crate::alloc::Flags) -> Result<Self> {
        // SAFETY: By the type invariant the skb is valid and its header ours: `skb_clone` also
        // marks it cloned, which no other thread sees (`SkBuff` is not `Sync`). The clone is a
        // new skb of ours.
        let skb = unsafe { bindings::skb_clone(self.as_raw(), gfp.as_raw()) };
        // INVARIANT: A fresh clone that only we own.
        NonNull::new(skb).map(Self).ok_or(ENOMEM)
    }

    /// Total length of the data, from `data` on, including paged fragments.
    pub fn len(&self) -> u32 {
        // SAFETY: By the type invariant the skb is valid.
        unsafe { (*self.as_raw()).len }
    }

    /// Whether the skb holds no data.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The device the packet arrived on (or leaves by), if any.
    pub fn dev(&self) -> Option<&NetDevice> {
        // SAFETY: By the type invariant the skb is valid. A received skb holds no device
        // reference, but the device cannot finish unregistering while the RX path that owns the
        // skb runs (it is under RCU), and a `SkBuff` does not outlive that path's callee.
        let dev = unsafe {
            (*self.as_raw())
                .__bindgen_anon_1
                .__bindgen_anon_1
                .__bindgen_anon_1
                .dev
        };
        // SAFETY: As above.
        NonNull::new(dev).map(|d| unsafe { NetDevice::from_raw(d.as_ptr()) })
    }

    /// Moves all data into the linear area, so that [`Self::network_and_data`] sees it all.
    pub fn linearize(&mut self) -> Result {
        // SAFETY: By the type invariant we own the skb.
        to_result(unsafe { bindings::skb_linearize(self.as_raw()) })
    }

    /// Whether page fragments of the skb, or of an skb on its fragment list, may be changed by
    /// someone else while it is read: pages of a file or a process that a sender spliced into
    /// it (`SKBFL_SHARED_FRAG`).
    pub fn has_shared_frags(&self) -> bool {
        // SAFETY: By the type invariant the skb is valid, and so is its fragment list, which
        // nobody changes while we own it; the call reads their flags.
        unsafe { bindings::skb_walk_has_shared_frag(self.as_raw()) }
    }

    /// Makes the skb's bytes its own: shared fragments (see [`Self::has_shared_frags`]) are
    /// copied into the linear area and released. `ENOMEM` if there is no memory for them.
    pub fn unshare_frags(&mut self) -> Result {
        if self.has_shared_frags() {
            self.linearize()?;
        }
        Ok(())
    }

    /// Copies `out.len()` bytes from `offset` bytes after `data` into `out`, wherever they lie
    /// (linear area, page fragments or fragment list). `EFAULT` if the skb is shorter.
    pub fn copy_bits(&self, offset: usize, out: &mut [u8]) -> Result {
        let offset = c_int::try_from(offset).map_err(|_| EFAULT)?;
        let len = c_int::try_from(out.len()).map_err(|_| EFAULT)?;
        // SAFETY: By the type invariant the skb is valid; `out` has room for `len` bytes, and
        // `skb_copy_bits` checks the range against the skb.
        to_result(unsafe {
            bindings::skb_copy_bits(self.as_raw(), offset, out.as_mut_ptr().cast(), len)
        })
        .map_err(|_| EFAULT)
    }

    /// Calls `f` with the bytes from `offset` to `offset + len` (after `data`), in order, one
    /// contiguous piece at a time, without copying them: the way to read a non-linear skb.
    /// `EFAULT` if the skb is shorter or its bytes cannot be read (device memory); `f`'s error
    /// ends the walk. `f` must not sleep. `EINVAL` if its fragments are shared
    /// ([`Self::unshare_frags`] makes them its own): a reference to bytes that someone may
    /// change meanwhile would not be sound.
    pub fn for_each_piece(
        &self,
        offset: usize,
        len: usize,
        mut f: impl FnMut(&[u8]) -> Result,
    ) -> Result {
        if self.has_shared_frags() {
            return Err(EINVAL);
        }
        let end = offset.checked_add(len).ok_or(EFAULT)?;
        if end > self.len() as usize {
            return Err(EFAULT);
        }
        let from = u32::try_from(offset).map_err(|_| EFAULT)?;
        let to = u32::try_from(end).map_err(|_| EFAULT)?;
        // SAFETY: All-zero is a valid state for `skb_prepare_seq_read` to initialise.
        let mut st: bindings::skb_seq_state = unsafe { core::mem::zeroed() };
        // SAFETY: The skb is valid and not changed while we walk it (we own it).
        unsafe { bindings::skb_prepare_seq_read(self.as_raw(), from, to, &mut st) };
        let mut done = 0u32;
        let res = loop {
            let mut data: *const u8 = core::ptr::null();
            // SAFETY: `st` was prepared above; `data` receives a pointer into the skb.
            let n = unsafe { bindings::skb_seq_read(done, &mut data, &mut st) };
            if n == 0 {
                break Ok(());
            }
            // It hands out whole blocks: the last may run past `to`.
            let n = n.min(to - from - done);
            // SAFETY: `skb_seq_read` mapped at least `n` bytes at `data`; they stay mapped until
            // the next call or the abort below, and `f` does not outlive this iteration. No
            // fragment is shared (checked above), so nobody changes them meanwhile.
            let piece = unsafe { core::slice::from_raw_parts(data, n as usize) };
            if let Err(e) = f(piece) {
                break Err(e);
            }
            done += n;
        };
        // SAFETY: Unmaps what the walk may still hold; harmless after a complete walk.
        unsafe { bindings::skb_abort_seq_read(&mut st) };
        // The walk ends early at memory it cannot map (device or unreadable pages).
        match res {
            Ok(()) if done != to - from => Err(EFAULT),
            res => res,
        }
    }

    /// Returns the bytes from the network header to the end of the linear area, and the offset
    /// of `data` within them. `None` if the network header lies after `data` (or is unset:
    /// its `~0` offset puts it beyond the buffer).
    pub fn network_and_data(&self) -> Option<(&[u8], usize)> {
        let skb = self.as_raw();
        // SAFETY: By the type invariant the skb is valid; the header pointers and `headlen`
        // describe its linear area, which stays put while we own it and nobody else writes it.
        unsafe {
            let net = bindings::skb_network_header(skb);
            let data = (*skb).data;
            // Integer math: an unset header lies outside the buffer, where pointer offsets
            // would be undefined.
            let before = (data as usize).checked_sub(net as usize)?;
            if before > (data as usize).wrapping_sub((*skb).head as usize) {
                return None;
            }
            let headlen = bindings::skb_headlen(skb) as usize;
            Some((core::slice::from_raw_parts(net, before + headlen), before))
        }
    }

    /// Asks that the packet leave no earlier than `at` (Earliest Departure Time): a qdisc that
    /// honours it (`fq`) holds it until then; any other sends it at once.
    pub fn set_departure(&mut self, at: Instant<Monotonic>) {
        // SAFETY: We own the skb.
        unsafe { bindings::skb_set_delivery_time_mono(self.as_raw(), at.as_nanos()) };
    }

    /// Sends a whole IP packet that a route's `attach` routed, in the namespace of the device
    /// the route leaves by. `EINVAL` (and the skb is dropped) if it carries no route; `ENOBUFS`
    /// if a qdisc dropped it (see [`local_out_result`]).
    pub fn send_routed(self) -> Result {
        let skb = self.into_raw();
        // SAFETY: We own `skb`. Its route holds its device, whose namespace outlives it; the
        // stack takes the skb whatever it returns.
        let ret = unsafe {
            let dst = bindings::skb_dst(skb);
            if dst.is_null() {
                bindings::kfree_skb(skb);
                return Err(EINVAL);
            }
            let net = bindings::dev_net((*dst).__bindgen_anon_1.dev);
            let proto = u16::from_be((*skb).__bindgen_anon_4.headers.as_ref().protocol);
            match u32::from(proto) {
                bindings::ETH_P_IP => bindings::ip_local_out(net, core::ptr::null_mut(), skb),
                #[cfg(CONFIG_IPV6)]
                bindings::ETH_P_IPV6 => bindings::ip6_local_out(net, core::ptr::null_mut(), skb),
                _ => {
                    bindings::kfree_skb(skb);
                    return Err(EINVAL);
                }
            }
        };
        local_out_result(ret)
    }

    /// Frees the skb as consumed: it was delivered, not dropped.
    pub fn consume(self) {
        let skb = self.as_raw();
        core::mem::forget(self);
        // SAFETY: We owned the skb and give it up.
        unsafe { bindings::consume_skb(skb) };
    }
}

impl Drop for SkBuff {
    fn drop(&mut self) {
        // SAFETY: By the type invariant we own the skb.
        unsafe { bindings::kfree_skb(self.as_raw()) };
    }
}

// Not `Send`: `dev()` relies on the receive path that handed the skb over still running. To
// carry an skb to another context, use an `SkbQueue`, which forgets the device.

/// A queue of socket buffers (`struct sk_buff_head`), usable from any context: it carries
/// received packets from softirq to process context.
#[pin_data(PinnedDrop)]
pub struct SkbQueue {
    #[pin]
    head: Opaque<bindings::sk_buff_head>,
}

// SAFETY: The queue's own lock (taken with interrupts off) serialises pushes and pops, and an skb
// in it has no ties to the context that queued it (see `push`).
unsafe impl Send for SkbQueue {}
// SAFETY: As above.
unsafe impl Sync for SkbQueue {}

impl SkbQueue {
    /// An empty queue.
    pub fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `skb_queue_head_init` initialises the list and its lock in place.
            head <- Opaque::ffi_init(|h| unsafe { bindings::skb_queue_head_init(h) }),
        })
    }

    /// Takes `skb` for a queue: its device and route are dropped, both only borrowed from the
    /// receive path, which the queued skb outlives.
    fn detach(skb: SkBuff) -> *mut bindings::sk_buff {
        let raw = skb.into_raw();
        // SAFETY: We own `raw`; clearing the borrowed device and dropping the route leave an
        // skb that holds no reference it does not own.
        unsafe {
            (*raw)
                .__bindgen_anon_1
                .__bindgen_anon_1
                .__bindgen_anon_1
                .dev = core::ptr::null_mut();
            bindings::skb_dst_drop(raw);
        }
        raw
    }

    /// Appends `skb` (see [`SkbQueue::detach`]).
    pub fn push(&self, skb: SkBuff) {
        let raw = Self::detach(skb);
        // SAFETY: We own `raw` and hand it to the queue, which is initialised.
        unsafe { bindings::skb_queue_tail(self.head.get(), raw) };
    }

    /// Puts `skb` back at the head, as the next [`SkbQueue::pop`] takes it: one taken too
    /// early.
    pub fn push_front(&self, skb: SkBuff) {
        let raw = Self::detach(skb);
        // SAFETY: We own `raw` and hand it to the queue, which is initialised.
        unsafe { bindings::skb_queue_head(self.head.get(), raw) };
    }

    /// Appends an skb on its way out, routed by a route's `attach`: it keeps its route, its
    /// own reference, for [`SkBuff::send_routed`] in whatever context pops it.
    pub fn push_routed(&self, skb: SkBuff) {
        let raw = skb.into_raw();
        // SAFETY: We own `raw` and hand it to the queue, which is initialised. An outgoing skb
        // borrows nothing from the context that built it: its route is its own reference and
        // it has no receiving device.
        unsafe { bindings::skb_queue_tail(self.head.get(), raw) };
    }

    /// Takes the oldest skb.
    pub fn pop(&self) -> Option<SkBuff> {
        // SAFETY: The queue is initialised; a dequeued skb is ours.
        let skb = NonNull::new(unsafe { bindings::skb_dequeue(self.head.get()) })?;
        // SAFETY: `skb_dequeue` handed over its reference.
        Some(unsafe { SkBuff::from_raw(skb) })
    }

    /// How many skbs wait (a snapshot).
    pub fn len(&self) -> u32 {
        // SAFETY: The queue is initialised; the lockless read is a plain snapshot.
        unsafe { bindings::skb_queue_len_lockless(self.head.get()) }
    }

    /// Whether no skb waits (a snapshot).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[pinned_drop]
impl PinnedDrop for SkbQueue {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: The queue is initialised and no longer shared.
        unsafe { bindings::skb_queue_purge(self.head.get()) };
    }
}

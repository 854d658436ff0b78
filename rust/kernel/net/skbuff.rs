// SPDX-License-Identifier: GPL-2.0

//! Socket buffers (`struct sk_buff`).
//!
//! C header: [`include/linux/skbuff.h`](srctree/include/linux/skbuff.h)

use super::netdevice::NetDevice;
use crate::{bindings, error::to_result, prelude::*, types::Opaque};
use core::ptr::NonNull;

/// An owned socket buffer; dropping it frees it as a drop (`kfree_skb`), [`SkBuff::consume`]
/// frees it as consumed.
///
/// # Invariants
///
/// The pointer is a valid `sk_buff` that this object exclusively owns.
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

    /// Gives up ownership, for a call that takes the skb.
    pub(crate) fn into_raw(self) -> *mut bindings::sk_buff {
        let skb = self.as_raw();
        core::mem::forget(self);
        skb
    }

    /// A fresh skb holding the `len` bytes `fill` writes (a whole IP packet, its network
    /// header at the start), with headroom for `dev`'s link-layer header.
    pub fn new_packet(
        dev: &NetDevice,
        len: usize,
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
        let skb = unsafe {
            bindings::__alloc_skb(total, bindings::GFP_KERNEL, 0, bindings::NUMA_NO_NODE)
        };
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

    /// Appends `skb`. Its device and route are dropped: both were only borrowed from the
    /// receive path, which the queued skb outlives.
    pub fn push(&self, skb: SkBuff) {
        let raw = skb.as_raw();
        core::mem::forget(skb);
        // SAFETY: We own `raw` and hand it to the queue, which is initialised.
        unsafe {
            (*raw)
                .__bindgen_anon_1
                .__bindgen_anon_1
                .__bindgen_anon_1
                .dev = core::ptr::null_mut();
            bindings::skb_dst_drop(raw);
            bindings::skb_queue_tail(self.head.get(), raw);
        }
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

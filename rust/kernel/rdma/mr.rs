// SPDX-License-Identifier: GPL-2.0

//! Memory regions (`struct ib_mr`). Unlike most verbs objects the provider allocates them.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::{ops::Driver, pd::Pd, virt_dma::VirtDma};
use crate::{bindings, error::to_result, prelude::*, types::Opaque};

/// A user memory registration request (`ibv_reg_mr`).
#[derive(Clone, Copy, Debug)]
pub struct MrRequest {
    /// Start of the buffer in the caller's address space.
    pub start: u64,
    /// Length in bytes.
    pub length: u64,
    /// The address the peers use for the first byte (`iova`).
    pub iova: u64,
    /// `IB_ACCESS_*`; the core has already refused unsupported and inconsistent ones.
    pub access: u32,
}

/// The keys of a new memory region.
#[derive(Clone, Copy, Debug)]
pub struct MrKeys {
    /// Local key, for work requests of this process.
    pub lkey: u32,
    /// Remote key, for peers' RDMA; 0 if the region allows no remote access.
    pub rkey: u32,
}

/// What a reregistration (`ibv_rereg_mr`, `IB_MR_REREG_*`) changes in a user region, in place.
/// New memory (`IB_MR_REREG_TRANS`) is not offered: the abstraction refuses it with
/// `EOPNOTSUPP`, since the core would set the region's `iova` and `length` from values the
/// provider never saw.
/// The PD is passed beside it: the region's own, or with `IB_MR_REREG_PD` the one it moves to
/// (the core moves the `ib_mr`'s pointer and the PDs' use counts once the provider agreed).
#[derive(Clone, Copy, Debug)]
pub struct MrRereg {
    /// `IB_MR_REREG_ACCESS`: the new `IB_ACCESS_*`, checked by the core as at registration.
    pub access: Option<u32>,
}

#[repr(C)]
#[pin_data]
struct MrObject<T: Driver> {
    #[pin]
    ib: Opaque<bindings::ib_mr>,
    #[pin]
    data: T::Mr,
}

/// `ops.reg_user_mr`.
///
/// # Safety
///
/// `pd` is a live PD of a device of `T`.
pub(crate) unsafe fn reg_user<T: Driver>(
    pd: *mut bindings::ib_pd,
    req: &MrRequest,
    dmah: *mut bindings::ib_dmah,
) -> Result<*mut bindings::ib_mr> {
    if !dmah.is_null() {
        return Err(EOPNOTSUPP);
    }
    // SAFETY: `pd` is a live PD of `T` (this function's `# Safety`), so made by `pd::init`, and the
    // caller holds it (`uobj_get_obj_read()`) for the call, which the reference does not outlive.
    let pd = unsafe { Pd::<T>::from_raw(pd) };
    let (keys, data) = T::reg_user_mr(pd, req)?;
    let ib = new_mr::<T>(keys, data)?;
    // SAFETY: Just allocated, not shared yet; the core fills the rest after we return.
    unsafe {
        (*ib).iova = req.iova;
        (*ib).length = req.length;
    }
    Ok(ib)
}

/// Boxes the provider data behind a zeroed `ib_mr` with `keys`; the core owns the result until
/// it passes it to [`dereg`].
fn new_mr<T: Driver>(
    keys: MrKeys,
    data: impl PinInit<T::Mr, Error>,
) -> Result<*mut bindings::ib_mr> {
    let obj = KBox::pin_init(
        try_pin_init!(MrObject::<T> {
            ib: Opaque::zeroed(),
            data <- data,
        }),
        GFP_KERNEL,
    )?;
    // SAFETY: The core takes the pointer and gives it back to `dereg`, which rebuilds the box;
    // it never moves the object.
    let obj = KBox::into_raw(unsafe { Pin::into_inner_unchecked(obj) });
    // `ib` is the first field: the object's address is its `ib_mr`'s.
    let ib = obj.cast::<bindings::ib_mr>();
    // SAFETY: Just allocated, not shared yet.
    unsafe {
        (*ib).lkey = keys.lkey;
        (*ib).rkey = keys.rkey;
    }
    Ok(ib)
}

/// `ops.rereg_user_mr`, in place: the provider's keys replace the `ib_mr`'s.
///
/// # Safety
///
/// `mr` came from [`reg_user`] for `T`, and no other verb changes it during the call (uverbs
/// holds its uobject for writing); `pd` is a live PD of the same device, held for the call.
pub(crate) unsafe fn rereg_user<T: Driver>(
    mr: *mut bindings::ib_mr,
    pd: *mut bindings::ib_pd,
    change: &MrRereg,
) -> Result {
    // SAFETY: `mr` is a `MrObject<T>` from `new_mr` (this function's `# Safety`), alive for the
    // call.
    let data = unsafe { &(*mr.cast::<MrObject<T>>()).data };
    // SAFETY: `pd` is a live PD of `T`, made by `pd::init`; the reference ends with the call.
    let pd = unsafe { Pd::<T>::from_raw(pd) };
    let keys = T::rereg_user_mr(data, pd, change)?;
    // SAFETY: `mr` is live, and no other verb changes it meanwhile (this function's `# Safety`).
    // The resource tracker's netlink dump may read the keys meanwhile: whole-word volatile
    // writes, as the core's `WRITE_ONCE` of the region's `pd` beside them.
    unsafe {
        (&raw mut (*mr).lkey).write_volatile(keys.lkey);
        (&raw mut (*mr).rkey).write_volatile(keys.rkey);
    }
    Ok(())
}

/// `ops.alloc_mr`: fast-registration regions only (`IB_MR_TYPE_MEM_REG`).
///
/// # Safety
///
/// `pd` is a live kernel PD of a device of `T`.
pub(crate) unsafe fn alloc<T: Driver>(
    pd: *mut bindings::ib_pd,
    mr_type: bindings::ib_mr_type,
    max_num_sg: u32,
) -> Result<*mut bindings::ib_mr> {
    if mr_type != bindings::ib_mr_type_IB_MR_TYPE_MEM_REG {
        return Err(EOPNOTSUPP);
    }
    // The token below rests on the PD being a kernel one.
    // SAFETY: `pd` is live (this function's `# Safety`).
    if unsafe { !(*pd).uobject.is_null() } {
        return Err(EINVAL);
    }
    // SAFETY: `pd` is a live PD of `T` (this function's `# Safety`), so made by `pd::init`; the
    // caller holds it for the call, which the reference does not outlive.
    let pd = unsafe { Pd::<T>::from_raw(pd) };
    // Only `ib_alloc_mr()` calls this, for kernel consumers: the region's memory is theirs.
    let (keys, data) = T::alloc_mr(pd, max_num_sg, VirtDma::new())?;
    new_mr::<T>(keys, data)
}

/// `ops.map_mr_sg`: the core's walk of the list (`ib_sg_to_pages()`, which sets the region's
/// `iova` and `length`) hands each page to the provider. Returns how many entries it mapped.
///
/// # Safety
///
/// `mr` came from [`alloc`] for `T` and is alive for the call; `sg` is a list of `sg_nents`
/// DMA-mapped entries, `sg_offset` NULL or valid.
pub(crate) unsafe fn map_sg<T: Driver>(
    mr: *mut bindings::ib_mr,
    sg: *mut bindings::scatterlist,
    sg_nents: c_int,
    sg_offset: *mut c_uint,
) -> Result<c_int> {
    // SAFETY: `mr` is a `MrObject<T>` from `new_mr`, alive for the call (`# Safety`).
    let data = unsafe { &(*mr.cast::<MrObject<T>>()).data };
    // SAFETY: `mr` is live; `ib_map_mr_sg()` set the page size just before calling us.
    let page_size = unsafe { (&raw const (*mr).page_size).read() };
    T::map_mr_begin(data, page_size)?;
    // SAFETY: As this function's `# Safety` says; `set_page::<T>` is given `mr` back.
    let n = unsafe { bindings::ib_sg_to_pages(mr, sg, sg_nents, sg_offset, Some(set_page::<T>)) };
    to_result(n.min(0))?;
    Ok(n)
}

/// `ib_sg_to_pages()`'s callback: one page for the provider.
///
/// # Safety
///
/// `mr` is the region [`map_sg`] passed.
unsafe extern "C" fn set_page<T: Driver>(mr: *mut bindings::ib_mr, addr: u64) -> c_int {
    // SAFETY: `mr` is a `MrObject<T>`, alive during `map_sg` (this function's `# Safety`).
    let data = unsafe { &(*mr.cast::<MrObject<T>>()).data };
    match T::map_mr_page(data, addr) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// `ops.get_dma_mr`.
///
/// # Safety
///
/// `pd` is a live PD of a device of `T`.
pub(crate) unsafe fn get_dma<T: Driver>(
    pd: *mut bindings::ib_pd,
    access: u32,
) -> Result<*mut bindings::ib_mr> {
    // The token below rests on the PD being a kernel one (the core asks only for those).
    // SAFETY: `pd` is live (this function's `# Safety`).
    if unsafe { !(*pd).uobject.is_null() } {
        return Err(EINVAL);
    }
    // SAFETY: `pd` is a live PD of `T` (this function's `# Safety`), so made by `pd::init`;
    // `__ib_alloc_pd()` calls this right after it, and the reference does not outlive the call.
    let pd = unsafe { Pd::<T>::from_raw(pd) };
    let (keys, data) = T::get_dma_mr(pd, access, super::virt_dma::VirtDma::new())?;
    new_mr::<T>(keys, data)
}

/// `ops.dereg_mr`: drops the provider data and frees the object.
///
/// # Safety
///
/// `mr` came from [`reg_user`], [`alloc`] or [`get_dma`] (a PD's internal MR) for `T`, and this
/// is its last use.
pub(crate) unsafe fn dereg<T: Driver>(mr: *mut bindings::ib_mr) {
    // SAFETY: `mr` came from `reg_user`, `alloc` or `get_dma` (this function's `# Safety`): all
    // `new_mr`'s `KBox::into_raw` of a `MrObject<T>`. This is its last use, so the box may be
    // rebuilt and dropped.
    drop(unsafe { KBox::from_raw(mr.cast::<MrObject<T>>()) });
}

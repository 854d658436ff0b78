// SPDX-License-Identifier: GPL-2.0

//! The provider's operations (`struct ib_device_ops`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::{
    ah::{self, Ah},
    attr::{DeviceAttrs, PortAttrs, PortImmutable},
    cq::{self, Cq, CqAttr, NotifyFlags},
    device::{Device, DeviceModify},
    mad::{self, MadResult, MAD_LEN},
    mmap,
    mr::{self, MrKeys, MrRequest, MrRereg},
    mw::{self, MwType},
    pd::{self, Pd},
    qp::{self, AhAttr, AttrMask, Qp, QpAttr, QpCreated, QpInit, QpQuery},
    srq::{self, Srq, SrqAttr, SrqAttrMask},
    stats::{self, StatDesc},
    ucontext,
    udata::Udata,
    virt_dma::VirtDma,
    wr::{self, RecvWr, SendWr, WcSink}, //
};
use crate::{bindings, error::from_result, module::this_module, prelude::*};
use core::marker::PhantomData;

/// An RDMA provider: the types and callbacks behind its `ib_device_ops`.
///
/// Optional methods that a provider leaves out stay `NULL` in the table, so the RDMA core answers
/// `EOPNOTSUPP` for them.
#[vtable]
pub trait Driver: Sized + 'static {
    /// Per-device private data, dropped when the core frees the device.
    type Data: Send + Sync;
    /// Per-user-context data.
    type Ucontext: Send + Sync;
    /// Per-protection-domain data.
    type Pd: Send + Sync;
    /// Per-completion-queue data.
    type Cq: Send + Sync;
    /// Per-memory-region data.
    type Mr: Send + Sync;
    /// Per-queue-pair data.
    type Qp: Send + Sync;
    /// Per-address-handle data.
    type Ah: Send + Sync;
    /// Per-memory-window data.
    type Mw: Send + Sync;
    /// Per-shared-receive-queue data.
    type Srq: Send + Sync;

    /// The `enum rdma_driver_id` that rdma-core matches its provider on.
    const DRIVER_ID: u32;
    /// The driver-specific uverbs ABI version.
    const UVERBS_ABI_VER: u32;

    /// Reports device attributes.
    fn query_device(dev: &Device<Self>) -> Result<DeviceAttrs>;

    /// Reports the attributes of `port`. Called without `RTNL`.
    fn query_port(dev: &Device<Self>, port: u32) -> Result<PortAttrs>;

    /// Reports what never changes about `port`.
    fn port_immutable(dev: &Device<Self>, port: u32) -> Result<PortImmutable>;

    /// Returns the P_Key at `index`.
    fn query_pkey(dev: &Device<Self>, port: u32, index: u16) -> Result<u16>;

    /// Creates a user context (one per open of the uverbs device).
    fn alloc_ucontext(dev: &Device<Self>) -> impl PinInit<Self::Ucontext, Error>;

    /// Creates a protection domain.
    fn alloc_pd(dev: &Device<Self>) -> impl PinInit<Self::Pd, Error>;

    /// Creates a completion queue; returns its real size and its data. `udata` is `None` for a
    /// kernel consumer.
    fn create_cq(
        dev: &Device<Self>,
        attr: &CqAttr,
        udata: Option<&mut Udata<'_>>,
    ) -> Result<(u32, impl PinInit<Self::Cq, Error>)>;

    /// Resizes a user completion queue to at least `cqe` entries, recording the real size with
    /// [`Cq::set_cqe`].
    fn resize_cq(cq: &Cq<Self>, cqe: u32, udata: &mut Udata<'_>) -> Result;

    /// Arms the completion event; returns whether completions are already waiting (only asked
    /// for with [`NotifyFlags::report_missed`]).
    fn req_notify_cq(cq: &Cq<Self>, flags: NotifyFlags) -> Result<bool>;

    /// Registers user memory; returns the region's keys and data.
    fn reg_user_mr(
        pd: &Pd<Self>,
        req: &MrRequest,
    ) -> Result<(MrKeys, impl PinInit<Self::Mr, Error>)>;

    /// Changes a user region in place: moves it to `pd` (its PD, or the one it moves to) and
    /// changes its access, as `change` says; returns its keys, which may change.
    fn rereg_user_mr(_mr: &Self::Mr, _pd: &Pd<Self>, _change: &MrRereg) -> Result<MrKeys> {
        build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }

    /// Creates a fast-registration region (`IB_MR_TYPE_MEM_REG`) of the kernel PD `pd` for up
    /// to `max_pages` pages, which `mem` reaches; returns its first keys and its data. It gives
    /// no access until an `IB_WR_REG_MR` registers what [`Self::map_mr_begin`] and
    /// [`Self::map_mr_page`] mapped into it.
    fn alloc_mr(
        _pd: &Pd<Self>,
        _max_pages: u32,
        _mem: VirtDma,
    ) -> Result<(MrKeys, impl PinInit<Self::Mr, Error>)> {
        build_error!(crate::error::VTABLE_DEFAULT_ERROR);
        #[allow(unreachable_code)]
        Ok((MrKeys { lkey: 0, rkey: 0 }, Err::<Self::Mr, Error>(EINVAL)))
    }

    /// `ib_map_mr_sg()` starts mapping pages of `page_size` bytes (the consumer's choice) into
    /// a region from [`Self::alloc_mr`]: what an earlier call mapped is dropped. May be called
    /// in atomic context.
    fn map_mr_begin(_mr: &Self::Mr, _page_size: u32) -> Result {
        build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }

    /// The next page of the mapping: a virt-DMA address aligned to the page size the consumer
    /// chose. `ENOMEM` once the region holds no more. May be called in atomic context.
    fn map_mr_page(_mr: &Self::Mr, _addr: u64) -> Result {
        build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }

    /// Creates a memory window of `ty` in `pd`; returns its first R_Key and its data.
    fn alloc_mw(pd: &Pd<Self>, ty: MwType) -> Result<(u32, impl PinInit<Self::Mw, Error>)>;

    /// Creates a shared receive queue of at least `attr`'s size; returns its real size and its
    /// data. `udata` is `None` for a kernel consumer.
    fn create_srq(
        pd: &Pd<Self>,
        attr: &SrqAttr,
        udata: Option<&mut Udata<'_>>,
    ) -> Result<(SrqAttr, impl PinInit<Self::Srq, Error>)>;

    /// Resizes a shared receive queue or arms its limit (those in `mask`).
    fn modify_srq(
        srq: &Srq<Self>,
        attr: &SrqAttr,
        mask: SrqAttrMask,
        udata: Option<&mut Udata<'_>>,
    ) -> Result;

    /// Reports a shared receive queue's size and limit.
    fn query_srq(srq: &Srq<Self>) -> Result<SrqAttr>;

    /// Creates a queue pair; `udata` is `None` for a kernel consumer.
    fn create_qp(
        pd: &Pd<Self>,
        init: &QpInit<'_, Self>,
        udata: Option<&mut Udata<'_>>,
    ) -> Result<(QpCreated, impl PinInit<Self::Qp, Error>)>;

    /// Changes a queue pair's attributes (those in `mask`) and state.
    fn modify_qp(
        qp: &Qp<Self>,
        attr: &QpAttr,
        mask: AttrMask,
        udata: Option<&mut Udata<'_>>,
    ) -> Result;

    /// Reports a queue pair's attributes.
    fn query_qp(qp: &Qp<Self>) -> Result<QpQuery>;

    /// Creates an address handle for UD sends.
    fn create_ah(
        pd: &Pd<Self>,
        attr: &AhAttr,
        udata: Option<&mut Udata<'_>>,
    ) -> Result<impl PinInit<Self::Ah, Error>>;

    /// Reports an address handle's path, as it was created (`rdma_query_ah`; kernel consumers
    /// only: uverbs has no such command).
    fn query_ah(_ah: &Ah<Self>) -> Result<AhAttr> {
        build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }

    /// User space posted to the send queue ring.
    fn doorbell(qp: &Qp<Self>) -> Result;

    /// A kernel consumer posts a send WR. May be called in atomic context: must not sleep.
    fn post_send(qp: &Qp<Self>, wr: &SendWr<'_, Self>) -> Result;

    /// A kernel consumer posts a receive WR. May be called in atomic context: must not sleep.
    fn post_recv(qp: &Qp<Self>, wr: &RecvWr<'_>) -> Result;

    /// A kernel consumer polls: move completions into `sink` until it is full or none is left.
    /// May be called in atomic context.
    fn poll_cq(cq: &Cq<Self>, sink: &mut WcSink<'_, Self>) -> Result;

    /// Creates the region of a kernel PD that its `local_dma_lkey` names: all kernel memory,
    /// by address (`access` is `IB_ACCESS_*`), which `mem` reaches.
    fn get_dma_mr(
        pd: &Pd<Self>,
        access: u32,
        mem: VirtDma,
    ) -> Result<(MrKeys, impl PinInit<Self::Mr, Error>)>;

    /// Cuts a user context off the device (the device is going away, or moving to another
    /// network namespace, while the process keeps its file open). Without it, open user contexts
    /// pin the provider module and the device cannot change namespace.
    fn disassociate_ucontext(_ctx: &Self::Ucontext) {
        build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }

    /// Changes the node description or system image GUID (the core's sysfs `node_desc`
    /// writes here).
    fn modify_device(_dev: &Device<Self>, _change: &DeviceModify) -> Result {
        build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }

    /// Attaches a UD QP to the multicast group `gid` (the core checked both); attaching it
    /// again is no error. Sleeps.
    fn attach_mcast(_qp: &Qp<Self>, _gid: &[u8; 16]) -> Result {
        build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }

    /// Detaches a QP from the multicast group `gid`; `EINVAL` if it was not attached. Sleeps.
    fn detach_mcast(_qp: &Qp<Self>, _gid: &[u8; 16]) -> Result {
        build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }

    /// Answers a MAD for `port`, writing the whole response into `out`, lets it pass, or
    /// consumes it. Must not sleep: a local directed-route SMP comes in its sender's context.
    fn process_mad(
        _dev: &Device<Self>,
        _port: u32,
        _mad: &[u8; MAD_LEN],
        _out: &mut [u8; MAD_LEN],
    ) -> Result<MadResult> {
        build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }

    /// The port counters [`Driver::port_stats`] fills, in order.
    const PORT_STATS: &'static [StatDesc] = &[];

    /// Fills `values` (one per [`Driver::PORT_STATS`] entry) with the counters of `port`.
    fn port_stats(_dev: &Device<Self>, _port: u32, _values: &mut [u64]) -> Result {
        build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }

    /// Called once the device is registered, before clients attach.
    fn enable_driver(_dev: &Device<Self>) -> Result {
        build_error!(crate::error::VTABLE_DEFAULT_ERROR)
    }
}

pub(crate) struct OpsVTable<T: Driver>(PhantomData<T>);

impl<T: Driver> OpsVTable<T> {
    /// # Safety
    ///
    /// `ibdev` is a registered device created by [`Device::<T>::register`].
    unsafe extern "C" fn query_device(
        ibdev: *mut bindings::ib_device,
        attr: *mut bindings::ib_device_attr,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `ibdev` has our ops, which only `Device::<T>::register` installs (after
            // setting `ready`), and is alive for the call; `attr` is `ibdev->attrs` in
            // `setup_device()` or a local of uverbs, ours alone.
            let (dev, attr) = unsafe { (Device::<T>::from_raw(ibdev), &mut *attr) };
            T::query_device(dev)?.write_to(attr);
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// As for `query_device`.
    unsafe extern "C" fn query_port(
        ibdev: *mut bindings::ib_device,
        port: u32,
        attr: *mut bindings::ib_port_attr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `ibdev` has our ops, so it is a live, `ready` `Device<T>` (see
            // `query_device`); `attr` is the caller's struct, zeroed by `__ib_query_port()` and
            // ours alone for the call.
            let (dev, attr) = unsafe { (Device::<T>::from_raw(ibdev), &mut *attr) };
            T::query_port(dev, port)?.write_to(attr);
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// As for `query_device`.
    unsafe extern "C" fn get_port_immutable(
        ibdev: *mut bindings::ib_device,
        port: u32,
        imm: *mut bindings::ib_port_immutable,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `ibdev` has our ops (see `query_device`; `ready` is set before registration);
            // `imm` is its new `port_data[port].immutable` in `setup_port_data()`, ours alone.
            let (dev, imm) = unsafe { (Device::<T>::from_raw(ibdev), &mut *imm) };
            let p = T::port_immutable(dev, port)?;
            imm.pkey_tbl_len = p.pkey_tbl_len;
            imm.gid_tbl_len = p.gid_tbl_len;
            imm.core_cap_flags = p.core_cap_flags;
            imm.max_mad_size = p.max_mad_size;
            Ok(0)
        })
    }

    /// RoCE ports are Ethernet.
    ///
    /// # Safety
    ///
    /// Any arguments are accepted; none is dereferenced.
    unsafe extern "C" fn get_link_layer(
        _ibdev: *mut bindings::ib_device,
        _port: u32,
    ) -> bindings::rdma_link_layer {
        bindings::rdma_link_layer::IB_LINK_LAYER_ETHERNET
    }

    /// # Safety
    ///
    /// As for `query_device`; `pkey` is valid for writes.
    unsafe extern "C" fn query_pkey(
        ibdev: *mut bindings::ib_device,
        port: u32,
        index: u16,
        pkey: *mut u16,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `ibdev` has our ops, so it is a live, `ready` `Device<T>` (see
            // `query_device`).
            let dev = unsafe { Device::<T>::from_raw(ibdev) };
            let value = T::query_pkey(dev, port, index)?;
            // SAFETY: `pkey` is valid for writes (`# Safety`): `ib_query_pkey()` passes its
            // caller's `u16`.
            unsafe { pkey.write(value) };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `ctx` was allocated by the core with `size_ib_ucontext` zeroed bytes, for a device of `T`.
    unsafe extern "C" fn alloc_ucontext(
        ctx: *mut bindings::ib_ucontext,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `ctx` is the zeroed `size_ib_ucontext` (`ucontext::alloc_size::<T>()`) bytes
            // of `rdma_zalloc_drv_obj()`, `device` set to ours by `ib_alloc_ucontext()`: as
            // `ucontext::init` needs.
            unsafe { ucontext::init::<T>(ctx)? };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `ctx` was initialised by `alloc_ucontext`; the core frees it after this returns.
    unsafe extern "C" fn dealloc_ucontext(ctx: *mut bindings::ib_ucontext) {
        // SAFETY: `ctx` was set up by our `alloc_ucontext` (the core keeps only contexts it
        // accepted); `ufile_destroy_ucontext()` frees it right after this: the last use of its
        // data.
        unsafe { ucontext::drop_data::<T>(ctx) };
    }

    /// # Safety
    ///
    /// `ctx` was initialised by `alloc_ucontext` and is not yet deallocated.
    unsafe extern "C" fn disassociate_ucontext(ctx: *mut bindings::ib_ucontext) {
        // SAFETY: `ctx` was set up by our `alloc_ucontext`; `ufile_destroy_ucontext()` calls this
        // before `dealloc_ucontext`, so the data is live for the call.
        T::disassociate_ucontext(unsafe { ucontext::data::<T>(ctx) });
    }

    /// # Safety
    ///
    /// `pd` was allocated by the core with `size_ib_pd` zeroed bytes, for a device of `T`.
    unsafe extern "C" fn alloc_pd(
        pd: *mut bindings::ib_pd,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `pd` is the zeroed `size_ib_pd` (`pd::alloc_size::<T>()`) bytes of
            // `rdma_zalloc_drv_obj()`, `device` set to ours (`__ib_alloc_pd()`, uverbs `alloc_pd`):
            // as `pd::init` needs.
            unsafe { pd::init::<T>(pd)? };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `pd` was initialised by `alloc_pd`; the core frees it after this returns 0.
    unsafe extern "C" fn dealloc_pd(
        pd: *mut bindings::ib_pd,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: `pd` was set up by our `alloc_pd`; `ib_dealloc_pd_user()` calls this once the PD
        // has no users (its internal MR is gone) and frees it on 0: the last use of its data.
        unsafe { pd::drop_data::<T>(pd) };
        0
    }

    /// # Safety
    ///
    /// `ibcq` was allocated by the core with `size_ib_cq` zeroed bytes, for a device of `T`.
    unsafe extern "C" fn create_cq(
        ibcq: *mut bindings::ib_cq,
        attr: *const bindings::ib_cq_init_attr,
        attrs: *mut bindings::uverbs_attr_bundle,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `ibcq` is the zeroed `size_ib_cq` bytes of `rdma_zalloc_drv_obj()`, `device`
            // set to ours; `attr` is the creator's, `attrs` NULL (kernel) or the uverbs bundle: as
            // `cq::init` needs.
            unsafe { cq::init::<T>(ibcq, attr, attrs)? };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `ibcq` was initialised by `create_cq`; the core frees it after this returns 0.
    unsafe extern "C" fn destroy_cq(
        ibcq: *mut bindings::ib_cq,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: `ibcq` was set up by our `create_cq`; `ib_destroy_cq_user()` refuses a CQ in use
        // (`usecnt`), and it and `ib_free_cq()` free `ibcq` after this: the last use of its data.
        unsafe { cq::drop_data::<T>(ibcq) };
        0
    }

    /// # Safety
    ///
    /// `ibcq` was initialised by `create_cq`; `udata` is the command's.
    unsafe extern "C" fn resize_user_cq(
        ibcq: *mut bindings::ib_cq,
        cqe: c_uint,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `ibcq` is a CQ of ours (all are made by `create_cq`) that
            // `ib_uverbs_resize_cq()` holds by its uobject for the call; `udata` is that command's
            // `driver_udata`.
            unsafe { cq::resize::<T>(ibcq, cqe, udata)? };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `ibcq` was initialised by `create_cq`.
    unsafe extern "C" fn req_notify_cq(
        ibcq: *mut bindings::ib_cq,
        flags: bindings::ib_cq_notify_flags,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `ibcq` is a CQ of ours (every CQ of a device with our ops is made by
            // `create_cq`), kept alive by the caller of `ib_req_notify_cq()` for the call.
            Ok(c_int::from(unsafe { cq::req_notify::<T>(ibcq, flags)? }))
        })
    }

    /// # Safety
    ///
    /// `pd` is a live PD of a device of `T`.
    unsafe extern "C" fn reg_user_mr(
        pd: *mut bindings::ib_pd,
        start: u64,
        length: u64,
        iova: u64,
        access: c_int,
        dmah: *mut bindings::ib_dmah,
        _udata: *mut bindings::ib_udata,
    ) -> *mut bindings::ib_mr {
        let req = MrRequest {
            start,
            length,
            iova,
            // CAST: Access flags are a bit mask.
            access: access as u32,
        };
        // SAFETY: `pd` is a PD of a device with our ops, so our `alloc_pd` set it up; uverbs
        // `reg_mr` holds it by its uobject (a kernel caller by its reference) for the call.
        match unsafe { mr::reg_user::<T>(pd, &req, dmah) } {
            Ok(mr) => mr,
            Err(e) => e.to_ptr(),
        }
    }

    /// # Safety
    ///
    /// `ibmr` came from `reg_user_mr`; `pd` is a live PD of the same device.
    unsafe extern "C" fn rereg_user_mr(
        ibmr: *mut bindings::ib_mr,
        flags: c_int,
        _start: u64,
        _length: u64,
        _iova: u64,
        access: c_int,
        pd: *mut bindings::ib_pd,
        _udata: *mut bindings::ib_udata,
    ) -> *mut bindings::ib_mr {
        // CAST: A bit mask.
        let has = |flag: u32| flags as u32 & flag != 0;
        if has(bindings::ib_mr_rereg_flags_IB_MR_REREG_TRANS) {
            return EOPNOTSUPP.to_ptr();
        }
        let change = MrRereg {
            // CAST: Access flags are a bit mask.
            access: has(bindings::ib_mr_rereg_flags_IB_MR_REREG_ACCESS).then_some(access as u32),
        };
        // SAFETY: Only uverbs' `rereg_mr` calls this, with a user region of ours (kernel ones have
        // no uobject), which it holds for writing, and the PD the region is to be in, held for
        // reading (or the region's own).
        match unsafe { mr::rereg_user::<T>(ibmr, pd, &change) } {
            // NULL: changed in place, the core keeps the `ib_mr`.
            Ok(()) => core::ptr::null_mut(),
            Err(e) => e.to_ptr(),
        }
    }

    /// # Safety
    ///
    /// `ibmr` came from `reg_user_mr` or `get_dma_mr`; the core does not use it after this
    /// returns 0.
    unsafe extern "C" fn dereg_mr(
        ibmr: *mut bindings::ib_mr,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: `ibmr` is from our `reg_user_mr` or `get_dma_mr` (a PD's internal MR; the same
        // `MrObject<T>` box from `new_mr`); `ib_dereg_mr_user()`, `ib_dealloc_pd_user()` drop it
        // after 0.
        unsafe { mr::dereg::<T>(ibmr) };
        0
    }

    /// # Safety
    ///
    /// `pd` is a live PD of a device of `T`.
    unsafe extern "C" fn alloc_mr(
        pd: *mut bindings::ib_pd,
        mr_type: bindings::ib_mr_type,
        max_num_sg: u32,
    ) -> *mut bindings::ib_mr {
        // SAFETY: `ib_alloc_mr()`, the only caller, passes a live kernel PD of the device.
        match unsafe { mr::alloc::<T>(pd, mr_type, max_num_sg) } {
            Ok(mr) => mr,
            Err(e) => e.to_ptr(),
        }
    }

    /// # Safety
    ///
    /// `ibmr` came from `alloc_mr`; `sg` is a list of `sg_nents` DMA-mapped entries.
    unsafe extern "C" fn map_mr_sg(
        ibmr: *mut bindings::ib_mr,
        sg: *mut bindings::scatterlist,
        sg_nents: c_int,
        sg_offset: *mut c_uint,
    ) -> c_int {
        // SAFETY: `ib_map_mr_sg()` passes a region of this device with a mapped list, as this
        // function's `# Safety` says (any type of ours: the provider refuses regions that are
        // not fast ones).
        match unsafe { mr::map_sg::<T>(ibmr, sg, sg_nents, sg_offset) } {
            Ok(n) => n,
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// `ibmw` was allocated by the core with `size_ib_mw` zeroed bytes, for a device of `T`, with
    /// `device`, `pd` and `type` set.
    unsafe extern "C" fn alloc_mw(
        ibmw: *mut bindings::ib_mw,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `ib_uverbs_alloc_mw()` passes the zeroed `size_ib_mw` object of
            // `rdma_zalloc_drv_obj()` with `device`, `pd` and `type` set, not yet shared.
            unsafe { mw::alloc::<T>(ibmw)? };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `ibmw` was initialised by `alloc_mw`; the core frees it after this returns 0.
    unsafe extern "C" fn dealloc_mw(ibmw: *mut bindings::ib_mw) -> c_int {
        // SAFETY: `ibmw` was set up by our `alloc_mw`; `uverbs_dealloc_mw()` frees it after this
        // returns 0: the last use of its data.
        unsafe { mw::drop_data::<T>(ibmw) };
        0
    }

    /// # Safety
    ///
    /// `ibsrq` was allocated by the core with `size_ib_srq` zeroed bytes, for a device of `T`.
    unsafe extern "C" fn create_srq(
        ibsrq: *mut bindings::ib_srq,
        init: *mut bindings::ib_srq_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `ib_create_srq_user()` passes its zeroed `size_ib_srq` object with `device`
            // and `pd` set, the creator's `init` and NULL or the command's `driver_udata`.
            unsafe { srq::create::<T>(ibsrq, init, udata)? };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `ibsrq` was initialised by `create_srq`.
    unsafe extern "C" fn modify_srq(
        ibsrq: *mut bindings::ib_srq,
        attr: *mut bindings::ib_srq_attr,
        mask: bindings::ib_srq_attr_mask,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `ibsrq` is a live SRQ of ours (the caller holds it); `attr` is the
            // caller's; `udata` NULL (`ib_modify_srq()`) or the command's `driver_udata`.
            unsafe { srq::modify::<T>(ibsrq, attr, mask, udata)? };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `ibsrq` was initialised by `create_srq`; `attr` is valid for writes.
    unsafe extern "C" fn query_srq(
        ibsrq: *mut bindings::ib_srq,
        attr: *mut bindings::ib_srq_attr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `ibsrq` is a live SRQ of ours (the caller holds it); `attr` is the
            // caller's out struct.
            unsafe { srq::query::<T>(ibsrq, attr)? };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `ibsrq` was initialised by `create_srq`; the core frees it after this returns 0.
    unsafe extern "C" fn destroy_srq(
        ibsrq: *mut bindings::ib_srq,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: `ibsrq` was set up by our `create_srq`; `ib_destroy_srq_user()` refuses an SRQ
        // that QPs use (`usecnt`) and frees it after 0: the last use of its data.
        unsafe { srq::drop_data::<T>(ibsrq) };
        0
    }

    /// # Safety
    ///
    /// `ibqp` was allocated by the core with `size_ib_qp` zeroed bytes, for a device of `T`.
    unsafe extern "C" fn create_qp(
        ibqp: *mut bindings::ib_qp,
        init: *mut bindings::ib_qp_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `ibqp` is the zeroed `size_ib_qp` object in which the core's `create_qp()`
            // set `device`, `pd` and CQs; `init` is the creator's (CQs of this device), `udata`
            // NULL or the command's.
            unsafe { qp::create::<T>(ibqp, init, udata)? };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `ibqp` was initialised by `create_qp`.
    unsafe extern "C" fn modify_qp(
        ibqp: *mut bindings::ib_qp,
        attr: *mut bindings::ib_qp_attr,
        mask: c_int,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `ibqp` is a live QP of ours (`real_qp`); `_ib_modify_qp()` passes the
            // caller's `attr`, with `sgid_attr` filled for `IB_QP_AV`, and `udata` NULL or the
            // command's.
            unsafe { qp::modify::<T>(ibqp, attr, mask, udata)? };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `ibqp` was initialised by `create_qp`.
    unsafe extern "C" fn query_qp(
        ibqp: *mut bindings::ib_qp,
        attr: *mut bindings::ib_qp_attr,
        _mask: c_int,
        init: *mut bindings::ib_qp_init_attr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `ibqp` is a live QP of ours (`ib_query_qp()` passes `real_qp`); `attr` and
            // `init` are the caller's out structs, valid for writes.
            unsafe { qp::query::<T>(ibqp, attr, init)? };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// As for `query_device`; the MADs and `out_size` are the caller's, valid for the call.
    unsafe extern "C" fn process_mad(
        ibdev: *mut bindings::ib_device,
        _flags: c_int,
        port: u32,
        _wc: *const bindings::ib_wc,
        _grh: *const bindings::ib_grh,
        mad: *const bindings::ib_mad,
        out: *mut bindings::ib_mad,
        out_size: *mut usize,
        _out_pkey_index: *mut u16,
    ) -> c_int {
        // SAFETY: `ib_mad_recv_done()`, `handle_outgoing_dr_smp()` and sysfs's `get_perf_mad()`
        // (during registration too, once the data is set) pass a device with our ops (see
        // `query_device`), the 256-byte MAD received, sent or built, and a response buffer of
        // `*out_size` bytes, theirs alone during the call.
        unsafe { mad::process::<T>(ibdev, port, mad, out, out_size) }
    }

    /// # Safety
    ///
    /// `ibqp` was initialised by `create_qp`; `gid` is valid for reads.
    unsafe extern "C" fn attach_mcast(
        ibqp: *mut bindings::ib_qp,
        gid: *mut bindings::ib_gid,
        _lid: u16,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `ib_attach_mcast()` passes a live QP of ours and its caller's GID.
            unsafe { qp::mcast::<T>(ibqp, gid, true)? };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// As for `attach_mcast`.
    unsafe extern "C" fn detach_mcast(
        ibqp: *mut bindings::ib_qp,
        gid: *mut bindings::ib_gid,
        _lid: u16,
    ) -> c_int {
        from_result(|| {
            // SAFETY: As in `attach_mcast`.
            unsafe { qp::mcast::<T>(ibqp, gid, false)? };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `ibah` was allocated by the core with `size_ib_ah` zeroed bytes, for a device of `T`.
    unsafe extern "C" fn create_ah(
        ibah: *mut bindings::ib_ah,
        init: *mut bindings::rdma_ah_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `ibah` is the zeroed `size_ib_ah` object in which `_rdma_create_ah()` set
            // `device` and `pd`; `rdma_fill_sgid_attr()` ran on `init.ah_attr`; `udata` is NULL or
            // the command's.
            unsafe { ah::create::<T>(ibah, init, udata)? };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `ibah` was initialised by `create_ah`; `attr` is valid for writes.
    unsafe extern "C" fn query_ah(
        ibah: *mut bindings::ib_ah,
        attr: *mut bindings::rdma_ah_attr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `rdma_query_ah()` passes an AH of ours, which its caller holds for the call,
            // and the caller's attribute.
            unsafe { ah::query::<T>(ibah, attr)? };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `ibah` was initialised by `create_ah`; the core frees it after this returns 0.
    unsafe extern "C" fn destroy_ah(ibah: *mut bindings::ib_ah, _flags: u32) -> c_int {
        // SAFETY: `ibah` was set up by our `create_ah`; `rdma_destroy_ah_user()` frees it after
        // this returns 0: the last use of its data.
        unsafe { ah::drop_data::<T>(ibah) };
        0
    }

    /// # Safety
    ///
    /// `ibqp` was initialised by `create_qp`; `bad_wr` is valid for writes.
    unsafe extern "C" fn post_send(
        ibqp: *mut bindings::ib_qp,
        wr: *const bindings::ib_send_wr,
        bad_wr: *mut *const bindings::ib_send_wr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `ibqp` is a live QP of ours; `wr` is NULL (uverbs `post_send` with no WRs:
            // the doorbell) or a list in kernel memory; `bad_wr` is never NULL (`ib_post_send()`
            // passes `&dummy`).
            unsafe { qp::post_send::<T>(ibqp, wr, bad_wr)? };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `ibqp` was initialised by `create_qp`; `wr` is a valid list; `bad_wr` is valid for writes.
    unsafe extern "C" fn post_recv(
        ibqp: *mut bindings::ib_qp,
        wr: *const bindings::ib_recv_wr,
        bad_wr: *mut *const bindings::ib_recv_wr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `ibqp` is a live QP of ours; `wr` is NULL (uverbs with no WRs) or a list in
            // kernel memory; `bad_wr` is never NULL (`ib_post_recv()` passes `&dummy`).
            unsafe { qp::post_recv::<T>(ibqp, wr, bad_wr)? };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// `ibcq` was initialised by `create_cq`; `wc` is valid for `num` entries.
    unsafe extern "C" fn poll_cq(
        ibcq: *mut bindings::ib_cq,
        num: c_int,
        wc: *mut bindings::ib_wc,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `ibcq` is a CQ of ours (made by `create_cq`), kept alive by the caller of
            // `ib_poll_cq()` for the call; `wc` has room for `num` entries (`# Safety`).
            unsafe { wr::poll::<T>(Cq::<T>::from_raw(ibcq), num, wc) }
        })
    }

    /// # Safety
    ///
    /// `pd` is a live PD of a device of `T`.
    unsafe extern "C" fn get_dma_mr(
        pd: *mut bindings::ib_pd,
        access: c_int,
    ) -> *mut bindings::ib_mr {
        // SAFETY: `pd` was just set up by our `alloc_pd`: the only caller, `__ib_alloc_pd()`,
        // passes the PD it has just allocated.
        match unsafe { mr::get_dma::<T>(pd, access as u32) } {
            Ok(mr) => mr,
            Err(e) => e.to_ptr(),
        }
    }

    /// # Safety
    ///
    /// `ibqp` was initialised by `create_qp`; the core frees it after this returns 0.
    unsafe extern "C" fn destroy_qp(
        ibqp: *mut bindings::ib_qp,
        _udata: *mut bindings::ib_udata,
    ) -> c_int {
        // SAFETY: `ibqp` was set up by our `create_qp`; `ib_destroy_qp_user()` refuses a QP in use
        // (`usecnt`) and frees it after 0, as does `create_qp()`'s error path: the last use of its
        // data.
        unsafe { qp::drop_data::<T>(ibqp) };
        0
    }

    /// # Safety
    ///
    /// Any arguments are accepted; none is dereferenced.
    unsafe extern "C" fn alloc_hw_port_stats(
        _ibdev: *mut bindings::ib_device,
        _port: u32,
    ) -> *mut bindings::rdma_hw_stats {
        stats::alloc(T::PORT_STATS)
    }

    /// # Safety
    ///
    /// As for `query_device`; `hw` came from `alloc_hw_port_stats` and the core holds its lock.
    unsafe extern "C" fn get_hw_stats(
        ibdev: *mut bindings::ib_device,
        hw: *mut bindings::rdma_hw_stats,
        port: u32,
        _index: c_int,
    ) -> c_int {
        from_result(|| {
            // SAFETY: `ibdev` has our ops (see `query_device`); `hw` is the port set of our
            // `alloc_hw_port_stats`, used under `hw->lock`, or before it is published in
            // `setup_hw_port_stats()`.
            let (dev, values) = unsafe { (Device::<T>::from_raw(ibdev), stats::values(hw)) };
            T::port_stats(dev, port, values)?;
            Ok(c_int::try_from(values.len())?)
        })
    }

    /// # Safety
    ///
    /// As for `query_device`; `change` is valid.
    unsafe extern "C" fn modify_device(
        ibdev: *mut bindings::ib_device,
        mask: c_int,
        change: *mut bindings::ib_device_modify,
    ) -> c_int {
        from_result(|| {
            // CAST: A bit mask.
            let mask = mask as u32;
            let guid = bindings::ib_device_modify_flags_IB_DEVICE_MODIFY_SYS_IMAGE_GUID;
            let desc = bindings::ib_device_modify_flags_IB_DEVICE_MODIFY_NODE_DESC;
            if mask & !(guid | desc) != 0 {
                return Err(EOPNOTSUPP);
            }
            // SAFETY: `ib_modify_device()` passes a device with our ops (see `query_device`)
            // and its caller's `ib_device_modify`, ours to read for the call.
            let (dev, change) = unsafe { (Device::<T>::from_raw(ibdev), &*change) };
            let m = DeviceModify {
                sys_image_guid: (mask & guid != 0).then_some(change.sys_image_guid),
                node_desc: (mask & desc != 0).then_some(change.node_desc),
            };
            T::modify_device(dev, &m)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// As for `query_device`.
    unsafe extern "C" fn enable_driver(ibdev: *mut bindings::ib_device) -> c_int {
        from_result(|| {
            // SAFETY: `ib_register_device()` calls this on `ibdev`, which has our ops, so it is a
            // live, `ready` `Device<T>` (see `query_device`).
            T::enable_driver(unsafe { Device::<T>::from_raw(ibdev) })?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Called by `ib_dealloc_device()` exactly once, before the core frees `ibdev`.
    unsafe extern "C" fn dealloc_driver(ibdev: *mut bindings::ib_device) {
        // SAFETY: `ib_dealloc_device()` is the only caller, once per device and before it frees
        // `ibdev`: the contract of `Device::drop_data`.
        unsafe { Device::<T>::drop_data(ibdev) };
    }

    const VTABLE: bindings::ib_device_ops = bindings::ib_device_ops {
        owner: this_module::<T::OwnerModule>().as_ptr(),
        driver_id: T::DRIVER_ID,
        uverbs_abi_ver: T::UVERBS_ABI_VER,
        query_device: Some(Self::query_device),
        query_port: Some(Self::query_port),
        get_port_immutable: Some(Self::get_port_immutable),
        get_link_layer: Some(Self::get_link_layer),
        query_pkey: Some(Self::query_pkey),
        alloc_ucontext: Some(Self::alloc_ucontext),
        dealloc_ucontext: Some(Self::dealloc_ucontext),
        disassociate_ucontext: if T::HAS_DISASSOCIATE_UCONTEXT {
            Some(Self::disassociate_ucontext)
        } else {
            None
        },
        alloc_pd: Some(Self::alloc_pd),
        dealloc_pd: Some(Self::dealloc_pd),
        modify_device: if T::HAS_MODIFY_DEVICE {
            Some(Self::modify_device)
        } else {
            None
        },
        enable_driver: if T::HAS_ENABLE_DRIVER {
            Some(Self::enable_driver)
        } else {
            None
        },
        dealloc_driver: Some(Self::dealloc_driver),
        alloc_hw_port_stats: if T::HAS_PORT_STATS {
            Some(Self::alloc_hw_port_stats)
        } else {
            None
        },
        get_hw_stats: if T::HAS_PORT_STATS {
            Some(Self::get_hw_stats)
        } else {
            None
        },
        size_ib_ucontext: ucontext::alloc_size::<T>(),
        size_ib_pd: pd::alloc_size::<T>(),
        create_cq: Some(Self::create_cq),
        destroy_cq: Some(Self::destroy_cq),
        resize_user_cq: Some(Self::resize_user_cq),
        req_notify_cq: Some(Self::req_notify_cq),
        size_ib_cq: cq::alloc_size::<T>(),
        create_qp: Some(Self::create_qp),
        modify_qp: Some(Self::modify_qp),
        query_qp: Some(Self::query_qp),
        destroy_qp: Some(Self::destroy_qp),
        post_send: Some(Self::post_send),
        post_recv: Some(Self::post_recv),
        poll_cq: Some(Self::poll_cq),
        get_dma_mr: Some(Self::get_dma_mr),
        process_mad: if T::HAS_PROCESS_MAD {
            Some(Self::process_mad)
        } else {
            None
        },
        attach_mcast: if T::HAS_ATTACH_MCAST {
            Some(Self::attach_mcast)
        } else {
            None
        },
        detach_mcast: if T::HAS_DETACH_MCAST {
            Some(Self::detach_mcast)
        } else {
            None
        },
        create_ah: Some(Self::create_ah),
        create_user_ah: Some(Self::create_ah),
        destroy_ah: Some(Self::destroy_ah),
        query_ah: if T::HAS_QUERY_AH {
            Some(Self::query_ah)
        } else {
            None
        },
        size_ib_ah: ah::alloc_size::<T>(),
        size_ib_qp: qp::alloc_size::<T>(),
        reg_user_mr: Some(Self::reg_user_mr),
        dereg_mr: Some(Self::dereg_mr),
        rereg_user_mr: if T::HAS_REREG_USER_MR {
            Some(Self::rereg_user_mr)
        } else {
            None
        },
        alloc_mr: if T::HAS_ALLOC_MR {
            Some(Self::alloc_mr)
        } else {
            None
        },
        map_mr_sg: if T::HAS_ALLOC_MR {
            Some(Self::map_mr_sg)
        } else {
            None
        },
        alloc_mw: Some(Self::alloc_mw),
        dealloc_mw: Some(Self::dealloc_mw),
        size_ib_mw: mw::alloc_size::<T>(),
        create_srq: Some(Self::create_srq),
        modify_srq: Some(Self::modify_srq),
        query_srq: Some(Self::query_srq),
        destroy_srq: Some(Self::destroy_srq),
        size_ib_srq: srq::alloc_size::<T>(),
        mmap: Some(mmap::mmap),
        mmap_free: Some(mmap::mmap_free),
        ..pin_init::zeroed()
    };

    /// Returns the ops table; the core copies it into each device.
    pub(crate) const fn build() -> &'static bindings::ib_device_ops {
        &Self::VTABLE
    }
}

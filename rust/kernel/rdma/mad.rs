// SPDX-License-Identifier: GPL-2.0

//! Management datagrams a provider answers itself (`ops.process_mad`): the MAD layer offers it
//! every MAD that arrives on QP1 first, and every directed-route SMP sent to the local port; the
//! core asks it for the sysfs `counters` files.
//!
//! C header: [`include/rdma/ib_mad.h`](srctree/include/rdma/ib_mad.h)

use super::{device::Device, ops::Driver};
use crate::{bindings, prelude::*};

/// Bytes of a MAD (`struct ib_mad`), as RoCE and InfiniBand ports have them.
pub const MAD_LEN: usize = 256;

/// What the provider made of a MAD.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MadResult {
    /// Not for the provider: the MAD layer hands it to the agent of its class.
    Pass,
    /// The provider wrote the response.
    Reply,
    /// The provider took it, and nothing answers it (the MAD layer frees it).
    Consumed,
}

/// `ops.process_mad`.
///
/// # Safety
///
/// `dev` is a registered device of `T`; `mad` is a MAD valid for reads and `out` one valid for
/// writes, of `*out_size` bytes, neither used by anyone else during the call.
pub(crate) unsafe fn process<T: Driver>(
    dev: *mut bindings::ib_device,
    port: u32,
    mad: *const bindings::ib_mad,
    out: *mut bindings::ib_mad,
    out_size: *mut usize,
) -> c_int {
    const _: () = assert!(core::mem::size_of::<bindings::ib_mad>() == MAD_LEN);
    let fail = bindings::ib_mad_result_IB_MAD_RESULT_FAILURE as c_int;
    // SAFETY: Per this function's `# Safety`.
    if unsafe { *out_size } < MAD_LEN {
        return fail;
    }
    // SAFETY: Per this function's `# Safety`: a live device of ours, and two MADs of
    // `MAD_LEN` bytes (`struct ib_mad` is a byte array in all but name), the out one ours to
    // write during the call.
    let (dev, mad, out) = unsafe {
        (
            Device::<T>::from_raw(dev),
            &*mad.cast::<[u8; MAD_LEN]>(),
            &mut *out.cast::<[u8; MAD_LEN]>(),
        )
    };
    let success = bindings::ib_mad_result_IB_MAD_RESULT_SUCCESS as c_int;
    match T::process_mad(dev, port, mad, out) {
        Ok(MadResult::Pass) => success,
        Ok(MadResult::Reply) => success | bindings::ib_mad_result_IB_MAD_RESULT_REPLY as c_int,
        Ok(MadResult::Consumed) => {
            success | bindings::ib_mad_result_IB_MAD_RESULT_CONSUMED as c_int
        }
        Err(_) => fail,
    }
}

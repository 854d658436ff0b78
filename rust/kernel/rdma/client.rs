// SPDX-License-Identifier: GPL-2.0

//! RDMA core clients (`struct ib_client`): told of every RDMA device the core registers, of
//! any provider.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::device::OtherDevice;
use crate::{bindings, error::to_result, prelude::*, types::Opaque};
use core::marker::PhantomData;

/// Handles RDMA devices as the core registers them.
pub trait ClientHandler: 'static {
    /// The client's name.
    const NAME: &'static CStr;

    /// `dev` was enabled: registered, registered already when the client was, or moved to
    /// another RDMA namespace. Called in the context that does it (a driver's probe,
    /// `rdma link add`, module load), without `RTNL`; may sleep. The core holds the device
    /// for the call.
    fn added(dev: &OtherDevice);
}

/// A registered client (`ib_register_client`). It asks for no verbs of the devices it sees.
///
/// # Invariants
///
/// `client` is registered with the RDMA core from construction until drop.
#[pin_data(PinnedDrop)]
pub struct ClientRegistration<T: ClientHandler> {
    #[pin]
    client: Opaque<bindings::ib_client>,
    _t: PhantomData<T>,
}

// SAFETY: The client is only touched by the RDMA core, under its own locking.
unsafe impl<T: ClientHandler> Send for ClientRegistration<T> {}

// SAFETY: `&ClientRegistration` exposes no methods.
unsafe impl<T: ClientHandler> Sync for ClientRegistration<T> {}

impl<T: ClientHandler> ClientRegistration<T> {
    /// Registers the client; [`ClientHandler::added`] runs at once for every device there is.
    pub fn register() -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            client <- Opaque::try_ffi_init(|slot: *mut bindings::ib_client| {
                let mut client = bindings::ib_client {
                    name: T::NAME.as_char_ptr(),
                    add: Some(Self::add),
                    ..pin_init::zeroed()
                };
                client.set_no_kverbs_req(1);
                // SAFETY: `slot` is valid for writes; the client is pinned in `Self`.
                unsafe { slot.write(client) };
                // SAFETY: `slot` is initialised, and stays pinned until `drop` unregisters it;
                // `name` is `'static`.
                to_result(unsafe { bindings::ib_register_client(slot) })
            }),
            _t: PhantomData,
        })
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, with a device being registered (or registered) that
    /// stays allocated for the call.
    unsafe extern "C" fn add(dev: *mut bindings::ib_device) -> c_int {
        // SAFETY: Per the function's contract `dev` is allocated for the call.
        if let Some(dev) = unsafe { OtherDevice::try_get(dev) } {
            T::added(&dev);
        }
        // No per-device state: nothing to remove later.
        0
    }
}

#[pinned_drop]
impl<T: ClientHandler> PinnedDrop for ClientRegistration<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: By the type invariant `client` is registered.
        unsafe { bindings::ib_unregister_client(self.client.get()) };
    }
}

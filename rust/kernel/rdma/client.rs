// SPDX-License-Identifier: GPL-2.0

//! RDMA core clients (`struct ib_client`): told of every RDMA device the core registers, of
//! any provider.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::{device::OtherDevice, slot::ContextSlot};
use crate::{bindings, error::to_result, prelude::*, types::Opaque};
use core::marker::PhantomData;

/// Handles RDMA devices as the core registers them.
pub trait ClientHandler: 'static {
    /// The client's name.
    const NAME: &'static CStr;

    /// What the callbacks get, owned by the [`ClientRegistration`].
    type Context: Send + Sync;

    /// Where the callbacks find the context: the C callbacks carry none.
    const CONTEXT: &'static ContextSlot<Self::Context>;

    /// `dev` was enabled: registered, registered already when the client was, or moved to
    /// another RDMA namespace. Called in the context that does it (a driver's probe,
    /// `rdma link add`, module load), without `RTNL`; may sleep. The core holds the device
    /// for the call.
    fn added(ctx: &Self::Context, dev: &OtherDevice);

    /// `dev`, which [`Self::added`] saw, is being unregistered (or the client is): no longer
    /// findable by name, its ports still bound to their netdevs. Called in the context that
    /// unregisters it; may sleep. The core holds the device for the call.
    fn removed(ctx: &Self::Context, dev: &OtherDevice);
}

/// A registered client (`ib_register_client`). It asks for no verbs of the devices it sees.
///
/// # Invariants
///
/// `client` is registered with the RDMA core from construction until drop.
#[pin_data(PinnedDrop)]
pub struct ClientRegistration<T: ClientHandler> {
    #[pin]
    ctx: T::Context,
    #[pin]
    client: Opaque<bindings::ib_client>,
    _t: PhantomData<T>,
}

// SAFETY: The client is only touched by the RDMA core, under its own locking; `ctx` is `Send`.
unsafe impl<T: ClientHandler> Send for ClientRegistration<T> {}

// SAFETY: `&ClientRegistration` exposes nothing; the callbacks get `&T::Context`, which is `Sync`.
unsafe impl<T: ClientHandler> Sync for ClientRegistration<T> {}

impl<T: ClientHandler> ClientRegistration<T> {
    /// Registers the client with `ctx` for its callbacks; [`ClientHandler::added`] runs at
    /// once for every device there is. `EEXIST` if `T` is registered already.
    pub fn register(ctx: impl PinInit<T::Context, Error>) -> impl PinInit<Self, Error> {
        try_pin_init!(&this in Self {
            ctx <- ctx,
            client <- Opaque::try_ffi_init(move |slot: *mut bindings::ib_client| {
                // SAFETY: `ctx` is initialised (fields initialise in order) and pinned in `Self`,
                // whose `drop` releases the slot once no callback runs.
                unsafe { T::CONTEXT.claim(&raw mut (*this.as_ptr()).ctx) }?;
                let mut client = bindings::ib_client {
                    name: T::NAME.as_char_ptr(),
                    add: Some(Self::add),
                    remove: Some(Self::remove),
                    ..pin_init::zeroed()
                };
                client.set_no_kverbs_req(1);
                // SAFETY: `slot` is valid for writes; the client is pinned in `Self`.
                unsafe { slot.write(client) };
                // SAFETY: `slot` is initialised, and stays pinned until `drop` unregisters it;
                // `name` is `'static`.
                let res = to_result(unsafe { bindings::ib_register_client(slot) });
                if res.is_err() {
                    T::CONTEXT.release();
                }
                res
            }),
            _t: PhantomData,
        })
    }

    /// The context the callbacks get.
    pub fn context(&self) -> &T::Context {
        &self.ctx
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, with a device being registered (or registered) that
    /// stays allocated for the call.
    unsafe extern "C" fn add(dev: *mut bindings::ib_device) -> c_int {
        // SAFETY: The core calls `add` only while the client is registered; unregistration
        // waits for running callbacks before `drop` releases the slot.
        let Some(ctx) = (unsafe { T::CONTEXT.get() }) else {
            return 0;
        };
        // SAFETY: Per the function's contract `dev` is allocated for the call.
        if let Some(dev) = unsafe { OtherDevice::try_get(dev) } {
            T::added(ctx, &dev);
        }
        // No per-device state.
        0
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, with a device that `add` saw, allocated for the call.
    unsafe extern "C" fn remove(dev: *mut bindings::ib_device, _client_data: *mut c_void) {
        // SAFETY: As in `add`.
        let Some(ctx) = (unsafe { T::CONTEXT.get() }) else {
            return;
        };
        // SAFETY: Per the function's contract `dev` is allocated for the call; the core drops
        // its own registration reference only after removing every client.
        if let Some(dev) = unsafe { OtherDevice::try_get(dev) } {
            T::removed(ctx, &dev);
        }
    }
}

#[pinned_drop]
impl<T: ClientHandler> PinnedDrop for ClientRegistration<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: By the type invariant `client` is registered.
        unsafe { bindings::ib_unregister_client(self.client.get()) };
        // No callback runs any more: the context may go.
        T::CONTEXT.release();
    }
}

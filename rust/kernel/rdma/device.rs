// SPDX-License-Identifier: GPL-2.0

//! RDMA devices (`struct ib_device`), allocated by the RDMA core with the provider's data.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::ops::{Driver, OpsVTable};
use crate::{
    bindings,
    error::to_result,
    module::this_module,
    net::netdevice::NetDevice,
    prelude::*,
    sync::aref::ARef,
    types::Opaque, //
};
use core::{any::TypeId, marker::PhantomData, mem::MaybeUninit, ops::Deref, ptr::NonNull};

/// An RDMA device of provider `T`.
///
/// The core `kzalloc`s it (`_ib_alloc_device`) and frees it after `ops.dealloc_driver`, which
/// drops `data`. Once registered, the device may be unregistered and freed at any time by the
/// core (netlink `dellink`, module unload), so the provider holds it only through [`DeviceRef`]
/// or inside callbacks.
///
/// # Invariants
///
/// - `ib` is at offset 0, and `ops.owner` is `T`'s module once the ops are set.
/// - `tag` is `TypeId::of::<T>()` for every device that this type created.
/// - `data` is initialised whenever `ready` is true; every `&Device<T>` handed out has `ready`.
#[repr(C)]
pub struct Device<T: Driver> {
    ib: Opaque<bindings::ib_device>,
    tag: TypeId,
    ready: bool,
    data: MaybeUninit<T::Data>,
}

/// How to set up a device at registration.
pub struct DeviceOptions<'a> {
    /// Device name, e.g. `rxe0`; `%d` is not allowed (links are named by the user).
    pub name: &'a CStr,
    /// The network device of port 1.
    pub netdev: &'a NetDevice,
    /// Node GUID, in wire (big-endian) byte order.
    pub node_guid: [u8; 8],
    /// Node description (at most 63 bytes are kept).
    pub node_desc: &'a [u8],
    /// Extra `IB_USER_VERBS_CMD_*` bits to allow, beyond the core's defaults.
    pub uverbs_cmd_mask: u64,
}

/// What [`super::ops::Driver::modify_device`] is asked to change (`struct ib_device_modify`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceModify {
    /// A new system image GUID (`IB_DEVICE_MODIFY_SYS_IMAGE_GUID`).
    pub sys_image_guid: Option<u64>,
    /// A new node description (`IB_DEVICE_MODIFY_NODE_DESC`), as written to sysfs `node_desc`.
    pub node_desc: Option<[u8; 64]>,
}

impl<T: Driver> Device<T> {
    /// Sets the node description that sysfs `node_desc` and node-description MADs report.
    ///
    /// Call it from [`super::ops::Driver::modify_device`], which the core serialises with the
    /// other writers; readers (sysfs) print it without a lock, as with C providers.
    pub fn set_node_desc(&self, desc: &[u8; 64]) {
        // SAFETY: The device is live (`&self`); `node_desc` is an array of 64 `c_char` that only
        // `modify_device` writes after registration. Byte-wise volatile writes: a concurrent
        // reader sees old or new bytes, never torn accesses of wider words.
        unsafe {
            let dst = (*self.as_raw()).node_desc.as_mut_ptr();
            for (i, b) in desc.iter().enumerate() {
                // CAST: A byte of text; `c_char` has the same size.
                core::ptr::write_volatile(dst.add(i), *b as c_char);
            }
        }
    }

    /// Returns a reference to a device of `T` from its raw pointer.
    ///
    /// # Safety
    ///
    /// `ptr` is a device created by [`Device::register`] for this `T`, with `ready` set, that
    /// stays alive for `'a` (the core is in a callback for it, or a reference is held).
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::ib_device) -> &'a Self {
        // SAFETY: `ib` is at offset 0; the caller guarantees validity for `'a`.
        unsafe { &*ptr.cast::<Self>() }
    }

    /// Returns the raw `ib_device` pointer.
    pub fn as_raw(&self) -> *mut bindings::ib_device {
        self.ib.get()
    }

    /// Returns the provider's data.
    pub fn data(&self) -> &T::Data {
        // SAFETY: By the type invariant `data` is initialised for any `&Device<T>`.
        unsafe { self.data.assume_init_ref() }
    }

    /// Returns the device name.
    pub fn name(&self) -> &CStr {
        // SAFETY: `name` is a NUL-terminated array set before registration; it only changes
        // under the core's rename lock, and stays NUL-terminated.
        unsafe { CStr::from_char_ptr((*self.as_raw()).name.as_ptr()) }
    }

    /// Allocates, sets up and registers a device with `data`.
    ///
    /// On success the RDMA core owns the device: it is found again with [`Self::get_by_netdev`]
    /// and freed by the core on unregistration. Must not be called under `RTNL`.
    pub fn register(opts: &DeviceOptions<'_>, data: impl PinInit<T::Data, Error>) -> Result {
        let size = core::mem::size_of::<Self>();
        // SAFETY: `init_net` is a static; the size includes `ib_device` at offset 0.
        let raw = unsafe { bindings::_ib_alloc_device(size, &raw mut bindings::init_net) };
        let this = NonNull::new(raw.cast::<Self>()).ok_or(ENOMEM)?;
        let this = this.as_ptr();

        // SAFETY: `this` is a fresh zeroed allocation of `size` bytes, aligned for `Self` (kmalloc
        // of at least `ARCH_KMALLOC_MINALIGN`), not yet visible to anyone else. `data` is pinned
        // there until `dealloc_driver`.
        let res = unsafe {
            (&raw mut (*this).tag).write(TypeId::of::<T>());
            pin_init::raw_try_init((&raw mut (*this).data).cast::<T::Data>(), data)
        };
        if let Err(e) = res {
            // SAFETY: The ops are not set yet, so no `dealloc_driver` runs; this frees `raw`.
            unsafe { bindings::ib_dealloc_device(raw) };
            return Err(e);
        }

        // SAFETY: As above; from here on `ib_dealloc_device` drops `data` through the ops'
        // `dealloc_driver`. The fields written are the ones the provider owns before
        // registration.
        unsafe {
            // INVARIANT: `data` was initialised above.
            (*this).ready = true;
            let ib = &mut *raw;
            ib.node_type = bindings::RDMA_NODE_IB_CA as u8;
            ib.phys_port_cnt = 1;
            ib.num_comp_vectors = crate::cpu::nr_cpu_ids() as c_int;
            ib.local_dma_lkey = 0;
            ib.node_guid = u64::from_ne_bytes(opts.node_guid);
            ib.uverbs_cmd_mask |= opts.uverbs_cmd_mask;
            ib.name_assign_type = bindings::rdma_nl_name_assign_type_RDMA_NAME_ASSIGN_TYPE_USER;
            let n = opts.node_desc.len().min(ib.node_desc.len() - 1);
            for (d, s) in ib.node_desc.iter_mut().zip(&opts.node_desc[..n]) {
                // CAST: A byte of text; `c_char` has the same size.
                *d = *s as c_char;
            }
            // INVARIANT: The ops name `T`'s module as owner.
            bindings::ib_set_device_ops(raw, OpsVTable::<T>::build());
        }

        // SAFETY: `raw` is allocated with one port; `netdev` is registered (the caller holds a
        // reference) and the core takes its own reference.
        let res =
            to_result(unsafe { bindings::ib_device_set_netdev(raw, opts.netdev.as_raw(), 1) })
                .and_then(|()| {
                    // SAFETY: `raw` is fully set up; `name` is NUL-terminated. A NULL DMA device
                    // makes the core use virtual addresses, as software providers need.
                    to_result(unsafe {
                        bindings::ib_register_device(
                            raw,
                            opts.name.as_char_ptr(),
                            core::ptr::null_mut(),
                        )
                    })
                });
        if let Err(e) = res {
            // SAFETY: Registration failed, so the caller still owns `raw`; this runs
            // `dealloc_driver` (dropping `data`) and frees it.
            unsafe { bindings::ib_dealloc_device(raw) };
            return Err(e);
        }
        Ok(())
    }

    /// Finds the registered device of `T` bound to `netdev`, if any.
    pub fn get_by_netdev(netdev: &NetDevice) -> Option<DeviceRef<T>> {
        // SAFETY: `netdev` is valid; the core returns a device with its registration refcount
        // raised, or NULL.
        let raw = unsafe { bindings::ib_device_get_by_netdev(netdev.as_raw(), T::DRIVER_ID) };
        let raw = NonNull::new(raw)?;
        // SAFETY: `raw` is a registered `ib_device`, alive while we hold the reference.
        let owner = unsafe { (*raw.as_ptr()).ops.owner };
        // Only devices this abstraction created for `T` may be cast: same module, then same type.
        // SAFETY: Devices owned by `T`'s module are all `Device<_>`s created by `register`, so
        // `tag` is in bounds and initialised.
        let ours = owner == this_module::<T::OwnerModule>().as_ptr()
            && unsafe { (*raw.as_ptr().cast::<Self>()).tag } == TypeId::of::<T>();
        if !ours {
            // SAFETY: Drops the reference taken above.
            unsafe { bindings::ib_device_put(raw.as_ptr()) };
            return None;
        }
        // INVARIANT: `raw` is a registered `Device<T>` and we hold a registration reference.
        Some(DeviceRef(raw.cast()))
    }

    /// Returns the network device of `port`, with a reference held.
    pub fn netdev(&self, port: u32) -> Option<ARef<NetDevice>> {
        // SAFETY: `self` is valid; the core returns the netdev with `dev_hold` taken, or NULL.
        let nd = unsafe { bindings::ib_device_get_netdev(self.as_raw(), port) };
        // SAFETY: We own the reference the core took; `NetDevice` is transparent.
        NonNull::new(nd).map(|nd| unsafe { ARef::from_raw(nd.cast::<NetDevice>()) })
    }

    /// Returns `(speed, width)` in `IB_SPEED_*`/`IB_WIDTH_*` for `port`, from ethtool.
    ///
    /// Takes `RTNL`: never call it with `RTNL` held (netdev notifiers hold it).
    pub fn eth_speed(&self, port: u32) -> Result<(u16, u8)> {
        let (mut speed, mut width) = (0u16, 0u8);
        // SAFETY: `self` is valid; the out pointers are valid for writes.
        to_result(unsafe {
            bindings::ib_get_eth_speed(self.as_raw(), port, &mut speed, &mut width)
        })?;
        Ok((speed, width))
    }

    /// Tells the core's consumers the state of `port` from its netdev's current state.
    pub fn dispatch_port_state(&self, netdev: &NetDevice) {
        // SAFETY: `self` and `netdev` are valid.
        unsafe { bindings::ib_dispatch_port_state_event(self.as_raw(), netdev.as_raw()) };
    }

    /// Drops the provider data.
    ///
    /// # Safety
    ///
    /// Only from `dealloc_driver`, which the core calls once, before freeing `raw`.
    pub(crate) unsafe fn drop_data(raw: *mut bindings::ib_device) {
        let this = raw.cast::<Self>();
        // SAFETY: `raw` is a `Device<T>` (its ops are `T`'s); `data` is initialised when `ready`.
        unsafe {
            if (*this).ready {
                (*this).ready = false;
                (*this).data.assume_init_drop();
            }
        }
    }
}

// SAFETY: The core serialises the C side; provider data is `Send + Sync` by the `Driver` bounds.
unsafe impl<T: Driver> Send for Device<T> {}

// SAFETY: As for `Send`; shared access only reads or goes through the core.
unsafe impl<T: Driver> Sync for Device<T> {}

/// A registered device of any provider, seen through the core: what a provider may learn of a
/// device that is not its own (which netdev it serves, and how).
///
/// # Invariants
///
/// The pointer is a registered `ib_device` whose registration refcount we hold.
pub struct OtherDevice(NonNull<bindings::ib_device>);

impl OtherDevice {
    /// Driver ids tried by [`Self::hardware_roce_on`]: `enum rdma_driver_id` has fewer.
    const DRIVER_IDS: core::ops::RangeInclusive<u32> = 1..=63;

    /// The devices that run RoCE in hardware on `netdev`: a port of each on `netdev` speaks
    /// RoCE over an Ethernet link layer, and its driver id is not a software one
    /// ([`driver_id::SOFTWARE`]). A driver that sets no driver id goes unseen; every in-tree
    /// RoCE driver sets one.
    ///
    /// [`driver_id::SOFTWARE`]: super::attr::driver_id::SOFTWARE
    pub fn hardware_roce_on(netdev: &NetDevice) -> impl Iterator<Item = Self> + '_ {
        // The core looks a netdev up for one driver id at a time, or for the first device of
        // any: id by id, so a software device on the same netdev hides no hardware one.
        Self::DRIVER_IDS
            .filter(|id| !super::attr::driver_id::SOFTWARE.contains(id))
            .filter_map(|id| {
                // SAFETY: `netdev` is valid; the core returns a device with its registration
                // refcount raised, or NULL.
                let raw = unsafe { bindings::ib_device_get_by_netdev(netdev.as_raw(), id) };
                // INVARIANT: A registered device whose reference the core took for us.
                NonNull::new(raw).map(Self)
            })
            .filter(|dev| dev.roce_on(netdev))
    }

    /// Takes a registration reference on `raw`, unless it is being unregistered.
    ///
    /// # Safety
    ///
    /// `raw` points to an `ib_device` that stays allocated for the call (the core is in a
    /// client callback for it, say).
    pub(crate) unsafe fn try_get(raw: *mut bindings::ib_device) -> Option<Self> {
        let raw = NonNull::new(raw)?;
        // SAFETY: Per the function's contract `raw` is allocated; the refcount is only raised
        // if it is not zero (the device is registered).
        let held = unsafe { bindings::ib_device_try_get(raw.as_ptr()) };
        // INVARIANT: We hold a registration reference.
        held.then_some(Self(raw))
    }

    /// Whether a port of the device on `netdev` speaks RoCE over Ethernet.
    fn roce_on(&self, netdev: &NetDevice) -> bool {
        let mut port = 0u32;
        // SAFETY: By the type invariant the device is registered; `netdev` is valid; `port` is
        // valid for writes.
        let found =
            unsafe { bindings::ib_query_netdev_port(self.0.as_ptr(), netdev.as_raw(), &mut port) };
        found == 0 && self.roce_port(port)
    }

    /// Whether `port` (one of the device's) speaks RoCE over an Ethernet link layer.
    fn roce_port(&self, port: u32) -> bool {
        let raw = self.0.as_ptr();
        // SAFETY: By the type invariant `raw` is registered; `port` is one of its ports, so
        // within `port_data`.
        let roce = unsafe { bindings::rdma_protocol_roce(raw, port) };
        // SAFETY: As above.
        let ll = unsafe { bindings::rdma_port_get_link_layer(raw, port) };
        roce && ll == bindings::rdma_link_layer::IB_LINK_LAYER_ETHERNET
    }

    /// Whether its driver is not a software one ([`driver_id::SOFTWARE`]).
    ///
    /// [`driver_id::SOFTWARE`]: super::attr::driver_id::SOFTWARE
    pub fn is_hardware(&self) -> bool {
        !super::attr::driver_id::SOFTWARE.contains(&self.driver_id())
    }

    /// Calls `f` with each netdev on which the device runs RoCE in hardware: none for a
    /// software driver's device, nor for one that reports its netdevs through the legacy
    /// `get_netdev` op (mlx4): [`Self::hardware_roce_on`] cannot find those, and the two must
    /// agree.
    pub fn for_each_hardware_roce_netdev(&self, mut f: impl FnMut(&NetDevice)) {
        // SAFETY: By the type invariant the device is registered; its ops are set for good.
        let legacy = unsafe { (*self.0.as_ptr()).ops.get_netdev.is_some() };
        if !self.is_hardware() || legacy {
            return;
        }
        // SAFETY: By the type invariant we hold a registration reference: the port range is
        // set for good.
        let ports = unsafe {
            bindings::rdma_start_port(self.0.as_ptr())..=bindings::rdma_end_port(self.0.as_ptr())
        };
        for port in ports {
            if !self.roce_port(port) {
                continue;
            }
            // SAFETY: The device is registered and `port` is one of its ports; the core
            // returns the netdev with a reference taken, or NULL.
            let nd = unsafe { bindings::ib_device_get_netdev(self.0.as_ptr(), port) };
            if let Some(nd) = NonNull::new(nd) {
                // SAFETY: We own the reference the core took; `NetDevice` is transparent.
                let nd = unsafe { ARef::from_raw(nd.cast::<NetDevice>()) };
                f(&nd);
            }
        }
    }

    /// The device's name, as `rdma dev` shows it (for log lines: a rename meanwhile may show).
    pub fn name(&self) -> &CStr {
        // SAFETY: The device stays allocated while we hold its reference (type invariant).
        // `name` is an array that always holds a NUL: a rename (under the core's lock, which
        // we do not take) writes a new NUL-terminated name into it, so a read stays in bounds.
        unsafe { CStr::from_char_ptr((*self.0.as_ptr()).name.as_ptr()) }
    }

    /// The core's index of the device: unique among devices, and not reused soon (allocated
    /// cyclically), so it names a device that may be gone by the time it is compared.
    pub fn index(&self) -> u32 {
        // SAFETY: By the type invariant the device is registered; `index` is set for good.
        unsafe { (*self.0.as_ptr()).index }
    }

    /// The `enum rdma_driver_id` of its driver.
    pub fn driver_id(&self) -> u32 {
        // SAFETY: By the type invariant the device is registered; its ops are set for good.
        unsafe { (*self.0.as_ptr()).ops.driver_id }
    }
}

impl Clone for OtherDevice {
    fn clone(&self) -> Self {
        // SAFETY: By the type invariant we hold a registration reference, so the refcount is
        // not zero and `ib_device_try_get` takes another.
        let held = unsafe { bindings::ib_device_try_get(self.0.as_ptr()) };
        debug_assert!(held);
        // INVARIANT: We hold the reference just taken.
        Self(self.0)
    }
}

// SAFETY: A registration reference may be held and dropped on any thread.
unsafe impl Send for OtherDevice {}

// SAFETY: `&OtherDevice` only reads fields that are set for good while the device is
// registered, or asks the core, which locks.
unsafe impl Sync for OtherDevice {}

impl Drop for OtherDevice {
    fn drop(&mut self) {
        // SAFETY: By the type invariant we hold one registration reference.
        unsafe { bindings::ib_device_put(self.0.as_ptr()) };
    }
}

/// A registered device with its registration reference held (`ib_device_get_by_netdev`).
///
/// While it exists the core does not finish unregistering the device, so the memory stays.
///
/// # Invariants
///
/// The pointer is a registered `Device<T>` whose registration refcount we hold.
pub struct DeviceRef<T: Driver>(NonNull<Device<T>>);

impl<T: Driver> DeviceRef<T> {
    /// Queues the device for unregistration and freeing; safe under `RTNL` and in notifiers.
    pub fn unregister_queued(self) {
        // SAFETY: By the type invariant the device is registered and has `dealloc_driver`.
        unsafe { bindings::ib_unregister_device_queued(self.as_raw()) };
    }

    /// Unregisters the device and waits until it is gone, also when its unregistration was
    /// queued before. Sleeps: not under `RTNL`, nor in a notifier, nor in one of the device's
    /// own client callbacks, nor while holding another reference to it (the core waits for
    /// every reference).
    pub fn unregister(self) {
        let raw = self.as_raw();
        // The reference goes with the call below.
        core::mem::forget(self);
        // SAFETY: We held a registration reference, which this drops; the device has
        // `dealloc_driver`, so it is freed once unregistered, not by the caller.
        unsafe { bindings::ib_unregister_device_and_put(raw) };
    }
}

impl<T: Driver> Deref for DeviceRef<T> {
    type Target = Device<T>;

    fn deref(&self) -> &Device<T> {
        // SAFETY: By the type invariant the device is alive and `ready`.
        unsafe { self.0.as_ref() }
    }
}

impl<T: Driver> Drop for DeviceRef<T> {
    fn drop(&mut self) {
        // SAFETY: By the type invariant we hold one registration reference.
        unsafe { bindings::ib_device_put(self.as_raw()) };
    }
}

// SAFETY: The reference may be dropped from any thread.
unsafe impl<T: Driver> Send for DeviceRef<T> {}

// SAFETY: `&DeviceRef` only gives `&Device<T>`, which is `Sync`.
unsafe impl<T: Driver> Sync for DeviceRef<T> {}

/// Unregisters every device of `T` when dropped (`ib_unregister_driver`).
///
/// Keep it in the module's state and drop it at module exit, after link ops are unregistered
/// and before the netdev notifier goes (unregistering that replays events for every netdev).
pub struct DriverDevices<T: Driver>(PhantomData<T>);

impl<T: Driver> DriverDevices<T> {
    /// Creates the guard.
    pub fn new() -> Self {
        Self(PhantomData)
    }
}

impl<T: Driver> Default for DriverDevices<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Driver> Drop for DriverDevices<T> {
    fn drop(&mut self) {
        // SAFETY: Any context that may sleep; waits for queued unregistrations too.
        unsafe { bindings::ib_unregister_driver(T::DRIVER_ID) };
    }
}

// SPDX-License-Identifier: GPL-2.0

//! A module's own sysfs directory under `/sys/kernel` and attribute files in it
//! (`kobject_create_and_add`, `struct kobj_attribute`).
//!
//! C header: [`include/linux/sysfs.h`](srctree/include/linux/sysfs.h)

use crate::{
    bindings,
    error::to_result,
    prelude::*,
    str::Formatter,
    types::Opaque, //
};
use core::{fmt, ptr::NonNull};

/// A directory `/sys/kernel/<name>`, removed when dropped with its last file.
///
/// # Invariants
///
/// The pointer is a kobject from `kobject_create_and_add` whose reference we own.
pub struct KernelDir(NonNull<bindings::kobject>);

// SAFETY: A kobject reference may be used and dropped on any thread.
unsafe impl Send for KernelDir {}

// SAFETY: `&KernelDir` only lets files be added, which sysfs locks.
unsafe impl Sync for KernelDir {}

impl KernelDir {
    /// Creates `/sys/kernel/<name>`; `EEXIST` if it exists.
    pub fn new(name: &CStr) -> Result<Self> {
        // SAFETY: `kernel_kobj` is set at boot and never freed; `name` is copied.
        let kobj =
            unsafe { bindings::kobject_create_and_add(name.as_char_ptr(), bindings::kernel_kobj) };
        // INVARIANT: A non-NULL result is a new kobject whose reference we own.
        NonNull::new(kobj).map(Self).ok_or(EEXIST)
    }
}

impl Drop for KernelDir {
    fn drop(&mut self) {
        // SAFETY: By the type invariant we own this reference; the files in the directory hold
        // their own (see `AttrFile`), so the directory goes with the last of them.
        unsafe { bindings::kobject_put(self.0.as_ptr()) };
    }
}

/// What an attribute file shows, and takes when written.
pub trait Attr: Send + Sync + 'static {
    /// Writes the file's text; at most a page less a byte, the rest is cut. An error within
    /// that fails the read with `ENOMEM`.
    fn show(&self, out: &mut Formatter<'_>) -> fmt::Result;

    /// Takes what was written (one `write`); `EINVAL` for what it does not take.
    fn store(&self, _input: &[u8]) -> Result {
        Err(EPERM)
    }
}

/// A file in a [`KernelDir`], removed when dropped; reads and writes in progress finish first.
///
/// # Invariants
///
/// `attr` is added to `dir`, a kobject we hold a reference to, from construction until drop.
#[pin_data(PinnedDrop)]
pub struct AttrFile<T: Attr> {
    handler: T,
    #[pin]
    attr: Opaque<bindings::kobj_attribute>,
    dir: NonNull<bindings::kobject>,
}

// SAFETY: `dir` is a kobject reference, usable from any thread; `handler` is `Send`.
unsafe impl<T: Attr> Send for AttrFile<T> {}

// SAFETY: `&AttrFile` exposes nothing; sysfs calls the handler through `&T`, which is `Sync`.
unsafe impl<T: Attr> Sync for AttrFile<T> {}

impl<T: Attr> AttrFile<T> {
    /// Adds file `name` to `dir`, with permissions `mode` (e.g. `0o644`; without a write bit,
    /// writes are refused by sysfs). The file keeps the directory: `dir` may be dropped first.
    pub fn new<'a>(
        dir: &'a KernelDir,
        name: &'static CStr,
        mode: u16,
        handler: T,
    ) -> impl PinInit<Self, Error> + 'a {
        let kobj = dir.0;
        try_pin_init!(Self {
            handler,
            dir: kobj,
            attr <- Opaque::try_ffi_init(move |slot: *mut bindings::kobj_attribute| {
                let mut attr: bindings::kobj_attribute = pin_init::zeroed();
                attr.attr.name = name.as_char_ptr();
                attr.attr.mode = mode;
                // `sysfs_attr_init`: a file that is not in static memory names a static
                // lockdep class for its active references; one for all of them.
                #[cfg(CONFIG_DEBUG_LOCK_ALLOC)]
                {
                    attr.attr.key = crate::static_lock_class!().as_ptr();
                }
                attr.__bindgen_anon_1.show = Some(Self::show);
                attr.__bindgen_anon_2.store = Some(Self::store);
                // SAFETY: `slot` is valid for writes; the attribute is pinned in `Self`.
                unsafe { slot.write(attr) };
                // SAFETY: `kobj` is alive: `dir` is borrowed for as long as this initialiser
                // lives. The file holds a reference of its own until `drop` removes the file.
                unsafe { bindings::kobject_get(kobj.as_ptr()) };
                // SAFETY: `slot` is initialised and pinned until `drop` removes the file;
                // `name` is `'static`.
                let res = to_result(unsafe {
                    bindings::sysfs_create_file_ns(kobj.as_ptr(), &raw const (*slot).attr, core::ptr::null())
                });
                if res.is_err() {
                    // SAFETY: The reference taken above.
                    unsafe { bindings::kobject_put(kobj.as_ptr()) };
                }
                res
            }),
        })
    }

    /// # Safety
    ///
    /// `attr` is the `attr` of a live `Self` (sysfs calls this only while the file exists, and
    /// removing it waits for running calls).
    unsafe fn from_attr<'a>(attr: *mut bindings::kobj_attribute) -> &'a Self {
        // SAFETY: Per the function's contract `attr` is the field of a live, pinned `Self`.
        unsafe { &*crate::container_of!(Opaque::cast_from(attr).cast_mut(), Self, attr) }
    }

    /// # Safety
    ///
    /// Only sysfs calls this, for this file, with `buf` a page to write.
    unsafe extern "C" fn show(
        _kobj: *mut bindings::kobject,
        attr: *mut bindings::kobj_attribute,
        buf: *mut c_char,
    ) -> isize {
        // SAFETY: Per the function's contract.
        let this = unsafe { Self::from_attr(attr) };
        // sysfs takes at most a page less one byte (it warns at a full page).
        let room = crate::page::PAGE_SIZE - 1;
        // SAFETY: sysfs hands `show` a zeroed page, ours for the call.
        let page = unsafe { core::slice::from_raw_parts_mut(buf.cast::<u8>(), room) };
        let mut out = Formatter::new(page);
        let shown = this.handler.show(&mut out);
        let written = out.bytes_written();
        match shown {
            // Failed within the page: not a text cut short, an error (no memory, say).
            Err(_) if written <= room => ENOMEM.to_errno() as isize,
            // CAST: At most a page; a text too long for it is cut there.
            _ => written.min(room) as isize,
        }
    }

    /// # Safety
    ///
    /// Only sysfs calls this, for this file, with `count` bytes at `buf`.
    unsafe extern "C" fn store(
        _kobj: *mut bindings::kobject,
        attr: *mut bindings::kobj_attribute,
        buf: *const c_char,
        count: usize,
    ) -> isize {
        // SAFETY: Per the function's contract.
        let this = unsafe { Self::from_attr(attr) };
        // SAFETY: sysfs passes `count` readable bytes, ours for the call.
        let input = unsafe { core::slice::from_raw_parts(buf.cast::<u8>(), count) };
        match this.handler.store(input) {
            // CAST: `count` is at most a page.
            Ok(()) => count as isize,
            Err(e) => e.to_errno() as isize,
        }
    }
}

#[pinned_drop]
impl<T: Attr> PinnedDrop for AttrFile<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: By the type invariant the file is in `dir`; removing it waits for running
        // `show` and `store` calls. Then the reference the file held goes.
        unsafe {
            bindings::sysfs_remove_file_ns(
                self.dir.as_ptr(),
                &raw const (*self.attr.get()).attr,
                core::ptr::null(),
            );
            bindings::kobject_put(self.dir.as_ptr());
        }
    }
}

// SPDX-License-Identifier: GPL-2.0

//! CRC-32 from `lib/crc`.
//!
//! C header: [`include/linux/crc32.h`](srctree/include/linux/crc32.h)

/// Advances a reflected IEEE CRC-32 register (polynomial `0xedb88320`) over `data`, without
/// pre- or post-inversion.
///
/// The kernel picks the fastest implementation the CPU has (carry-less multiply on x86 and
/// arm64), which is why callers should prefer it to a table-driven CRC of their own.
///
/// # Examples
///
/// ```
/// use kernel::crc::crc32_le;
///
/// // The standard CRC-32 (as zlib and Ethernet compute it) inverts before and after.
/// assert_eq!(!crc32_le(!0, b"123456789"), 0xcbf4_3926);
/// // The register carries across pieces: feeding the data in two goes gives the same.
/// assert_eq!(crc32_le(crc32_le(!0, b"1234"), b"56789"), crc32_le(!0, b"123456789"));
/// ```
#[inline]
pub fn crc32_le(crc: u32, data: &[u8]) -> u32 {
    // SAFETY: `data` is valid for reads of `data.len()` bytes for the duration of the call, and
    // `crc32_le` reads nothing else.
    unsafe { crate::bindings::crc32_le(crc, data.as_ptr().cast(), data.len()) }
}

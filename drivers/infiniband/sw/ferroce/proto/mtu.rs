// SPDX-License-Identifier: GPL-2.0

//! Which IB MTU fits a link MTU.

/// Bytes of headers a RoCEv2 packet may carry besides its payload, as rxe counts them:
/// IPv6 (40) + UDP (8) + BTH (12) + the largest extension headers (16) + ICRC (4).
pub(crate) const ROCE_MAX_HDR_LEN: u32 = 80;

/// The bytes of an `enum ib_mtu` value (`IB_MTU_256` = 1 ... `IB_MTU_4096` = 5); `None` for
/// any other.
pub(crate) const fn ib_mtu_bytes(code: u32) -> Option<u32> {
    match code {
        1..=5 => Some(256 << (code - 1)),
        _ => None,
    }
}

/// The largest IB MTU (in bytes) whose packets fit `link_mtu`; 256 if none does.
pub(crate) fn ib_mtu_for_link(link_mtu: u32) -> u32 {
    let room = link_mtu.saturating_sub(ROCE_MAX_HDR_LEN);
    (1..)
        .map_while(ib_mtu_bytes)
        .filter(|&m| m <= room)
        .last()
        .unwrap_or(256)
}

#[cfg(test)]
mod tests {
    use super::{ib_mtu_bytes, ib_mtu_for_link};

    #[test]
    fn ib_mtu_codes() {
        let bytes: Vec<_> = (0..=6).map(ib_mtu_bytes).collect();
        let want = [
            None,
            Some(256),
            Some(512),
            Some(1024),
            Some(2048),
            Some(4096),
            None,
        ];
        assert_eq!(bytes, want);
    }

    #[test]
    fn rxe_compatible_mtus() {
        assert_eq!(ib_mtu_for_link(1500), 1024);
        assert_eq!(ib_mtu_for_link(9000), 4096);
        assert_eq!(ib_mtu_for_link(4176), 4096);
        assert_eq!(ib_mtu_for_link(4175), 2048);
        assert_eq!(ib_mtu_for_link(1104), 1024);
        assert_eq!(ib_mtu_for_link(1103), 512);
        assert_eq!(ib_mtu_for_link(68), 256);
        assert_eq!(ib_mtu_for_link(0), 256);
    }
}

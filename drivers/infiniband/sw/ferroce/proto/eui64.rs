// SPDX-License-Identifier: GPL-2.0

//! Modified EUI-64 identifiers (RFC 4291 appendix A), used as node, port and system GUIDs.

/// The modified EUI-64 of a 48-bit MAC: FF:FE in the middle, universal/local bit flipped.
pub(crate) fn from_mac(mac: [u8; 6]) -> [u8; 8] {
    [
        mac[0] ^ 0x02,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ]
}

/// A locally administered EUI-64 for a device without a MAC (e.g. tun), unique per `ifindex`
/// within one host.
pub(crate) fn from_ifindex(ifindex: u32) -> [u8; 8] {
    let i = ifindex.to_be_bytes();
    // 02:xx:xx is a locally administered MAC prefix; flipping the U/L bit makes it 00.
    from_mac([0x02, 0x00, i[0], i[1], i[2], i[3]])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_to_eui64() {
        assert_eq!(
            from_mac([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]),
            [0x50, 0x54, 0x00, 0xff, 0xfe, 0x12, 0x34, 0x56]
        );
        // A locally administered MAC gets the bit cleared.
        assert_eq!(from_mac([0x02, 0, 0, 0, 0, 1])[0], 0x00);
    }

    #[test]
    fn ifindex_guids_differ_and_are_stable() {
        assert_eq!(
            from_ifindex(7),
            [0x00, 0x00, 0x00, 0xff, 0xfe, 0x00, 0x00, 0x07]
        );
        assert_ne!(from_ifindex(7), from_ifindex(8));
    }
}

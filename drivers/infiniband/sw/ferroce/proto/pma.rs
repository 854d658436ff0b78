// SPDX-License-Identifier: GPL-2.0

//! The port's performance management agent (IBA 16.1): Get of ClassPortInfo, PortCounters and
//! PortCountersExtended, answered from the device's counters. The core asks it for the sysfs
//! `counters` files; a peer's PerfMgt MADs on QP1 reach it too.

/// Bytes of a MAD (`struct ib_mad`).
pub(crate) const MAD_LEN: usize = 256;

const BASE_VERSION: u8 = 1;
const CLASS_PERF_MGMT: u8 = 0x04;
const CLASS_VERSION: u8 = 1;
const METHOD_GET: u8 = 0x01;
const METHOD_SET: u8 = 0x02;
const METHOD_GET_RESP: u8 = 0x81;
/// Subnet management classes (LID-routed, directed-route): RoCE has no subnet manager.
const CLASS_SUBN_LID_ROUTED: u8 = 0x01;
const CLASS_SUBN_DIRECTED_ROUTE: u8 = 0x81;
/// MAD status: the method or attribute is not supported (IBA 13.4.7).
const STATUS_UNSUPPORTED_METHOD_ATTR: u16 = 0x000c;
/// MAD status: the class version is not supported.
const STATUS_BAD_VERSION: u16 = 0x0004;

const ATTR_CLASS_PORT_INFO: u16 = 0x0001;
const ATTR_PORT_COUNTERS: u16 = 0x0012;
const ATTR_PORT_COUNTERS_EXT: u16 = 0x001d;
/// ClassPortInfo.CapabilityMask: PortCountersExtended, without the (IETF) unicast and
/// multicast packet counters, which the port does not keep.
const CAP_EXT_WIDTH_NOIETF: u16 = 1 << 10;

/// Where a PerfMgt MAD's attribute starts: after the header and 40 reserved bytes.
const ATTR_AT: usize = 64;

/// The counters the agent reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PortCounters {
    pub(crate) xmit_bytes: u64,
    pub(crate) rcv_bytes: u64,
    pub(crate) xmit_packets: u64,
    pub(crate) rcv_packets: u64,
    pub(crate) link_downed: u64,
}

/// What to do with a received MAD.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MadAnswer {
    /// `out` holds the response.
    Reply,
    /// Not for the agent (another class, or a response): the MAD layer hands it to whoever
    /// registered for it.
    Pass,
    /// A subnet management MAD: RoCE has none; nothing is to be done with it.
    Consume,
}

/// Answers `mad` into `out` (whole, zeroed first) if it is a PerfMgt request: a Get of an
/// attribute the agent has, or a response with a status that says why not (a Set: the
/// counters are the port's, which no peer clears). Responses and other methods pass (to the
/// client waiting for them); subnet management is consumed.
pub(crate) fn answer(mad: &[u8; MAD_LEN], out: &mut [u8; MAD_LEN], c: &PortCounters) -> MadAnswer {
    match mad[1] {
        CLASS_PERF_MGMT if matches!(mad[3], METHOD_GET | METHOD_SET) => {}
        CLASS_SUBN_LID_ROUTED | CLASS_SUBN_DIRECTED_ROUTE => return MadAnswer::Consume,
        _ => return MadAnswer::Pass,
    }
    out.fill(0);
    // The header comes back, as a GetResp (the TID matches it to the request).
    out[..24].copy_from_slice(&mad[..24]);
    out[0] = BASE_VERSION;
    out[3] = METHOD_GET_RESP;
    out[6..8].fill(0);
    let attr = u16::from_be_bytes([mad[16], mad[17]]);
    let status = if mad[2] != CLASS_VERSION {
        STATUS_BAD_VERSION
    } else if mad[3] != METHOD_GET {
        STATUS_UNSUPPORTED_METHOD_ATTR
    } else {
        match attr {
            ATTR_CLASS_PORT_INFO => {
                let at = &mut out[ATTR_AT..];
                at[0] = BASE_VERSION;
                at[1] = CLASS_VERSION;
                at[2..4].copy_from_slice(&CAP_EXT_WIDTH_NOIETF.to_be_bytes());
                0
            }
            ATTR_PORT_COUNTERS => {
                port_counters(&mad[ATTR_AT..], &mut out[ATTR_AT..], c);
                0
            }
            ATTR_PORT_COUNTERS_EXT => {
                port_counters_ext(&mad[ATTR_AT..], &mut out[ATTR_AT..], c);
                0
            }
            _ => STATUS_UNSUPPORTED_METHOD_ATTR,
        }
    };
    out[4..6].copy_from_slice(&status.to_be_bytes());
    MadAnswer::Reply
}

/// PortCounters (IBA 16.1.3.5): 32-bit and narrower counters that stop at all ones; data in
/// units of four bytes.
fn port_counters(req: &[u8], out: &mut [u8], c: &PortCounters) {
    // PortSelect and CounterSelect come back as asked.
    out[1..4].copy_from_slice(&req[1..4]);
    out[7] = u8::try_from(c.link_downed).unwrap_or(u8::MAX);
    let narrow = |v: u64| u32::try_from(v).unwrap_or(u32::MAX).to_be_bytes();
    out[24..28].copy_from_slice(&narrow(c.xmit_bytes / 4));
    out[28..32].copy_from_slice(&narrow(c.rcv_bytes / 4));
    out[32..36].copy_from_slice(&narrow(c.xmit_packets));
    out[36..40].copy_from_slice(&narrow(c.rcv_packets));
}

/// PortCountersExtended (IBA 16.1.4.11): 64-bit data and packet counters.
fn port_counters_ext(req: &[u8], out: &mut [u8], c: &PortCounters) {
    out[1..4].copy_from_slice(&req[1..4]);
    out[8..16].copy_from_slice(&(c.xmit_bytes / 4).to_be_bytes());
    out[16..24].copy_from_slice(&(c.rcv_bytes / 4).to_be_bytes());
    out[24..32].copy_from_slice(&c.xmit_packets.to_be_bytes());
    out[32..40].copy_from_slice(&c.rcv_packets.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(attr: u16, port: u8) -> [u8; MAD_LEN] {
        let mut m = [0u8; MAD_LEN];
        m[..4].copy_from_slice(&[BASE_VERSION, CLASS_PERF_MGMT, CLASS_VERSION, METHOD_GET]);
        m[8..16].copy_from_slice(&0x1122_3344_5566_7788u64.to_be_bytes());
        m[16..18].copy_from_slice(&attr.to_be_bytes());
        m[ATTR_AT + 1] = port;
        m
    }

    const C: PortCounters = PortCounters {
        xmit_bytes: 4 * 0x1_0000_0005,
        rcv_bytes: 400,
        xmit_packets: 7,
        rcv_packets: 0x1_2345_6789,
        link_downed: 300,
    };

    fn ask(m: &[u8; MAD_LEN]) -> [u8; MAD_LEN] {
        let mut out = [0xaau8; MAD_LEN];
        assert_eq!(answer(m, &mut out, &C), MadAnswer::Reply);
        // A GetResp with the request's TID and attribute.
        assert_eq!(out[3], METHOD_GET_RESP);
        assert_eq!(out[8..18], m[8..18]);
        out
    }

    fn status(out: &[u8]) -> u16 {
        u16::from_be_bytes([out[4], out[5]])
    }

    #[test]
    fn class_port_info_offers_extended_counters() {
        let out = ask(&get(ATTR_CLASS_PORT_INFO, 0));
        assert_eq!(status(&out), 0);
        assert_eq!(
            u16::from_be_bytes([out[ATTR_AT + 2], out[ATTR_AT + 3]]),
            CAP_EXT_WIDTH_NOIETF
        );
    }

    #[test]
    fn narrow_counters_stop_at_all_ones() {
        let out = ask(&get(ATTR_PORT_COUNTERS, 1));
        let a = &out[ATTR_AT..];
        assert_eq!((status(&out), a[1], a[7]), (0, 1, 0xff));
        let be32 = |at: usize| u32::from_be_bytes(a[at..at + 4].try_into().unwrap());
        assert_eq!(
            (be32(24), be32(28), be32(32), be32(36)),
            (u32::MAX, 100, 7, u32::MAX)
        );
        // Nothing else is counted.
        assert!(a[40..].iter().all(|&b| b == 0));
    }

    #[test]
    fn extended_counters_are_whole() {
        let out = ask(&get(ATTR_PORT_COUNTERS_EXT, 1));
        let a = &out[ATTR_AT..];
        let be64 = |at: usize| u64::from_be_bytes(a[at..at + 8].try_into().unwrap());
        assert_eq!(status(&out), 0);
        assert_eq!(
            (be64(8), be64(16), be64(24), be64(32)),
            (0x1_0000_0005, 100, 7, 0x1_2345_6789)
        );
        assert!(a[40..].iter().all(|&b| b == 0));
    }

    #[test]
    fn unsupported_method_attribute_and_version_answer_with_a_status() {
        let mut set = get(ATTR_PORT_COUNTERS, 1);
        set[3] = METHOD_SET;
        assert_eq!(status(&ask(&set)), STATUS_UNSUPPORTED_METHOD_ATTR);
        assert_eq!(
            status(&ask(&get(0x0010, 1))),
            STATUS_UNSUPPORTED_METHOD_ATTR
        );
        let mut v2 = get(ATTR_PORT_COUNTERS, 1);
        v2[2] = 2;
        let out = ask(&v2);
        assert_eq!(status(&out), STATUS_BAD_VERSION);
        assert!(out[ATTR_AT..].iter().all(|&b| b == 0));
    }

    #[test]
    fn other_classes_and_responses_pass_subnet_management_is_consumed() {
        let mut out = [0u8; MAD_LEN];
        let mut cm = get(0x0010, 0);
        cm[1] = 0x07;
        assert_eq!(answer(&cm, &mut out, &C), MadAnswer::Pass);
        // A response (a peer's answer to a local client), a Trap and a TrapRepress: never
        // answered, or two agents would answer each other for ever.
        for method in [METHOD_GET_RESP, 0x05, 0x07] {
            let mut m = get(ATTR_PORT_COUNTERS, 1);
            m[3] = method;
            assert_eq!(answer(&m, &mut out, &C), MadAnswer::Pass, "{method:#x}");
        }
        for class in [CLASS_SUBN_LID_ROUTED, CLASS_SUBN_DIRECTED_ROUTE] {
            let mut smp = get(0x0015, 1);
            smp[1] = class;
            assert_eq!(answer(&smp, &mut out, &C), MadAnswer::Consume);
        }
    }
}

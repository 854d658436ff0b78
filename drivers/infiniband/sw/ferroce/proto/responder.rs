// SPDX-License-Identifier: GPL-2.0

//! The RC and UC responder's rules for the packets of a SEND or RDMA WRITE: the opcode sequence
//! and the packet lengths (IBA 9.7.5.1 and 9.8.3).

use super::opcode::Position;

/// The message a responder has under way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UnderWay {
    Nothing,
    Send,
    Write,
}

/// Whether a SEND (`write` false) or WRITE packet at `pos` with `len` payload bytes may come now:
/// a first or only packet starts a message when none is under way, a middle or last one goes on
/// with a message of its own kind; first and middle packets carry exactly one path MTU, last and
/// only ones at most one.
pub(crate) const fn request_fits(
    under: UnderWay,
    write: bool,
    pos: Position,
    len: usize,
    mtu: u32,
) -> bool {
    let mtu = mtu as usize;
    let sequence = match (pos.starts(), under) {
        (true, UnderWay::Nothing) => true,
        (true, _) => false,
        (false, UnderWay::Send) => !write,
        (false, UnderWay::Write) => write,
        (false, UnderWay::Nothing) => false,
    };
    let length = if pos.ends() { len <= mtu } else { len == mtu };
    sequence && length
}

#[cfg(test)]
mod tests {
    use super::*;
    use Position::*;
    use UnderWay::*;

    #[test]
    fn opcode_sequence() {
        // (under way, write, position, fits)
        let table = [
            (Nothing, false, Only, true),
            (Nothing, false, First, true),
            (Nothing, true, First, true),
            (Nothing, false, Middle, false),
            (Nothing, true, Last, false),
            (Send, false, Middle, true),
            (Send, false, Last, true),
            (Send, true, Middle, false),
            (Send, false, First, false),
            (Send, true, Only, false),
            (Write, true, Middle, true),
            (Write, true, Last, true),
            (Write, false, Last, false),
            (Write, true, First, false),
        ];
        for (under, write, pos, fits) in table {
            let len = if pos.ends() { 100 } else { 1024 };
            assert_eq!(
                request_fits(under, write, pos, len, 1024),
                fits,
                "{under:?} {write} {pos:?}"
            );
        }
    }

    #[test]
    fn packet_lengths() {
        assert!(request_fits(Nothing, false, First, 1024, 1024));
        assert!(!request_fits(Nothing, false, First, 1000, 1024));
        assert!(!request_fits(Send, false, Middle, 1028, 1024));
        assert!(request_fits(Send, false, Last, 1, 1024));
        assert!(!request_fits(Send, false, Last, 1025, 1024));
        assert!(request_fits(Nothing, true, Only, 0, 4096));
        assert!(!request_fits(Nothing, true, Only, 4096, 2048));
    }
}

// SPDX-License-Identifier: GPL-2.0

//! Netdev name patterns (the module parameter `auto_netdevs`): globs separated by commas,
//! `*` for any run of characters, `?` for one. Netdev names hold neither commas nor spaces.

/// Whether `name` matches one of the comma-separated globs in `patterns`; spaces around a
/// glob are ignored, and no glob (an empty list) matches nothing.
pub(crate) fn matches_any(patterns: &[u8], name: &[u8]) -> bool {
    patterns
        .split(|&b| b == b',')
        .map(|p| p.trim_ascii())
        .filter(|p| !p.is_empty())
        .any(|p| glob(p, name))
}

/// Whether `name` matches the glob `pattern`. Iterative: on a mismatch after a `*`, that star
/// takes one more byte, so the work is at most `pattern.len() * name.len()`.
fn glob(pattern: &[u8], name: &[u8]) -> bool {
    let (mut p, mut n) = (0, 0);
    // The last `*` seen, and where in `name` its run ends now.
    let mut star: Option<(usize, usize)> = None;
    while let Some(&c) = name.get(n) {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, n));
                p += 1;
            }
            Some(&pc) if pc == b'?' || pc == c => {
                p += 1;
                n += 1;
            }
            _ => match star {
                Some((sp, sn)) => {
                    star = Some((sp, sn + 1));
                    p = sp + 1;
                    n = sn + 1;
                }
                None => return false,
            },
        }
    }
    pattern
        .get(p..)
        .is_some_and(|rest| rest.iter().all(|&c| c == b'*'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        for (pattern, name, want) in [
            ("*", "eth0", true),
            ("*", "", true),
            ("eth*", "eth0", true),
            ("eth*", "eth", true),
            ("eth*", "veth0", false),
            ("eth?", "eth0", true),
            ("eth?", "eth10", false),
            ("*0", "veth0", true),
            ("*0", "veth01", false),
            ("v*h*1", "veth-ns1", true),
            ("v*h*1", "veth-ns2", false),
            ("a*b*c", "aXbYbZc", true),
            ("a*b*c", "aXbYbZ", false),
            ("**", "x", true),
            ("enp0s3", "enp0s3", true),
            ("enp0s3", "enp0s31", false),
            ("", "eth0", false),
            ("?", "", false),
        ] {
            assert_eq!(
                glob(pattern.as_bytes(), name.as_bytes()),
                want,
                "{pattern} {name}"
            );
        }
    }

    #[test]
    fn lists() {
        let p = b"eth*, enp*,,veth?";
        for (name, want) in [
            ("eth0", true),
            ("enp0s3", true),
            ("veth1", true),
            ("veth10", false),
            ("lo", false),
            ("bond0", false),
        ] {
            assert_eq!(matches_any(p, name.as_bytes()), want, "{name}");
        }
        assert!(!matches_any(b"", b"eth0"));
        assert!(!matches_any(b" , ", b"eth0"));
    }

    /// Backtracking stays bounded: a long name against many stars answers at once.
    #[test]
    fn many_stars() {
        let name = [b'a'; 15];
        assert!(!glob(b"*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b", &name));
        assert!(glob(b"*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*", &name));
    }
}

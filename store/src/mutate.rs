//! Damage for "never panics" tests and fuzzing: a valid encoding with bytes flipped,
//! replaced, inserted, removed or cut off. Starting from valid bytes gets past the headers
//! and checksums that random bytes almost never satisfy, so the decoders' inner checks
//! are exercised.

/// One edit: a position (taken modulo the length), what to do, and a byte.
pub type Edit = (usize, u8, u8);

/// Applies `edits` to a copy of `data`. Operation codes (modulo 6): flip bits with the
/// byte as a mask, replace, insert, remove, truncate at the position, or add 1 to a byte
/// (which turns lengths and counts off by one).
pub fn mutate(data: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut v = data.to_vec();
    for &(pos, op, byte) in edits {
        let len = v.len();
        if len == 0 {
            v.push(byte);
            continue;
        }
        let at = pos % len;
        match op % 6 {
            0 => v[at] ^= byte.max(1),
            1 => v[at] = byte,
            2 => v.insert(at, byte),
            3 => {
                v.remove(at);
            }
            4 => v.truncate(at),
            _ => v[at] = v[at].wrapping_add(1),
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_apply_in_order() {
        assert_eq!(mutate(b"abc", &[(1, 0, 0x20)]), b"aBc");
        assert_eq!(mutate(b"abc", &[(4, 3, 0)]), b"ac");
        assert_eq!(mutate(b"abc", &[(2, 4, 0), (0, 2, b'x')]), b"xab");
        assert_eq!(mutate(b"", &[(0, 3, b'z')]), b"z");
    }
}

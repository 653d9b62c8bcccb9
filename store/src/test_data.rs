//! Data for the store's unit tests.

/// Deterministic pseudo-random bytes (xorshift, one byte per step), incompressible: the
/// chunker cuts them as it would cut media.
pub(crate) fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

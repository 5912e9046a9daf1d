//! A small seedable generator for tests whose random choices must be reproducible from a seed
//! (the crash test's kill schedule, the generated manifests of the conversion test).

/// splitmix64: one 64-bit state, a full-period sequence, no dependencies.
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// The generator whose sequence `seed` names.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    /// The next number of the sequence.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

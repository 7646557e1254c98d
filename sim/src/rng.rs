//! A tiny deterministic PRNG (SplitMix64): scenarios are reproducible for a given seed, and
//! the crate needs no random-number dependency.

#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    /// An independent stream for one purpose, so adding draws in one place does not shift
    /// every other draw.
    pub fn fork(&self, purpose: u64) -> Rng {
        Rng::new(
            self.0.wrapping_mul(0xD6E8_FEB8_6659_FD93)
                ^ purpose.wrapping_mul(0xA076_1D64_78BD_642F),
        )
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `low..high` (`high > low`).
    pub fn range(&mut self, low: u64, high: u64) -> u64 {
        debug_assert!(high > low);
        low + self.next_u64() % (high - low)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn chance(&mut self, probability: f64) -> bool {
        self.unit() < probability
    }

    /// Log-uniform in `low..high`: sizes spread over orders of magnitude.
    pub fn log_range(&mut self, low: u64, high: u64) -> u64 {
        let (a, b) = ((low.max(1)) as f64, high as f64);
        let value = (a.ln() + self.unit() * (b.ln() - a.ln())).exp() as u64;
        value.clamp(low, high - 1)
    }

    pub fn fill(&mut self, bytes: &mut [u8]) {
        for chunk in bytes.chunks_mut(8) {
            let word = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }
}

//! The model's hash maps are keyed by what the kernel reports (tgids, node ids, uids) and by
//! app names from packages.list: nobody picks those keys to collide, so a multiplicative hash
//! is enough. SipHash, the standard map's, was the largest single cost of a daemon at
//! 100,000 events/s (`cargo xtask bench daemon`, perf: 17 % of its samples).
use std::{
    collections::HashMap,
    hash::{BuildHasherDefault, Hasher},
};

/// A `HashMap` with [`FastHasher`].
pub(super) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;

/// Fibonacci hashing, eight bytes at a time.
#[derive(Default)]
pub(super) struct FastHasher(u64);

impl Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u8(&mut self, value: u8) {
        self.write_u64(u64::from(value));
    }

    fn write_u32(&mut self, value: u32) {
        self.write_u64(u64::from(value));
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = (self.0 ^ value).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn write_usize(&mut self, value: usize) {
        self.write_u64(value as u64);
    }

    /// A product's low bits depend only on its inputs' low bits, and the table picks buckets
    /// by the low bits: bring the well-mixed high bits down.
    fn finish(&self) -> u64 {
        self.0.rotate_left(26)
    }
}

#[cfg(test)]
mod tests {
    use std::hash::BuildHasher as _;

    use super::*;

    #[test]
    fn names_that_differ_late_land_in_different_buckets() {
        let build = BuildHasherDefault::<FastHasher>::default();
        let low_bits = |name: &str| build.hash_one(name) & 0xff;
        let names = [
            "com.tencent.mm",
            "com.tencent.mo",
            "com.tencent.mn",
            "com.tencent.ml",
        ];
        let mut buckets: Vec<u64> = names.iter().map(|name| low_bits(name)).collect();
        buckets.dedup();
        assert_eq!(buckets.len(), names.len(), "{buckets:?}");
    }

    #[test]
    fn sequential_ids_spread() {
        let build = BuildHasherDefault::<FastHasher>::default();
        let buckets: std::collections::BTreeSet<u64> = (1000u32..1064)
            .map(|tgid| build.hash_one(tgid) & 63)
            .collect();
        assert!(
            buckets.len() > 32,
            "64 tgids in {} of 64 buckets",
            buckets.len()
        );
    }
}

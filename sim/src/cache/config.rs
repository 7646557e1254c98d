//! The cache's shape as a run-time setting: the compressed slot sizes and the shrinker's reclaim
//! weights. [`CacheConfig::rfc`] (the default) is the RFC's: slots of 256, 512 and 1024 bytes,
//! weights 16 (raw) : 1 : 2 : 4, and with it the cache does exactly what it did when both were
//! constants.
//!
//! Queues inside the cache: 0 is raw, 1..=n the slot sizes in increasing order, so a set of up
//! to [`MAX_SLOTS`] sizes needs no more than [`CACHE_QUEUES`] queues. Events keep
//! `tracer_common`'s four queue values (raw, 256, 512, 1024) that the kernel side reports:
//! [`CacheConfig::event_queue`] names, for a cache queue, the RFC queue whose slot is the
//! smallest one at least as large (1024 for anything larger). With the RFC's set this is the
//! identity.
use anyhow::{bail, ensure, Result};
use tracer_common::{QUEUE_1024, QUEUE_COUNT, QUEUE_RAW, QUEUE_SLOT_BYTES};

/// Most slot sizes a set may have.
pub const MAX_SLOTS: usize = 7;
/// Raw plus one queue per slot size.
pub const CACHE_QUEUES: usize = 1 + MAX_SLOTS;
/// A raw entry's bytes.
pub const RAW_BYTES: u32 = 4096;

/// Compressed slot sizes, increasing, each a multiple of 64 below 4096.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SlotSet {
    sizes: [u32; MAX_SLOTS],
    len: u8,
}

impl SlotSet {
    /// The RFC's slabs.
    pub const RFC: SlotSet = SlotSet {
        sizes: [256, 512, 1024, 0, 0, 0, 0],
        len: 3,
    };

    pub fn new(sizes: &[u32]) -> Result<SlotSet> {
        ensure!(
            !sizes.is_empty() && sizes.len() <= MAX_SLOTS,
            "a slot set has 1 to {MAX_SLOTS} sizes, not {}",
            sizes.len()
        );
        for pair in sizes.windows(2) {
            ensure!(pair[0] < pair[1], "slot sizes must increase: {sizes:?}");
        }
        for size in sizes {
            ensure!(
                *size > 0 && *size < RAW_BYTES && size % 64 == 0,
                "slot size {size} is not a multiple of 64 between 64 and 4032"
            );
        }
        let mut set = SlotSet {
            sizes: [0; MAX_SLOTS],
            len: sizes.len() as u8,
        };
        set.sizes[..sizes.len()].copy_from_slice(sizes);
        Ok(set)
    }

    /// "256/512/1024".
    pub fn parse(text: &str) -> Result<SlotSet> {
        let sizes = text
            .split('/')
            .map(|s| s.trim().parse::<u32>())
            .collect::<Result<Vec<u32>, _>>()
            .map_err(|e| anyhow::anyhow!("slot set {text:?}: {e} (want e.g. 256/512/1024)"))?;
        SlotSet::new(&sizes)
    }

    pub fn sizes(&self) -> &[u32] {
        &self.sizes[..self.len as usize]
    }

    pub fn largest(&self) -> u32 {
        self.sizes()[self.sizes().len() - 1]
    }

    /// The smallest slot that holds `clen` bytes, with its cache queue (1-based).
    pub fn slot_for(&self, clen: u32) -> Option<(u32, u8)> {
        let index = self.sizes().iter().position(|bytes| clen <= *bytes)?;
        Some((self.sizes[index], index as u8 + 1))
    }

    pub fn label(&self) -> String {
        let sizes: Vec<String> = self.sizes().iter().map(u32::to_string).collect();
        sizes.join("/")
    }
}

impl Default for SlotSet {
    fn default() -> Self {
        SlotSet::RFC
    }
}

/// Reclaim weights, raw first then one per slot size (the same count as the slot set's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Weights {
    by_queue: [u64; CACHE_QUEUES],
    len: u8,
}

impl Weights {
    /// The RFC's: each entry's memory in 256-byte units.
    pub const RFC: Weights = Weights {
        by_queue: [16, 1, 2, 4, 0, 0, 0, 0],
        len: 4,
    };

    pub fn new(weights: &[u64]) -> Result<Weights> {
        ensure!(
            weights.len() >= 2 && weights.len() <= CACHE_QUEUES,
            "reclaim weights are raw then one per slot size (2 to {CACHE_QUEUES} numbers), \
             not {}",
            weights.len()
        );
        ensure!(
            weights.iter().all(|w| *w <= 1 << 16),
            "a reclaim weight above 65536: {weights:?}"
        );
        ensure!(
            weights.iter().any(|w| *w > 0),
            "reclaim weights all 0: nothing could ever be reclaimed"
        );
        let mut out = Weights {
            by_queue: [0; CACHE_QUEUES],
            len: weights.len() as u8,
        };
        out.by_queue[..weights.len()].copy_from_slice(weights);
        Ok(out)
    }

    /// "16:1:2:4".
    pub fn parse(text: &str) -> Result<Weights> {
        let weights = text
            .split(':')
            .map(|s| s.trim().parse::<u64>())
            .collect::<Result<Vec<u64>, _>>()
            .map_err(|e| anyhow::anyhow!("weights {text:?}: {e} (want e.g. 16:1:2:4)"))?;
        Weights::new(&weights)
    }

    pub fn get(&self, queue: usize) -> u64 {
        self.by_queue[queue]
    }

    pub fn len(&self) -> usize {
        self.len as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// "16:1:2:4".
    pub fn label(&self) -> String {
        let weights: Vec<String> = self.by_queue[..self.len()]
            .iter()
            .map(u64::to_string)
            .collect();
        weights.join(":")
    }
}

impl Default for Weights {
    fn default() -> Self {
        Weights::RFC
    }
}

/// Both serialize as their label ("256/512/1024", "16:1:2:4"), the form the command line takes.
impl serde::Serialize for SlotSet {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.label())
    }
}

impl serde::Serialize for Weights {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.label())
    }
}

/// Slot sizes and weights, checked to agree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub struct CacheConfig {
    pub slots: SlotSet,
    pub weights: Weights,
    /// Event queue value of each cache queue.
    #[serde(skip)]
    event_queues: [u8; CACHE_QUEUES],
}

impl CacheConfig {
    pub fn rfc() -> CacheConfig {
        CacheConfig::new(SlotSet::RFC, Weights::RFC).expect("the RFC's shape is consistent")
    }

    pub fn new(slots: SlotSet, weights: Weights) -> Result<CacheConfig> {
        if weights.len() != 1 + slots.sizes().len() {
            bail!(
                "{} reclaim weights ({}) for slot set {}: give raw then one per slot size",
                weights.len(),
                weights.label(),
                slots.label()
            );
        }
        let mut event_queues = [QUEUE_RAW; CACHE_QUEUES];
        for (index, bytes) in slots.sizes().iter().enumerate() {
            event_queues[index + 1] = (1..QUEUE_COUNT)
                .find(|q| QUEUE_SLOT_BYTES[*q] >= *bytes)
                .map_or(QUEUE_1024, |q| q as u8);
        }
        Ok(CacheConfig {
            slots,
            weights,
            event_queues,
        })
    }

    /// Queues in use: raw plus one per slot size.
    pub fn queue_count(&self) -> usize {
        1 + self.slots.sizes().len()
    }

    /// The queue value events carry for cache queue `queue`.
    pub fn event_queue(&self, queue: u8) -> u8 {
        self.event_queues[queue as usize]
    }

    /// Bytes an entry of `queue` holds (raw: 4096; compressed: its slot).
    pub fn queue_bytes(&self, queue: u8) -> u32 {
        match queue {
            0 => RAW_BYTES,
            q => self.slots.sizes()[q as usize - 1],
        }
    }

    /// The raw weight is the unit of the effective count (1 when raw entries weigh nothing).
    pub fn weight_unit(&self) -> u64 {
        self.weights.get(0).max(1)
    }
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig::rfc()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracer_common::{QUEUE_256, QUEUE_512};

    #[test]
    fn the_rfc_shape_maps_queues_to_themselves() {
        let c = CacheConfig::rfc();
        assert_eq!(c.queue_count(), 4);
        assert_eq!(
            (0..4).map(|q| c.event_queue(q)).collect::<Vec<_>>(),
            [QUEUE_RAW, QUEUE_256, QUEUE_512, QUEUE_1024]
        );
        assert_eq!(
            (0..4).map(|q| c.queue_bytes(q)).collect::<Vec<_>>(),
            QUEUE_SLOT_BYTES
        );
        assert_eq!(c.weights.label(), "16:1:2:4");
        assert_eq!(c.slots.label(), "256/512/1024");
    }

    #[test]
    fn other_sets_map_to_the_nearest_rfc_queue_at_least_as_large() {
        let slots = SlotSet::parse("128/256/512/1024").unwrap();
        let c = CacheConfig::new(slots, Weights::parse("16:1:1:2:4").unwrap()).unwrap();
        assert_eq!(
            (1..5).map(|q| c.event_queue(q)).collect::<Vec<_>>(),
            [QUEUE_256, QUEUE_256, QUEUE_512, QUEUE_1024]
        );
        let big = SlotSet::parse("512/1024/2048").unwrap();
        let c = CacheConfig::new(big, Weights::RFC).unwrap();
        assert_eq!(c.event_queue(3), QUEUE_1024);
        assert_eq!(c.queue_bytes(3), 2048);
        assert_eq!(big.slot_for(1025), Some((2048, 3)));
        assert_eq!(big.slot_for(2049), None);
    }

    #[test]
    fn bad_shapes_are_refused_with_a_reason() {
        let err = |r: Result<CacheConfig>| r.unwrap_err().to_string();
        assert!(SlotSet::parse("512/256").is_err());
        assert!(SlotSet::parse("100").is_err());
        assert!(SlotSet::parse("256/4096").is_err());
        assert!(SlotSet::parse("a/b").is_err());
        assert!(Weights::parse("0:0:0:0").is_err());
        assert!(Weights::parse("16").is_err());
        let mismatch = err(CacheConfig::new(
            SlotSet::RFC,
            Weights::parse("1:1").unwrap(),
        ));
        assert!(mismatch.contains("one per slot size"), "{mismatch}");
    }
}

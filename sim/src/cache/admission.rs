//! Compression and admission: LZ4-compress a raw block; keep the result only when it is within
//! the threshold (percent of 4096) and the largest slot (1024 bytes in the RFC's set), in the
//! smallest slot that holds it. The slot set is the cache's ([`SlotSet`]); queues are the
//! cache's own numbering (raw 0, then one per slot size).
use super::{config::SlotSet, lz4};
use crate::f2fs::{crc::f2fs_crc32, Block};

/// The outcome of compressing one block.
pub enum Admission {
    /// Retained: the payload in its slot, the slot's queue, the block's CRC.
    Admit {
        slot: Box<[u8]>,
        clen: u32,
        slot_bytes: u32,
        queue: u8,
        crc: u32,
    },
    /// Over the threshold or the 1024-byte limit.
    Reject { clen: u32 },
}

/// The maximum retained payload for a threshold (percent) and a slot set.
pub fn limit_bytes(threshold_percent: u32, slots: &SlotSet) -> u32 {
    (4096 * threshold_percent / 100).min(slots.largest())
}

/// The slot and queue of a payload of `clen` bytes, or `None` when it is not retained.
pub fn decide(clen: u32, threshold_percent: u32, slots: &SlotSet) -> Option<(u32, u8)> {
    if clen > limit_bytes(threshold_percent, slots) {
        return None;
    }
    Some(
        slots
            .slot_for(clen)
            .expect("clen <= the largest slot fits a slot"),
    )
}

/// Compress `block` and decide.
pub fn compress(block: &Block, threshold_percent: u32, slots: &SlotSet) -> Admission {
    let mut scratch = [0u8; lz4::MAX_COMPRESSED];
    let len = lz4::compress_into(block, &mut scratch);
    let payload = &scratch[..len];
    let clen = len as u32;
    let Some((slot_bytes, queue)) = decide(clen, threshold_percent, slots) else {
        return Admission::Reject { clen };
    };
    let mut slot = vec![0u8; slot_bytes as usize].into_boxed_slice();
    slot[..payload.len()].copy_from_slice(payload);
    Admission::Admit {
        slot,
        clen,
        slot_bytes,
        queue,
        crc: f2fs_crc32(&block[..]),
    }
}

/// Decide on a known compressed length (`Payload::Sizes`): the same rule, no bytes kept.
pub fn admit_size(clen: u32, threshold_percent: u32, slots: &SlotSet) -> Admission {
    match decide(clen, threshold_percent, slots) {
        Some((slot_bytes, queue)) => Admission::Admit {
            slot: Box::default(),
            clen,
            slot_bytes,
            queue,
            crc: 0,
        },
        None => Admission::Reject { clen },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracer_common::{QUEUE_1024, QUEUE_256, QUEUE_512};

    const RFC: SlotSet = SlotSet::RFC;

    #[test]
    fn threshold_and_the_1024_limit_both_bound_admission() {
        assert_eq!(limit_bytes(0, &RFC), 0);
        assert_eq!(limit_bytes(5, &RFC), 204);
        assert_eq!(limit_bytes(25, &RFC), 1024);
        assert_eq!(limit_bytes(100, &RFC), 1024);
        assert_eq!(RFC.slot_for(1), Some((256, QUEUE_256)));
        assert_eq!(RFC.slot_for(256), Some((256, QUEUE_256)));
        assert_eq!(RFC.slot_for(257), Some((512, QUEUE_512)));
        assert_eq!(RFC.slot_for(1024), Some((1024, QUEUE_1024)));
        assert_eq!(RFC.slot_for(1025), None);
    }

    #[test]
    fn the_largest_slot_of_another_set_bounds_admission() {
        let big = SlotSet::parse("512/1024/2048").unwrap();
        assert_eq!(limit_bytes(25, &big), 1024);
        assert_eq!(limit_bytes(60, &big), 2048);
        assert_eq!(decide(100, 25, &big), Some((512, 1)));
        assert_eq!(decide(1500, 60, &big), Some((2048, 3)));
        assert_eq!(decide(1500, 25, &big), None);
        let small = SlotSet::parse("64/128").unwrap();
        assert_eq!(decide(129, 25, &small), None);
    }

    #[test]
    fn zero_block_is_admitted_in_256_and_noise_is_rejected() {
        let zeros = [0u8; 4096];
        match compress(&zeros, 25, &RFC) {
            Admission::Admit {
                slot_bytes, clen, ..
            } => {
                assert_eq!(slot_bytes, 256);
                assert!(clen < 64);
            }
            Admission::Reject { .. } => panic!("zeros must compress"),
        }
        assert!(matches!(
            compress(&zeros, 0, &RFC),
            Admission::Reject { .. }
        ));
        let mut noise = [0u8; 4096];
        crate::rng::Rng::new(1).fill(&mut noise);
        assert!(matches!(compress(&noise, 100, &RFC), Admission::Reject { clen } if clen > 4096));
    }
}

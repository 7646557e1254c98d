//! F2FS's CRC: the reflected CRC-32 polynomial (0xEDB88320) run from a seed, without the
//! initial and final inversions of the usual "CRC-32" (the kernel's `crc32_le`).
//! crc32fast computes `!crc32_le(!seed, data)`, so we invert on the way in and out.

/// `F2FS_SUPER_MAGIC`, also the seed of superblock and checkpoint CRCs.
pub const F2FS_MAGIC: u32 = 0xF2F5_2010;

/// `crc32_le(seed, data)`, as `f2fs_chksum` computes it.
pub fn crc32_le(seed: u32, data: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new_with_initial(!seed);
    hasher.update(data);
    !hasher.finalize()
}

/// `f2fs_crc32(sbi, data, len)`: seeded with the magic (superblock and checkpoint).
pub fn f2fs_crc32(data: &[u8]) -> u32 {
    crc32_le(F2FS_MAGIC, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bit-at-a-time reference, as f2fs-tools' `f2fs_cal_crc32` writes it.
    fn reference(mut crc: u32, data: &[u8]) -> u32 {
        for byte in data {
            crc ^= u32::from(*byte);
            for _ in 0..8 {
                crc = (crc >> 1) ^ if crc & 1 != 0 { 0xEDB8_8320 } else { 0 };
            }
        }
        crc
    }

    #[test]
    fn matches_the_bitwise_reference() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
        assert_eq!(f2fs_crc32(&data), reference(F2FS_MAGIC, &data));
        assert_eq!(crc32_le(!0, &data[..16]), reference(!0, &data[..16]));
        assert_eq!(crc32_le(5, &[]), 5);
    }
}

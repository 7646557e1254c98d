//! A compact form of an image for fuzzing the reader (an F2FS image is tens of megabytes of
//! mostly zeros, too big for a fuzzer to mutate): a little-endian u32 size in 4 KiB blocks (at
//! most [`MAX_BLOCKS`]), then runs of bytes, each a u32 byte offset, a u16 length and the
//! bytes. Runs past the end of the image are cut; a short run header ends the input.
//! `tracer-user/fuzz/seeds/sparse_image.py` turns a real image into this form.
use std::{fs::File, io, os::unix::fs::FileExt as _};

use super::BLOCK_SIZE;

/// 256 MiB of logical size: written as a sparse file, it costs nothing on disk.
pub const MAX_BLOCKS: u64 = 1 << 16;

/// Write the image `input` describes over `file` (emptied first). `Ok(false)`: `input` is too
/// short to give a size, and nothing was written.
pub fn write_image(input: &[u8], file: &File) -> io::Result<bool> {
    let Some((size, mut runs)) = input.split_first_chunk::<4>() else {
        return Ok(false);
    };
    let len = u64::from(u32::from_le_bytes(*size)).min(MAX_BLOCKS) * BLOCK_SIZE as u64;
    file.set_len(0)?;
    file.set_len(len)?;
    while let Some((header, rest)) = runs.split_first_chunk::<6>() {
        let offset = u64::from(u32::from_le_bytes([
            header[0], header[1], header[2], header[3],
        ]));
        let run_len = usize::from(u16::from_le_bytes([header[4], header[5]])).min(rest.len());
        let (bytes, after) = rest.split_at(run_len);
        let fits = len.saturating_sub(offset).min(bytes.len() as u64) as usize;
        file.write_all_at(&bytes[..fits], offset)?;
        runs = after;
    }
    Ok(true)
}

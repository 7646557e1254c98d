//! The simulator's LZ4 block codec: one place that compresses and decompresses node blocks, so
//! that the benchmark (`cargo xtask bench sim`) measures exactly what admission and restore run.
//!
//! Compression is lz4_flex built without `safe-encode` (its unsafe encoder is faster and never
//! writes past the `MAX_COMPRESSED` buffer it asserts on). Decompression is ours, in safe Rust:
//! node blocks compress to about 100 bytes, mostly long overlapping matches (runs of zeros),
//! which lz4_flex copies a byte at a time (0.3x C liblz4 on real blocks); here a run is a
//! `fill` and a repeating pattern is copied in doubling `copy_within` steps. Every read and
//! write is bounds-checked, so a corrupt payload is an error, never a panic or an overrun; the
//! restore's CRC, footer, checksum and type checks then catch what still decodes.
use crate::f2fs::Block;

/// The output room lz4_flex asks for when compressing a 4 KiB block (more than LZ4's own
/// bound; with less it refuses).
pub const MAX_COMPRESSED: usize = lz4_flex::block::get_maximum_output_size(4096);

/// LZ4's shortest match.
const MIN_MATCH: usize = 4;

/// Compress `block` into `out`, returning the payload length.
pub fn compress_into(block: &Block, out: &mut [u8; MAX_COMPRESSED]) -> usize {
    lz4_flex::block::compress_into(&block[..], &mut out[..])
        .expect("the output holds lz4_flex's bound for a 4 KiB block")
}

/// Decompress the LZ4 block `payload` into `out` (a node block, or any buffer: recordings'
/// event blocks are mostly zeros too): the decompressed length, or None when the payload is
/// not a whole, valid LZ4 block or its output does not fit `out`.
pub fn decompress_into(payload: &[u8], out: &mut [u8]) -> Option<usize> {
    let mut input = Reader { payload, at: 0 };
    let mut pos = 0;
    loop {
        let token = input.byte()?;
        let literals = input.length(usize::from(token >> 4))?;
        let source = input.take(literals)?;
        out.get_mut(pos..pos + literals)?.copy_from_slice(source);
        pos += literals;
        if input.done() {
            return Some(pos);
        }
        let offset = usize::from(u16::from_le_bytes([input.byte()?, input.byte()?]));
        let length = input.length(usize::from(token & 15))? + MIN_MATCH;
        copy_match(out, pos, offset, length)?;
        pos += length;
        // A block ends with literals, never with a match.
        if input.done() {
            return None;
        }
    }
}

/// Copy `length` bytes from `offset` bytes back to `pos`, the regions possibly overlapping
/// (then the copy repeats the last `offset` bytes). None when out of bounds.
fn copy_match(out: &mut [u8], pos: usize, offset: usize, length: usize) -> Option<()> {
    if offset == 0 || offset > pos || length > out.len() - pos {
        return None;
    }
    let start = pos - offset;
    if offset >= length {
        out.copy_within(start..start + length, pos);
    } else if offset == 1 {
        let byte = out[start];
        out[pos..pos + length].fill(byte);
    } else {
        // [start, pos + done) repeats with period `offset`; `done` stays a multiple of it, so
        // copying from `start` continues the pattern, twice as much each step.
        let mut done = 0;
        while done < length {
            let step = (offset + done).min(length - done);
            out.copy_within(start..start + step, pos + done);
            done += step;
        }
    }
    Some(())
}

/// The payload being read, every read bounds-checked.
struct Reader<'a> {
    payload: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn done(&self) -> bool {
        self.at == self.payload.len()
    }

    fn byte(&mut self) -> Option<u8> {
        let byte = *self.payload.get(self.at)?;
        self.at += 1;
        Some(byte)
    }

    fn take(&mut self, count: usize) -> Option<&'a [u8]> {
        let bytes = self.payload.get(self.at..self.at.checked_add(count)?)?;
        self.at += count;
        Some(bytes)
    }

    /// A token nibble plus, when it is 15, the bytes that follow (255 means "more").
    fn length(&mut self, nibble: usize) -> Option<usize> {
        let mut length = nibble;
        if nibble == 15 {
            loop {
                let more = self.byte()?;
                length += usize::from(more);
                // Bounded by the payload's length, so no overflow: at most ~255 per byte read.
                if more != 255 {
                    break;
                }
            }
        }
        Some(length)
    }
}

//! Writing recordings: events are batched into compressed, checksummed blocks.
use std::io::Write;

use anyhow::{Context as _, Result};
use tracer_common::{Decoded, Event, EventKind};

use super::{
    Footer, Header, Note, EVENTS_PER_BLOCK, MAGIC, TAG_EVENTS, TAG_FOOTER, TAG_NOTE, VERSION,
};

pub struct Writer<W: Write> {
    out: W,
    pending: Vec<u8>,
    pending_events: u32,
    /// The events block as written: count, then the LZ4 block. Kept from block to block, so
    /// that a block costs no allocation (a few hundred KiB each, at up to 24 blocks/s).
    payload: Vec<u8>,
    footer: Footer,
    /// Bytes written so far (for the bytes-per-event figure).
    written: u64,
}

impl<W: Write> Writer<W> {
    pub fn new(mut out: W, header: &Header) -> Result<Writer<W>> {
        let json = serde_json::to_vec(header).context("encoding the header")?;
        let mut bytes = Vec::with_capacity(json.len() + 18);
        bytes.extend_from_slice(&MAGIC);
        bytes.extend_from_slice(&VERSION.to_le_bytes());
        bytes.extend_from_slice(&(json.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&json);
        bytes.extend_from_slice(&crc32fast::hash(&json).to_le_bytes());
        out.write_all(&bytes).context("writing the header")?;
        // At once: a recording killed early still names what it holds.
        out.flush().context("writing the header")?;
        Ok(Writer {
            out,
            pending: Vec::with_capacity(EVENTS_PER_BLOCK * super::EVENT_BYTES),
            payload: Vec::new(),
            pending_events: 0,
            footer: Footer::default(),
            written: bytes.len() as u64,
        })
    }

    pub fn event(&mut self, event: &Event) -> Result<()> {
        self.pending.extend_from_slice(event.as_bytes());
        self.pending_events += 1;
        self.footer.events += 1;
        self.footer.end_ns = self.footer.end_ns.max(event.ts_ns);
        // Decoded only when it is one: the kind byte first (every event passes here).
        if event.kind == EventKind::Lost as u8 {
            if let Decoded::Lost { count } = event.decode() {
                self.footer.lost += u64::from(count);
            }
        }
        if self.pending_events as usize >= EVENTS_PER_BLOCK {
            self.flush_block()?;
        }
        Ok(())
    }

    /// `event` for each of `events`, their bytes copied a block's share at a time.
    pub fn events(&mut self, events: &[Event]) -> Result<()> {
        let mut rest = events;
        while !rest.is_empty() {
            let room = EVENTS_PER_BLOCK
                .saturating_sub(self.pending_events as usize)
                .max(1);
            let (now, later) = rest.split_at(room.min(rest.len()));
            for event in now {
                self.footer.end_ns = self.footer.end_ns.max(event.ts_ns);
                if event.kind == EventKind::Lost as u8 {
                    if let Decoded::Lost { count } = event.decode() {
                        self.footer.lost += u64::from(count);
                    }
                }
            }
            self.pending.extend_from_slice(Event::slice_as_bytes(now));
            self.pending_events += now.len() as u32;
            self.footer.events += now.len() as u64;
            if self.pending_events as usize >= EVENTS_PER_BLOCK {
                self.flush_block()?;
            }
            rest = later;
        }
        Ok(())
    }

    pub fn note(&mut self, note: &Note) -> Result<()> {
        self.flush_block()?; // keep notes in time order with the events around them
        let json = serde_json::to_vec(note).context("encoding a note")?;
        self.record(TAG_NOTE, &json)?;
        self.footer.notes += 1;
        Ok(())
    }

    /// Write out the events collected so far as one block.
    pub fn flush_block(&mut self) -> Result<()> {
        if self.pending_events == 0 {
            return Ok(());
        }
        // Grown, never cleared: zeroing a block's worth of bound at every block cost the
        // daemon more than its LZ4 (the compressor writes what it returns, nothing is read).
        let mut payload = std::mem::take(&mut self.payload);
        let needed = 4 + lz4_flex::block::get_maximum_output_size(self.pending.len());
        if payload.len() < needed {
            payload.resize(needed, 0);
        }
        payload[..4].copy_from_slice(&self.pending_events.to_le_bytes());
        let written = lz4_flex::block::compress_into(&self.pending, &mut payload[4..needed])
            .context("compressing an events block")?;
        let recorded = self.record(TAG_EVENTS, &payload[..4 + written]);
        self.payload = payload;
        recorded?;
        self.footer.blocks += 1;
        self.pending.clear();
        self.pending_events = 0;
        Ok(())
    }

    /// Write out the pending events and flush the output: what was recorded so far survives a
    /// SIGKILL.
    pub fn flush(&mut self) -> Result<()> {
        self.flush_block()?;
        self.out.flush().context("flushing the recording")
    }

    fn record(&mut self, tag: u8, payload: &[u8]) -> Result<()> {
        let mut head = [0u8; 9];
        head[0] = tag;
        head[1..5].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        head[5..9].copy_from_slice(&crc32fast::hash(payload).to_le_bytes());
        self.out.write_all(&head).context("writing a record")?;
        self.out.write_all(payload).context("writing a record")?;
        self.written += (head.len() + payload.len()) as u64;
        Ok(())
    }

    pub(crate) fn bytes_written(&self) -> u64 {
        self.written
    }

    /// Flush the last block, write the footer, flush the output. `end_ns` extends the recorded
    /// time range past the last event (a quiet end still counts).
    pub fn finish(mut self, end_ns: u64) -> Result<(W, Footer)> {
        self.flush_block()?;
        self.footer.end_ns = self.footer.end_ns.max(end_ns);
        let json = serde_json::to_vec(&self.footer).context("encoding the footer")?;
        self.record(TAG_FOOTER, &json)?;
        self.out.flush().context("flushing the recording")?;
        Ok((self.out, self.footer))
    }
}

//! Reading recordings, streamed: one record at a time is held, and no length field makes the
//! reader allocate more than the format's own limits (an events block decodes to at most
//! [`MAX_BLOCK_BYTES`]). Damage (truncation, flipped bytes, a wrong version, implausible
//! timestamps, a missing footer, data after the footer) ends the read with an error naming the
//! record and byte offset; everything before it is still returned.
use std::{
    fmt,
    fs::File,
    io::{BufReader, ErrorKind, Read},
    path::Path,
};

use tracer_common::{Event, EventKind};

use super::{
    Footer, Header, Note, EVENTS_PER_BLOCK, MAGIC, MAX_BLOCK_BYTES, MAX_NOTE_BYTES, MAX_PAYLOAD,
    MAX_SPAN_NS, MAX_WINDOW_NS, MIN_WINDOW_NS, TAG_EVENTS, TAG_FOOTER, TAG_NOTE, VERSION,
};

/// One item of a recording, in file order.
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    Events(Vec<Event>),
    Note(Note),
    Footer(Footer),
}

/// Where and why a recording stopped being readable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    /// Index of the record after the header (0 = the first), or None for the header itself.
    pub record: Option<u64>,
    pub offset: u64,
    pub what: String,
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.record {
            Some(record) => write!(
                f,
                "record {record} at byte offset {}: {}",
                self.offset, self.what
            ),
            None => write!(f, "header at byte offset {}: {}", self.offset, self.what),
        }
    }
}

impl std::error::Error for Damage {}

/// The largest payload of an events block: its count and the LZ4 block of at most
/// [`EVENTS_PER_BLOCK`] events.
const MAX_EVENTS_PAYLOAD: usize = 4 + lz4_flex::block::get_maximum_output_size(MAX_BLOCK_BYTES);

/// Reads a recording from any byte stream, one record at a time.
pub struct Reader<R> {
    input: R,
    offset: u64,
    record: u64,
    pub header: Header,
    footer_seen: bool,
    done: bool,
    /// The last record's payload and the last events block decoded, kept from record to record
    /// so that a block costs no allocation.
    scratch: Scratch,
}

#[derive(Default)]
struct Scratch {
    payload: Vec<u8>,
    /// A block's events, given back by the reader's owner once used ([`Reader::recycle`]):
    /// the next block is decoded into it, with no allocation, zeroing or copy.
    events: Vec<Event>,
}

/// Fill `buf` as far as the input goes: the number of bytes read (less than its length only at
/// the end of the input).
fn read_up_to(input: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match input.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(err) if err.kind() == ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    Ok(filled)
}

/// Exactly `len` bytes (already checked against a limit), or None when the input ends first.
/// The buffer grows with what arrives, not with what the length field claims.
fn read_payload(input: &mut impl Read, len: usize) -> std::io::Result<Option<Vec<u8>>> {
    let mut payload = Vec::new();
    Ok(read_payload_into(input, len, &mut payload)?.then_some(payload))
}

/// [`read_payload`] into `payload` (cleared first, its capacity reused): whether all `len`
/// bytes came.
fn read_payload_into(
    input: &mut impl Read,
    len: usize,
    payload: &mut Vec<u8>,
) -> std::io::Result<bool> {
    payload.clear();
    input.take(len as u64).read_to_end(payload)?;
    Ok(payload.len() == len)
}

fn u32_le(bytes: &[u8]) -> u32 {
    u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
}

/// The recording at `path`, its header read and checked; errors name the file.
pub fn open(path: &Path) -> anyhow::Result<Reader<BufReader<File>>> {
    // A regular file only: a FIFO is refused, never waited on (past --duration). Recordings
    // are streamed, so their length is no memory bound.
    let file = tracer_common::files::open_regular(path, tracer_common::files::Symlinks::Follow)
        .map_err(|err| anyhow::anyhow!("reading {}: {err}", path.display()))?;
    Reader::new(BufReader::new(file))
        .map_err(|damage| anyhow::anyhow!("{}: {damage}", path.display()))
}

impl<R: Read> Reader<R> {
    pub fn new(mut input: R) -> Result<Reader<R>, Damage> {
        let damage = |offset: u64, what: String| Damage {
            record: None,
            offset,
            what,
        };
        let io = |err: std::io::Error| damage(0, format!("read error: {err}"));
        let mut fixed = [0u8; 14];
        let got = read_up_to(&mut input, &mut fixed).map_err(io)?;
        if got < MAGIC.len() || fixed[..MAGIC.len()] != MAGIC {
            return Err(damage(0, "not a nodescope recording (bad magic)".into()));
        }
        if got < 10 {
            return Err(damage(8, "truncated before the version".into()));
        }
        let version = u16::from_le_bytes([fixed[8], fixed[9]]);
        if version != VERSION {
            return Err(damage(
                8,
                format!("format version {version}, this nodescope reads {VERSION}"),
            ));
        }
        if got < 14 {
            return Err(damage(10, "truncated header".into()));
        }
        let len = u32_le(&fixed[10..14]);
        if len > MAX_PAYLOAD {
            return Err(damage(10, format!("header length {len} is implausible")));
        }
        let json = read_payload(&mut input, len as usize)
            .map_err(io)?
            .ok_or_else(|| damage(14, format!("truncated header ({len} bytes announced)")))?;
        let mut crc = [0u8; 4];
        let end = 14 + u64::from(len);
        if read_up_to(&mut input, &mut crc).map_err(io)? < 4 {
            return Err(damage(end, "truncated header checksum".into()));
        }
        if crc32fast::hash(&json) != u32::from_le_bytes(crc) {
            return Err(damage(14, "header checksum mismatch".into()));
        }
        let header: Header = serde_json::from_slice(&json)
            .map_err(|err| damage(14, format!("header JSON: {err}")))?;
        check_header(&header).map_err(|what| damage(14, what))?;
        Ok(Reader {
            input,
            offset: end + 4,
            record: 0,
            header,
            footer_seen: false,
            done: false,
            scratch: Scratch::default(),
        })
    }

    /// The same reader, its input behind a box (one type for a file, a slice or a pipe).
    pub fn boxed(self) -> Reader<Box<dyn Read + Send>>
    where
        R: Read + Send + 'static,
    {
        Reader {
            input: Box::new(self.input),
            offset: self.offset,
            record: self.record,
            header: self.header,
            footer_seen: self.footer_seen,
            done: self.done,
            scratch: self.scratch,
        }
    }

    fn damage(&mut self, what: String) -> Damage {
        self.done = true;
        Damage {
            record: Some(self.record),
            offset: self.offset,
            what,
        }
    }

    /// The next item; None at the clean end, after the footer. The input ending anywhere else,
    /// even exactly between records, is damage: without its footer a recording is incomplete.
    pub(crate) fn next_item(&mut self) -> Option<Result<Item, Damage>> {
        if self.done {
            return None;
        }
        let mut head = [0u8; 9];
        let got = match read_up_to(&mut self.input, &mut head) {
            Ok(got) => got,
            Err(err) => return Some(Err(self.damage(format!("read error: {err}")))),
        };
        if self.footer_seen {
            self.done = true;
            return (got > 0).then(|| {
                Err(self
                    .damage("data after the footer (two recordings joined into one file?)".into()))
            });
        }
        if got == 0 {
            return Some(Err(self.damage(
                "the recording ends without its footer: it was cut short (killed, or still \
                 being written)"
                    .into(),
            )));
        }
        if got < head.len() {
            return Some(Err(self.damage("truncated record header".into())));
        }
        let item = self.read_record(head[0], u32_le(&head[1..5]), u32_le(&head[5..9]));
        if let Ok(Item::Footer(_)) = &item {
            self.footer_seen = true;
        }
        Some(item)
    }

    fn read_record(&mut self, tag: u8, len: u32, crc: u32) -> Result<Item, Damage> {
        let limit = match tag {
            TAG_EVENTS => MAX_EVENTS_PAYLOAD,
            TAG_NOTE | TAG_FOOTER => MAX_NOTE_BYTES,
            other => return Err(self.damage(format!("unknown record tag {other:#04x}"))),
        };
        if len as usize > limit {
            return Err(self.damage(format!(
                "record length {len} is implausible (at most {limit} for this kind)"
            )));
        }
        let mut payload = std::mem::take(&mut self.scratch.payload);
        let item = self.check_and_decode(tag, len, crc, &mut payload);
        self.scratch.payload = payload;
        let item = item?;
        self.offset += 9 + u64::from(len);
        self.record += 1;
        Ok(item)
    }

    fn check_and_decode(
        &mut self,
        tag: u8,
        len: u32,
        crc: u32,
        payload: &mut Vec<u8>,
    ) -> Result<Item, Damage> {
        match read_payload_into(&mut self.input, len as usize, payload) {
            Ok(true) => {}
            Ok(false) => {
                return Err(self.damage(format!("truncated record: {len} bytes announced")))
            }
            Err(err) => return Err(self.damage(format!("read error: {err}"))),
        }
        if crc32fast::hash(payload) != crc {
            return Err(self.damage("checksum mismatch".into()));
        }
        self.decode(tag, payload)
    }

    fn decode(&mut self, tag: u8, payload: &[u8]) -> Result<Item, Damage> {
        match tag {
            TAG_EVENTS => self.decode_events(payload).map(Item::Events),
            TAG_NOTE => serde_json::from_slice(payload)
                .map(Item::Note)
                .map_err(|err| self.damage(format!("note JSON: {err}"))),
            _ => {
                let footer: Footer = serde_json::from_slice(payload)
                    .map_err(|err| self.damage(format!("footer JSON: {err}")))?;
                self.check_time(footer.end_ns, "the footer's end")?;
                Ok(Item::Footer(footer))
            }
        }
    }

    fn decode_events(&mut self, payload: &[u8]) -> Result<Vec<Event>, Damage> {
        if payload.len() < 4 {
            return Err(self.damage("events block without a count".into()));
        }
        let count = u32_le(payload) as usize;
        if count > EVENTS_PER_BLOCK {
            return Err(self.damage(format!(
                "events block claims {count} events, a block holds at most {EVENTS_PER_BLOCK}"
            )));
        }
        // The simulator's decoder: events are mostly zeros, long overlapping matches, which it
        // fills where lz4_flex copies a byte at a time. Into the recycled events, grown (with
        // any event: each is overwritten) and never cleared: the length check in
        // decompress_events proves every byte was written.
        let mut events = std::mem::take(&mut self.scratch.events);
        if events.len() < count {
            events.resize(count, Event::new(EventKind::NodeRead, 0));
        }
        events.truncate(count);
        match self.decompress_events(&payload[4..], &mut events) {
            Ok(()) => Ok(events),
            Err(damage) => {
                self.scratch.events = events;
                Err(damage)
            }
        }
    }

    /// Give back a block's events (`Item::Events`) once used: the next block is decoded into
    /// them.
    pub(crate) fn recycle(&mut self, events: Vec<Event>) {
        if events.capacity() > self.scratch.events.capacity() {
            self.scratch.events = events;
        }
    }

    /// The LZ4 `block` decompressed into `events` (the block's count of them), whose every
    /// byte it must fill.
    fn decompress_events(&mut self, block: &[u8], events: &mut [Event]) -> Result<(), Damage> {
        let raw = Event::slice_as_bytes_mut(events);
        let expected = raw.len();
        let len = sim::cache::lz4::decompress_into(block, raw).ok_or_else(|| {
            self.damage("events block does not decompress (not a whole, valid LZ4 block, or more than its count of events)".into())
        })?;
        if len != expected {
            return Err(self.damage(format!(
                "events block holds {len} bytes, {expected} expected"
            )));
        }
        if let Some(latest) = events.iter().map(|event| event.ts_ns).max() {
            self.check_time(latest, "an event")?;
        }
        Ok(())
    }

    /// A time more than [`MAX_SPAN_NS`] after the origin is damage: the windows between would
    /// be bookkept for nothing.
    fn check_time(&mut self, ts_ns: u64, what: &str) -> Result<(), Damage> {
        let origin = self.header.clock_origin_ns;
        if ts_ns.saturating_sub(origin) > MAX_SPAN_NS {
            return Err(self.damage(format!(
                "{what} is stamped {ts_ns} ns, {} days after the recording's start at \
                 {origin} ns: implausible",
                (ts_ns - origin) / 86_400_000_000_000
            )));
        }
        Ok(())
    }
}

/// The header's window and clock origin are within what a recording can hold.
fn check_header(header: &Header) -> Result<(), String> {
    let window = header.window_ns;
    if !(MIN_WINDOW_NS..=MAX_WINDOW_NS).contains(&window) {
        return Err(format!(
            "window of {window} ns is implausible (a recording's window is {} ms to {} h)",
            MIN_WINDOW_NS / 1_000_000,
            MAX_WINDOW_NS / 3_600_000_000_000
        ));
    }
    if header.clock_origin_ns > u64::MAX - MAX_SPAN_NS {
        return Err(format!(
            "clock origin {} ns is implausible",
            header.clock_origin_ns
        ));
    }
    Ok(())
}

/// Everything readable in a recording: its items up to the first damage, and the damage.
pub struct Contents {
    pub header: Header,
    pub items: Vec<Item>,
    pub damage: Option<Damage>,
}

impl Contents {
    pub fn footer(&self) -> Option<&Footer> {
        self.items.iter().rev().find_map(|item| match item {
            Item::Footer(footer) => Some(footer),
            _ => None,
        })
    }

    pub fn events(&self) -> impl Iterator<Item = &Event> {
        self.items.iter().flat_map(|item| match item {
            Item::Events(events) => events.as_slice(),
            _ => &[],
        })
    }
}

/// At most this many events are held by [`read_all`] (64 MiB): the commands stream instead.
pub(crate) const MAX_EVENTS_HELD: usize = 1 << 20;

/// Read a whole recording held in memory (tests, the fuzzer). Only a broken header is an
/// error: later damage is in `damage`, and so is a recording with more than
/// [`MAX_EVENTS_HELD`] events.
pub fn read_all(bytes: &[u8]) -> Result<Contents, Damage> {
    let mut reader = Reader::new(bytes)?;
    let mut items = Vec::new();
    let mut damage = None;
    let mut held = 0;
    while let Some(item) = reader.next_item() {
        match item {
            Ok(item) => {
                if let Item::Events(events) = &item {
                    held += events.len();
                }
                if held > MAX_EVENTS_HELD {
                    damage = Some(reader.damage(format!(
                        "more than {MAX_EVENTS_HELD} events to hold in memory"
                    )));
                    break;
                }
                items.push(item);
            }
            Err(err) => {
                damage = Some(err);
                break;
            }
        }
    }
    Ok(Contents {
        header: reader.header,
        items,
        damage,
    })
}

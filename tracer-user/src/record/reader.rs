//! Reading recordings. Damage (truncation, flipped bytes, a wrong version) ends the read with
//! an error naming the record and byte offset; everything before it is still returned.
use std::fmt;

use tracer_common::Event;

use super::{
    Footer, Header, Note, EVENT_BYTES, MAGIC, MAX_PAYLOAD, TAG_EVENTS, TAG_FOOTER, TAG_NOTE,
    VERSION,
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

/// Reads a whole recording held in memory.
pub struct Reader<'a> {
    bytes: &'a [u8],
    offset: usize,
    record: u64,
    pub header: Header,
    done: bool,
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    bytes
        .get(at..at + 4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Result<Reader<'a>, Damage> {
        let damage = |offset: usize, what: String| Damage {
            record: None,
            offset: offset as u64,
            what,
        };
        if bytes.len() < MAGIC.len() || bytes[..MAGIC.len()] != MAGIC {
            return Err(damage(0, "not a nodescope recording (bad magic)".into()));
        }
        let version = bytes
            .get(8..10)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .ok_or_else(|| damage(8, "truncated before the version".into()))?;
        if version != VERSION {
            return Err(damage(
                8,
                format!("format version {version}, this nodescope reads {VERSION}"),
            ));
        }
        let len = u32_at(bytes, 10).ok_or_else(|| damage(10, "truncated header".into()))? as usize;
        let json = bytes
            .get(14..14 + len)
            .ok_or_else(|| damage(14, format!("truncated header ({len} bytes announced)")))?;
        let crc = u32_at(bytes, 14 + len)
            .ok_or_else(|| damage(14 + len, "truncated header checksum".into()))?;
        if crc32fast::hash(json) != crc {
            return Err(damage(14, "header checksum mismatch".into()));
        }
        let header: Header = serde_json::from_slice(json)
            .map_err(|err| damage(14, format!("header JSON: {err}")))?;
        Ok(Reader {
            bytes,
            offset: 18 + len,
            record: 0,
            header,
            done: false,
        })
    }

    fn damage(&mut self, what: String) -> Damage {
        self.done = true;
        Damage {
            record: Some(self.record),
            offset: self.offset as u64,
            what,
        }
    }

    /// The next item; None at the clean end (after the footer, or at the end of the bytes when
    /// the recording was cut off exactly between records, which `footer_missing` reports).
    pub fn next_item(&mut self) -> Option<Result<Item, Damage>> {
        if self.done || self.offset == self.bytes.len() {
            self.done = true;
            return None;
        }
        let item = self.read_record();
        if let Ok(Item::Footer(_)) = &item {
            self.done = true;
        }
        Some(item)
    }

    fn read_record(&mut self) -> Result<Item, Damage> {
        let head = self.offset;
        let Some(&tag) = self.bytes.get(head) else {
            return Err(self.damage("truncated record header".into()));
        };
        let (Some(len), Some(crc)) = (u32_at(self.bytes, head + 1), u32_at(self.bytes, head + 5))
        else {
            return Err(self.damage("truncated record header".into()));
        };
        if len > MAX_PAYLOAD {
            return Err(self.damage(format!("record length {len} is implausible")));
        }
        let start = head + 9;
        let Some(payload) = self.bytes.get(start..start + len as usize) else {
            return Err(self.damage(format!("truncated record: {len} bytes announced")));
        };
        if crc32fast::hash(payload) != crc {
            return Err(self.damage("checksum mismatch".into()));
        }
        let item = self.decode(tag, payload)?;
        self.offset = start + len as usize;
        self.record += 1;
        Ok(item)
    }

    fn decode(&mut self, tag: u8, payload: &[u8]) -> Result<Item, Damage> {
        match tag {
            TAG_EVENTS => self.decode_events(payload).map(Item::Events),
            TAG_NOTE => serde_json::from_slice(payload)
                .map(Item::Note)
                .map_err(|err| self.damage(format!("note JSON: {err}"))),
            TAG_FOOTER => serde_json::from_slice(payload)
                .map(Item::Footer)
                .map_err(|err| self.damage(format!("footer JSON: {err}"))),
            other => Err(self.damage(format!("unknown record tag {other:#04x}"))),
        }
    }

    fn decode_events(&mut self, payload: &[u8]) -> Result<Vec<Event>, Damage> {
        let Some(count) = u32_at(payload, 0) else {
            return Err(self.damage("events block without a count".into()));
        };
        let expected = count as usize * EVENT_BYTES;
        if expected > MAX_PAYLOAD as usize * 64 {
            return Err(self.damage(format!("events block claims {count} events")));
        }
        let raw = lz4_flex::block::decompress(&payload[4..], expected)
            .map_err(|err| self.damage(format!("events block does not decompress: {err}")))?;
        if raw.len() != expected {
            return Err(self.damage(format!(
                "events block holds {} bytes, {expected} expected",
                raw.len()
            )));
        }
        Ok(raw
            .chunks_exact(EVENT_BYTES)
            .filter_map(Event::from_bytes)
            .collect())
    }
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

/// Read a whole recording. Only a broken header is an error: later damage is in `damage`.
pub fn read_all(bytes: &[u8]) -> Result<Contents, Damage> {
    let mut reader = Reader::new(bytes)?;
    let mut items = Vec::new();
    let mut damage = None;
    while let Some(item) = reader.next_item() {
        match item {
            Ok(item) => items.push(item),
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

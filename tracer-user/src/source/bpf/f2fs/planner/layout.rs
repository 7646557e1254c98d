//! Where the programs find each field of an F2FS tracepoint, read from the tracepoint's format
//! file: the `TracepointLayout` that userspace writes to TP_LAYOUT before attaching.
use anyhow::{bail, Context as _, Result};
use tracer_common::{TracepointLayout, FIELD_ABSENT};

use crate::source::bpf::format::Format;

/// REQ_RAHEAD and REQ_SYNC bit numbers when no format file says (6.x kernels).
pub(super) const DEFAULT_RAHEAD_BIT: u16 = 19;
const DEFAULT_SYNC_BIT: u16 = 11;

fn absent_layout() -> TracepointLayout {
    TracepointLayout {
        dev: FIELD_ABSENT,
        ino: FIELD_ABSENT,
        index: FIELD_ABSENT,
        op: FIELD_ABSENT,
        op_flags: FIELD_ABSENT,
        type_: FIELD_ABSENT,
        reason: FIELD_ABSENT,
        phase: FIELD_ABSENT,
        msg_loc: FIELD_ABSENT,
        rahead_bit: DEFAULT_RAHEAD_BIT,
        sync_bit: DEFAULT_SYNC_BIT,
        msg_ptr: FIELD_ABSENT,
        size: FIELD_ABSENT,
    }
}

/// The offset of a field the programs read as one of `sizes` bytes; an error when it is missing
/// or has another size (the program would read the wrong bytes).
fn required(format: &Format, name: &str, sizes: &[u16]) -> Result<u16> {
    let field = format
        .field(name)
        .with_context(|| format!("{} has no field `{name}`", format.name))?;
    if !sizes.contains(&field.size) {
        bail!(
            "{}: field `{name}` is {} bytes, expected {sizes:?}",
            format.name,
            field.size
        );
    }
    Ok(field.offset)
}

fn optional(format: &Format, name: &str, sizes: &[u16]) -> Result<u16> {
    if format.field(name).is_none() {
        return Ok(FIELD_ABSENT);
    }
    required(format, name, sizes)
}

fn with_flag_bits(format: &Format, mut layout: TracepointLayout) -> TracepointLayout {
    layout.rahead_bit = format.flag_bit("R").unwrap_or(DEFAULT_RAHEAD_BIT);
    layout.sync_bit = format.flag_bit("S").unwrap_or(DEFAULT_SYNC_BIT);
    layout
}

/// f2fs_submit_page_bio / f2fs_submit_folio_bio.
pub(super) fn page_bio_layout(format: &Format) -> Result<TracepointLayout> {
    let layout = TracepointLayout {
        dev: required(format, "dev", &[4])?,
        ino: optional(format, "ino", &[4, 8])?,
        index: optional(format, "index", &[8])?,
        op: required(format, "op", &[4])?,
        op_flags: required(format, "op_flags", &[4])?,
        type_: required(format, "type", &[4])?,
        ..absent_layout()
    };
    Ok(with_flag_bits(format, layout))
}

/// f2fs_submit_read_bio: per bio, with its byte size.
pub(super) fn read_bio_layout(format: &Format) -> Result<TracepointLayout> {
    let layout = TracepointLayout {
        dev: required(format, "dev", &[4])?,
        op: required(format, "op", &[4])?,
        op_flags: required(format, "op_flags", &[4])?,
        type_: required(format, "type", &[4])?,
        size: required(format, "size", &[4])?,
        ..absent_layout()
    };
    Ok(with_flag_bits(format, layout))
}

/// f2fs_submit_page_write.
pub(super) fn page_write_layout(format: &Format) -> Result<TracepointLayout> {
    Ok(TracepointLayout {
        dev: required(format, "dev", &[4])?,
        index: optional(format, "index", &[8])?,
        op: optional(format, "op", &[4])?,
        type_: required(format, "type", &[4])?,
        ..absent_layout()
    })
}

/// f2fs_write_checkpoint: a numeric `phase` (6.18.y and 6.19 on), a `__data_loc` message
/// string (`dest_msg`, 6.1.2 .. 6.18), or a `char *msg` pointer (5.10 and 5.15, which store the
/// message's address: the program reads the string through it).
pub(super) fn checkpoint_layout(format: &Format) -> Result<TracepointLayout> {
    let mut layout = TracepointLayout {
        dev: required(format, "dev", &[4])?,
        reason: optional(format, "reason", &[4])?,
        phase: optional(format, "phase", &[1, 2, 4])?,
        ..absent_layout()
    };
    if layout.phase != FIELD_ABSENT {
        return Ok(layout);
    }
    let message = ["dest_msg", "msg"]
        .iter()
        .find_map(|name| format.field(name))
        .with_context(|| format!("{} has neither `phase` nor a message", format.name))?;
    if message.is_data_loc() {
        layout.msg_loc = message.offset;
    } else if message.is_pointer() && message.size == 8 {
        layout.msg_ptr = message.offset;
    } else {
        bail!(
            "{}: field `{}` ({}) is neither a __data_loc string nor a char pointer",
            format.name,
            message.name,
            message.c_type
        );
    }
    Ok(layout)
}

//! The protobuf wire format, as much of it as a Perfetto trace needs: varints,
//! and length-delimited fields (strings, nested messages).
//!
//! Written from the protobuf encoding rules (a key is `field << 3 | wire type`; varints are
//! little-endian groups of 7 bits with the high bit set on all but the last byte). No code
//! generation: a message is built field by field into a byte vector.

/// Wire types (protobuf encoding): the low three bits of every key.
const WIRE_VARINT: u64 = 0;
const WIRE_LENGTH_DELIMITED: u64 = 2;

/// One protobuf message being built: its fields, encoded, in the order they were added.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Message {
    bytes: Vec<u8>,
}

impl Message {
    pub(crate) fn new() -> Message {
        Message::default()
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// An unsigned integer field (uint32, uint64, an enum, a bool as 0/1).
    pub(crate) fn uint(&mut self, field: u32, value: u64) -> &mut Message {
        self.key(field, WIRE_VARINT);
        put_varint(&mut self.bytes, value);
        self
    }

    /// A signed int32/int64 field: two's complement as a 64-bit varint (negative values take
    /// ten bytes, as protobuf's int64 does; not zigzag, which is sint64).
    pub(crate) fn int(&mut self, field: u32, value: i64) -> &mut Message {
        self.uint(field, value as u64)
    }

    pub(crate) fn string(&mut self, field: u32, value: &str) -> &mut Message {
        self.length_delimited(field, value.as_bytes())
    }

    /// A nested message field.
    pub(crate) fn message(&mut self, field: u32, nested: &Message) -> &mut Message {
        self.length_delimited(field, &nested.bytes)
    }

    fn length_delimited(&mut self, field: u32, payload: &[u8]) -> &mut Message {
        self.key(field, WIRE_LENGTH_DELIMITED);
        put_varint(&mut self.bytes, payload.len() as u64);
        self.bytes.extend_from_slice(payload);
        self
    }

    fn key(&mut self, field: u32, wire_type: u64) {
        put_varint(&mut self.bytes, (u64::from(field) << 3) | wire_type);
    }
}

/// Append `value` as a base-128 varint.
pub(crate) fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    // The expected bytes are the protobuf encoding guide's own examples where it has one.

    #[test]
    fn varints_take_seven_bits_a_byte_low_group_first() {
        let encode = |value| {
            let mut out = Vec::new();
            put_varint(&mut out, value);
            out
        };
        assert_eq!(encode(0), [0x00]);
        assert_eq!(encode(1), [0x01]);
        assert_eq!(encode(127), [0x7f]);
        assert_eq!(encode(128), [0x80, 0x01]);
        assert_eq!(encode(150), [0x96, 0x01]);
        assert_eq!(encode(300), [0xac, 0x02]);
        assert_eq!(encode(u64::MAX).len(), 10);
        assert_eq!(*encode(u64::MAX).last().unwrap(), 0x01);
    }

    #[test]
    fn a_uint_field_is_its_key_then_its_varint() {
        assert_eq!(Message::new().uint(1, 150).as_bytes(), [0x08, 0x96, 0x01]);
        // Field 60 needs a two-byte key: (60 << 3 | 0) = 480.
        assert_eq!(Message::new().uint(60, 1).as_bytes(), [0xe0, 0x03, 0x01]);
    }

    #[test]
    fn negative_ints_are_ten_byte_twos_complement() {
        let bytes = Message::new().int(30, -1).as_bytes().to_vec();
        assert_eq!(bytes[..2], [0xf0, 0x01], "key of field 30, varint");
        assert_eq!(bytes.len(), 2 + 10);
        assert_eq!(bytes[2..11], [0xff; 9]);
        assert_eq!(bytes[11], 0x01);
    }

    #[test]
    fn strings_and_messages_are_length_delimited() {
        assert_eq!(
            Message::new().string(2, "testing").as_bytes(),
            [0x12, 0x07, b't', b'e', b's', b't', b'i', b'n', b'g']
        );
        let mut inner = Message::new();
        inner.uint(1, 150);
        assert_eq!(
            Message::new().message(3, &inner).as_bytes(),
            [0x1a, 0x03, 0x08, 0x96, 0x01]
        );
    }

    #[test]
    fn fields_keep_the_order_they_were_added() {
        let mut message = Message::new();
        message.uint(8, 5).string(2, "a").uint(1, 7);
        assert_eq!(
            message.as_bytes(),
            [0x40, 0x05, 0x12, 0x01, b'a', 0x08, 0x07]
        );
    }
}

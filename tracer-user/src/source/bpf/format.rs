//! Parser for tracefs `events/<category>/<name>/format` files.
//!
//! Field offsets differ between kernel versions and between tracepoint variants (see
//! tracer-user/tests/data/formats/), so the programs get them from here at run time instead of
//! compiling them in.
use anyhow::{bail, Context as _, Result};

/// One `field:` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    /// The C type as written, e.g. `unsigned long`, `__data_loc char[]`.
    pub c_type: String,
    pub offset: u16,
    pub size: u16,
    pub signed: bool,
}

impl Field {
    /// A `__data_loc` field holds (length << 16 | offset) of a variable-length array.
    pub fn is_data_loc(&self) -> bool {
        self.c_type.starts_with("__data_loc")
    }

    /// A pointer stored in the record (5.10's `char * msg`): its bytes are an address.
    pub fn is_pointer(&self) -> bool {
        self.c_type.ends_with('*')
    }
}

/// A parsed format file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Format {
    pub name: String,
    pub id: Option<u32>,
    pub fields: Vec<Field>,
    pub print_fmt: String,
}

impl Format {
    pub fn parse(text: &str) -> Result<Format> {
        let mut name = None;
        let mut id = None;
        let mut fields = Vec::new();
        let mut print_fmt = String::new();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if let Some(rest) = line.strip_prefix("name:") {
                name = Some(rest.trim().to_string());
            } else if let Some(rest) = line.strip_prefix("ID:") {
                id = rest.trim().parse().ok();
            } else if line.starts_with("field:") {
                let field = parse_field(line).with_context(|| format!("line {}", number + 1))?;
                fields.push(field);
            } else if let Some(rest) = line.strip_prefix("print fmt:") {
                print_fmt = rest.trim().to_string();
            }
        }
        let name = name.context("format file has no `name:` line")?;
        if fields.is_empty() {
            bail!("format of {name} has no fields");
        }
        Ok(Format {
            name,
            id,
            fields,
            print_fmt,
        })
    }

    /// Where the record's last field ends: the bytes the kernel lets a tracepoint program read
    /// from its context (it refuses to attach one whose reads reach further).
    pub fn record_end(&self) -> u16 {
        self.fields
            .iter()
            .map(|f| f.offset.saturating_add(f.size))
            .max()
            .unwrap_or(0)
    }

    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The bit number the print format gives a flag label, e.g. `"R"` (REQ_RAHEAD) in
    /// `{ ( u32)( blk_opf_t)(1ULL << 19), "R" }`. None when the format does not list it.
    pub fn flag_bit(&self, label: &str) -> Option<u16> {
        let needle = format!(", \"{label}\" }}");
        let end = self.print_fmt.find(&needle)?;
        let before = &self.print_fmt[..end];
        let shift = before.rfind("<<")?;
        let digits: String = before[shift + 2..]
            .trim_start()
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    }
}

/// `field:unsigned long index;<TAB>offset:24;<TAB>size:8;<TAB>signed:0;`
fn parse_field(line: &str) -> Result<Field> {
    let mut decl = None;
    let (mut offset, mut size, mut signed) = (None, None, None);
    for part in line.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = part
            .split_once(':')
            .with_context(|| format!("no `:` in {part:?}"))?;
        match key {
            "field" => decl = Some(value.trim()),
            "offset" => offset = Some(parse_u16(value)?),
            "size" => size = Some(parse_u16(value)?),
            "signed" => signed = Some(value.trim() == "1"),
            _ => {}
        }
    }
    let decl = decl.context("no field declaration")?;
    let (c_type, name) = split_decl(decl)?;
    Ok(Field {
        name,
        c_type,
        offset: offset.context("no offset")?,
        size: size.context("no size")?,
        signed: signed.unwrap_or(false),
    })
}

fn parse_u16(value: &str) -> Result<u16> {
    value
        .trim()
        .parse()
        .with_context(|| format!("not a number: {value:?}"))
}

/// `unsigned long index` -> ("unsigned long", "index"); `char comm[16]` -> ("char[16]", "comm");
/// `__data_loc char[] dest_msg` -> ("__data_loc char[]", "dest_msg"); `const char *msg` and
/// `const char * msg` -> ("const char *", "msg").
fn split_decl(decl: &str) -> Result<(String, String)> {
    let (c_type, last) = decl
        .rsplit_once(char::is_whitespace)
        .with_context(|| format!("no type in {decl:?}"))?;
    let stars = last.len() - last.trim_start_matches('*').len();
    let (c_type, last) = match stars {
        0 => (c_type.trim().to_string(), last),
        _ => (
            format!("{} {}", c_type.trim(), &last[..stars]),
            &last[stars..],
        ),
    };
    let (name, array) = match last.find('[') {
        Some(at) => (&last[..at], &last[at..]),
        None => (last, ""),
    };
    if name.is_empty() {
        bail!("no field name in {decl:?}");
    }
    Ok((format!("{c_type}{array}"), name.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_declarations() {
        let (t, n) = split_decl("__data_loc char[] dest_msg").unwrap();
        assert_eq!((t.as_str(), n.as_str()), ("__data_loc char[]", "dest_msg"));
        let (t, n) = split_decl("char comm[16]").unwrap();
        assert_eq!((t.as_str(), n.as_str()), ("char[16]", "comm"));
        let (t, n) = split_decl("unsigned long index").unwrap();
        assert_eq!((t.as_str(), n.as_str()), ("unsigned long", "index"));
        for decl in ["const char * msg", "const char *msg"] {
            let (t, n) = split_decl(decl).unwrap();
            assert_eq!((t.as_str(), n.as_str()), ("const char *", "msg"), "{decl}");
        }
    }

    #[test]
    fn rejects_a_file_without_fields() {
        assert!(Format::parse("name: x\nID: 1\nformat:\n").is_err());
        assert!(Format::parse("field:int x;\toffset:8;\tsize:4;\tsigned:1;\n").is_err());
    }

    #[test]
    fn format_parser_reads_the_reference_files() {
        let f = Format::parse(include_str!(
            "../../../tests/data/formats/6.12/format_f2fs_write_checkpoint.txt"
        ))
        .unwrap();
        assert_eq!(
            (f.name.as_str(), f.id),
            ("f2fs_write_checkpoint", Some(1528))
        );
        assert_eq!(f.fields.len(), 7);
        let msg = f.field("dest_msg").unwrap();
        assert!(msg.is_data_loc());
        assert_eq!((msg.offset, msg.size, msg.signed), (16, 4, false));
        let f = Format::parse(include_str!(
            "../../../tests/data/formats/6.1/format_f2fs_iostat.txt"
        ))
        .unwrap();
        assert_eq!(f.field("fs_nrio").unwrap().offset, 208);
        let bio = Format::parse(include_str!(
            "../../../tests/data/formats/6.1/format_f2fs_submit_read_bio.txt"
        ))
        .unwrap();
        assert_eq!(bio.field("sector").unwrap().c_type, "sector_t");
        assert_eq!(
            (bio.flag_bit("R"), bio.flag_bit("S"), bio.flag_bit("FUA")),
            (Some(19), Some(11), Some(17))
        );
        assert_eq!(bio.flag_bit("nope"), None);
    }
}

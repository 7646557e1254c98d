//! Untrusted text made safe to print (userspace only): comms any process can set, symbols
//! from a manifest, the contents of files someone else may control.
use std::{fmt::Write as _, string::String};

/// How many bytes of a file's contents an error message quotes at most: enough to show a bad
/// value, too little to leak a file a knob was linked to.
pub const QUOTE_LIMIT: usize = 32;

/// `text` with every control character but newline written as an escape (`\x1b`, `\t`,
/// `\u{9b}`), so that printing it cannot move the cursor, clear the screen or retitle the
/// terminal.
pub fn escape_controls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c == '\n' || !c.is_control() {
            out.push(c);
        } else if (c as u32) < 0x80 {
            let _ = write!(out, "\\x{:02x}", c as u32);
        } else {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
    out
}

/// A name from outside (a comm any process sets, an app or host name, a note read from a
/// recording) as every text view prints it: on one line, and shown as it is stored. Newlines,
/// carriage returns and tabs are written `\n`, `\r`, `\t` (a comm `x\nFAKE 999 r` would
/// otherwise forge a line of its own), other control characters `\x1b` or `\u{9b}`, and the
/// invisible format characters that reorder or hide text (the bidi overrides and isolates
/// U+202A..U+202E and U+2066..U+2069, the marks U+200E, U+200F and U+061C, zero-width and
/// other Unicode format characters) `\u{202e}`. JSON output does not go through this: serde
/// escapes its control characters, and a JSON reader gets the name as it is.
pub fn escape_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() && (c as u32) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if c.is_control() || is_format(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// Unicode's format characters (general category Cf) that change how the text around them
/// is shown without being seen themselves: the soft hyphen, the Arabic letter mark, the
/// Mongolian vowel separator, zero-width characters, the left-to-right and right-to-left
/// marks, embeddings, overrides and isolates, invisible operators, the byte order mark,
/// interlinear annotations, and the tag characters.
fn is_format(c: char) -> bool {
    matches!(
        c as u32,
        0x00AD
            | 0x0600..=0x0605
            | 0x061C
            | 0x06DD
            | 0x070F
            | 0x180E
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x2064
            | 0x2066..=0x206F
            | 0xFEFF
            | 0xFFF9..=0xFFFB
            | 0xE0001
            | 0xE0020..=0xE007F
    )
}

/// The first [`QUOTE_LIMIT`] bytes of `content` in quotes, escaped (newlines too), with
/// "..." after the quote when there was more.
pub fn quote_capped(content: &[u8]) -> String {
    let head = &content[..content.len().min(QUOTE_LIMIT)];
    let mut quoted = String::from("\"");
    for chunk in head.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '"' => quoted.push_str("\\\""),
                '\\' => quoted.push_str("\\\\"),
                '\n' => quoted.push_str("\\n"),
                c => quoted.push_str(&escape_controls(c.encode_utf8(&mut [0; 4]))),
            }
        }
        for byte in chunk.invalid() {
            let _ = write!(quoted, "\\x{byte:02x}");
        }
    }
    quoted.push('"');
    if content.len() > QUOTE_LIMIT {
        quoted.push_str("...");
    }
    quoted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_escaped_and_the_rest_kept() {
        assert_eq!(escape_controls("a\x1b[2Jb\n"), "a\\x1b[2Jb\n");
        assert_eq!(escape_controls("tab\there"), "tab\\x09here");
        assert_eq!(escape_controls("csi\u{9b}"), "csi\\u{9b}");
        assert_eq!(escape_controls("plain näme"), "plain näme");
    }

    #[test]
    fn names_stay_on_one_line_and_show_what_they_hold() {
        assert_eq!(escape_name("x\nFAKE 999 r"), "x\\nFAKE 999 r");
        assert_eq!(escape_name("a\rb\tc"), "a\\rb\\tc");
        assert_eq!(escape_name("\x1b]0;t\x07"), "\\x1b]0;t\\x07");
        assert_eq!(escape_name("csi\u{9b}"), "csi\\u{9b}");
        assert_eq!(escape_name("evil\u{202e}gpj.exe"), "evil\\u{202e}gpj.exe");
        for (c, shown) in [
            ('\u{200e}', "\\u{200e}"),
            ('\u{200f}', "\\u{200f}"),
            ('\u{202a}', "\\u{202a}"),
            ('\u{2066}', "\\u{2066}"),
            ('\u{2069}', "\\u{2069}"),
            ('\u{feff}', "\\u{feff}"),
        ] {
            assert_eq!(escape_name(c.encode_utf8(&mut [0; 4])), shown);
        }
        assert_eq!(escape_name("plain näme 名前"), "plain näme 名前");
    }

    #[test]
    fn quotes_are_capped_and_escaped() {
        assert_eq!(quote_capped(b"25\n"), "\"25\\n\"");
        assert_eq!(quote_capped(b"\x1b]0;x\xff"), "\"\\x1b]0;x\\xff\"");
        let passwd = b"root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1::/usr/sbin:/nologin\n";
        let quoted = quote_capped(passwd);
        assert_eq!(quoted, "\"root:x:0:0:root:/root:/bin/bash\\n\"...");
        assert!(!quoted.contains("daemon"));
    }
}

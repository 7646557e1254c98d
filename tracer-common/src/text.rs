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
    fn quotes_are_capped_and_escaped() {
        assert_eq!(quote_capped(b"25\n"), "\"25\\n\"");
        assert_eq!(quote_capped(b"\x1b]0;x\xff"), "\"\\x1b]0;x\\xff\"");
        let passwd = b"root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1::/usr/sbin:/nologin\n";
        let quoted = quote_capped(passwd);
        assert_eq!(quoted, "\"root:x:0:0:root:/root:/bin/bash\\n\"...");
        assert!(!quoted.contains("daemon"));
    }
}

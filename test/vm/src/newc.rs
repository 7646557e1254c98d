//! A cpio archive in the "newc" format, the one the kernel unpacks as an initramfs. Written
//! here rather than by `cpio` so that the host needs one tool less and the order is ours:
//! directories first (the kernel does not create missing parents).
use std::collections::BTreeMap;

/// What one path in the archive is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    Dir,
    File { data: Vec<u8>, executable: bool },
    Symlink(String),
    CharDevice { major: u32, minor: u32 },
}

/// Paths (without a leading slash) and what they are.
#[derive(Default)]
pub struct Archive {
    entries: BTreeMap<String, Entry>,
}

impl Archive {
    /// Add an entry and every missing parent directory.
    pub fn add(&mut self, path: &str, entry: Entry) {
        let path = path.trim_start_matches('/').to_string();
        let mut parent = String::new();
        for part in path
            .split('/')
            .collect::<Vec<_>>()
            .iter()
            .rev()
            .skip(1)
            .rev()
        {
            if !parent.is_empty() {
                parent.push('/');
            }
            parent.push_str(part);
            self.entries.entry(parent.clone()).or_insert(Entry::Dir);
        }
        self.entries.insert(path, entry);
    }

    pub fn contains(&self, path: &str) -> bool {
        self.entries.contains_key(path.trim_start_matches('/'))
    }

    /// The archive bytes: directories (sorted, so parents come first), then everything else.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let dirs = self.entries.iter().filter(|(_, e)| **e == Entry::Dir);
        let others = self.entries.iter().filter(|(_, e)| **e != Entry::Dir);
        for (ino, (path, entry)) in dirs.chain(others).enumerate() {
            let (mode, data): (u32, &[u8]) = match entry {
                Entry::Dir => (0o040755, &[]),
                Entry::File { data, executable } => {
                    (if *executable { 0o100755 } else { 0o100644 }, data)
                }
                Entry::Symlink(target) => (0o120777, target.as_bytes()),
                Entry::CharDevice { .. } => (0o020600, &[]),
            };
            let (rmajor, rminor) = match entry {
                Entry::CharDevice { major, minor } => (*major, *minor),
                _ => (0, 0),
            };
            let header = Header {
                ino: ino as u32 + 1,
                mode,
                size: data.len() as u32,
                rmajor,
                rminor,
            };
            write_member(&mut out, path, &header, data);
        }
        write_member(
            &mut out,
            "TRAILER!!!",
            &Header {
                ino: 0,
                mode: 0,
                size: 0,
                rmajor: 0,
                rminor: 0,
            },
            &[],
        );
        out
    }
}

struct Header {
    ino: u32,
    mode: u32,
    size: u32,
    rmajor: u32,
    rminor: u32,
}

fn write_member(out: &mut Vec<u8>, name: &str, h: &Header, data: &[u8]) {
    let nlink = if h.mode & 0o170000 == 0o040000 { 2 } else { 1 };
    let fields = [
        h.ino,
        h.mode,
        0,
        0,
        nlink,
        0,
        h.size,
        0,
        0,
        h.rmajor,
        h.rminor,
        name.len() as u32 + 1,
        0,
    ];
    out.extend_from_slice(b"070701");
    for field in fields {
        out.extend_from_slice(format!("{field:08x}").as_bytes());
    }
    out.extend_from_slice(name.as_bytes());
    out.push(0);
    pad4(out);
    out.extend_from_slice(data);
    pad4(out);
}

fn pad4(out: &mut Vec<u8>) {
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_are_aligned_and_parents_come_first() {
        let mut archive = Archive::default();
        archive.add("/bin/sh", Entry::Symlink("busybox".into()));
        archive.add(
            "bin/busybox",
            Entry::File {
                data: b"abc".to_vec(),
                executable: true,
            },
        );
        let bytes = archive.to_bytes();
        assert_eq!(&bytes[..6], b"070701");
        assert!(bytes.len().is_multiple_of(4));
        let text = String::from_utf8_lossy(&bytes);
        let bin = text.find("bin\0").unwrap();
        let busybox = text.find("bin/busybox\0").unwrap();
        let trailer = text.find("TRAILER!!!\0").unwrap();
        assert!(bin < busybox && busybox < trailer);
        // Mode of the first member (bin/): a directory.
        assert_eq!(&bytes[14..22], b"000041ed");
        // Header 110 bytes + "bin\0" = 114, padded to 116: the next member starts there.
        assert_eq!(&bytes[116..122], b"070701");
    }
}

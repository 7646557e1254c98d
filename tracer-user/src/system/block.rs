//! A block device's node from its number: what `whatif` reads when a recording names only the
//! device number its events carry.
use std::{
    fs,
    os::unix::fs::{FileTypeExt as _, MetadataExt as _},
    path::{Path, PathBuf},
};

use anyhow::{bail, Context as _, Result};
use tracer_common::files::{self, Symlinks};

use super::major_minor;

/// Where a device node may be: /dev/NAME on Linux distributions, /dev/block/NAME on Android
/// (whose userdata F2FS sits on a dm device, dm-N).
const NODE_DIRS: [&str; 2] = ["dev", "dev/block"];

/// The longest uevent file read: a few lines.
const UEVENT_LIMIT: u64 = 4096;

/// The device node of block device `dev` (the kernel's encoding, major << 20 | minor, as F2FS
/// tracepoints carry it) under `root`: the name from `sys/dev/block/MAJ:MIN/uevent`'s
/// DEVNAME, then the first of /dev/NAME and /dev/block/NAME that is a block device with that
/// very number (a node of another device under the same name is refused, not used).
pub(crate) fn block_device(root: &Path, dev: u32) -> Result<PathBuf> {
    let number = major_minor(dev);
    let uevent = root.join("sys/dev/block").join(&number).join("uevent");
    let text = files::read_regular(&uevent, Symlinks::Refuse, UEVENT_LIMIT)
        .with_context(|| format!("block device {number} is not on this machine"))?;
    let text = String::from_utf8_lossy(&text);
    let Some(name) = text.lines().find_map(|line| line.strip_prefix("DEVNAME=")) else {
        bail!("{} names no DEVNAME", uevent.display());
    };
    if name.is_empty() || name.contains("..") {
        bail!(
            "{}: DEVNAME {name:?} is not a device name",
            uevent.display()
        );
    }
    let (major, minor) = (u64::from(dev >> 20), u64::from(dev & 0xfffff));
    let mut tried = Vec::new();
    for dir in NODE_DIRS {
        let node = root.join(dir).join(name);
        match fs::metadata(&node) {
            Ok(meta)
                if meta.file_type().is_block_device()
                    && (libc::major(meta.rdev()), libc::minor(meta.rdev()))
                        == (major as u32, minor as u32) =>
            {
                return Ok(node);
            }
            Ok(_) => tried.push(format!("{} is not block device {number}", node.display())),
            Err(err) => tried.push(format!("{}: {err}", node.display())),
        }
    }
    bail!(
        "block device {number} is {name}, but no node of it was found: {}",
        tried.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The dev_t encoding of F2FS's tracepoints.
    fn encoded(major: u32, minor: u32) -> u32 {
        major << 20 | minor
    }

    /// Every block device of this machine's sysfs is found at its node in /dev, by number.
    #[test]
    fn this_machines_block_devices_are_found_by_their_numbers() {
        let Ok(entries) = fs::read_dir("/sys/dev/block") else {
            return test_skip::skip("no /sys/dev/block here");
        };
        let mut found = 0;
        for entry in entries.flatten() {
            let number = entry.file_name().to_string_lossy().into_owned();
            let (major, minor) = number.split_once(':').unwrap();
            let (major, minor): (u32, u32) = (major.parse().unwrap(), minor.parse().unwrap());
            let uevent = fs::read_to_string(entry.path().join("uevent")).unwrap();
            let name = uevent
                .lines()
                .find_map(|l| l.strip_prefix("DEVNAME="))
                .unwrap();
            if !Path::new("/dev").join(name).exists() {
                continue; // a container's /dev may hold fewer nodes than sysfs lists
            }
            let node = block_device(Path::new("/"), encoded(major, minor)).unwrap();
            assert_eq!(node, Path::new("/dev").join(name));
            found += 1;
        }
        if found == 0 {
            test_skip::skip("no block device node in /dev");
        }
    }

    /// The errors of a faked root name what is missing: the number, the DEVNAME, the node.
    #[test]
    fn a_number_without_a_device_or_a_node_is_refused_with_what_was_tried() {
        let root = tempfile::tempdir().unwrap();
        let err = block_device(root.path(), encoded(254, 0)).unwrap_err();
        assert_eq!(
            format!("{err}"),
            "block device 254:0 is not on this machine"
        );
        let sys = root.path().join("sys/dev/block/254:0");
        fs::create_dir_all(&sys).unwrap();
        fs::write(sys.join("uevent"), "MAJOR=254\nMINOR=0\n").unwrap();
        let err = block_device(root.path(), encoded(254, 0)).unwrap_err();
        assert!(
            format!("{err}").ends_with("254:0/uevent names no DEVNAME"),
            "{err}"
        );
        fs::write(sys.join("uevent"), "MAJOR=254\nMINOR=0\nDEVNAME=../etc\n").unwrap();
        let err = block_device(root.path(), encoded(254, 0)).unwrap_err();
        assert!(format!("{err}").contains("is not a device name"), "{err}");
        fs::write(sys.join("uevent"), "MAJOR=254\nMINOR=0\nDEVNAME=dm-8\n").unwrap();
        fs::create_dir_all(root.path().join("dev/block")).unwrap();
        fs::write(root.path().join("dev/block/dm-8"), "a regular file").unwrap();
        let err = format!(
            "{:#}",
            block_device(root.path(), encoded(254, 0)).unwrap_err()
        );
        assert!(
            err.starts_with("block device 254:0 is dm-8, but no node of it was found: "),
            "{err}"
        );
        assert!(
            err.contains("dev/block/dm-8 is not block device 254:0"),
            "{err}"
        );
    }
}

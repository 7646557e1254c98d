//! The layout of each mounted F2FS device (where its checkpoint packs, SIT, NAT and SSA areas
//! start), read from the device's own superblock at run time and handed to the metadata-write
//! program through `META_AREAS`, which sorts every META block write by area (issue 19).
use crate::source::bpf::ObjectMaps as _;
use std::{
    fs::File,
    io::Read as _,
    path::{Path, PathBuf},
};
use tracer_common::maps;

use anyhow::{Context as _, Result};
use aya::{maps::HashMap, Ebpf};
use sim::f2fs::superblock::Superblock;
use tracer_common::MetaAreas;

use crate::system;

/// The areas a superblock describes.
pub(crate) fn areas_of(superblock: &Superblock) -> MetaAreas {
    MetaAreas {
        cp_blkaddr: superblock.cp_blkaddr,
        sit_blkaddr: superblock.sit_blkaddr,
        nat_blkaddr: superblock.nat_blkaddr,
        ssa_blkaddr: superblock.ssa_blkaddr,
        main_blkaddr: superblock.main_blkaddr,
        _pad: 0,
    }
}

/// Read the superblock in the first block of `device` (an image or a block device).
pub(crate) fn read_areas(device: &Path) -> Result<MetaAreas> {
    let mut block = vec![0u8; 4096];
    File::open(device)
        .and_then(|mut f| f.read_exact(&mut block))
        .with_context(|| format!("reading the superblock of {}", device.display()))?;
    let superblock = Superblock::parse(&block)
        .with_context(|| format!("parsing the superblock of {}", device.display()))?;
    Ok(areas_of(&superblock))
}

/// The device number as F2FS tracepoints print it (major << 20 | minor), from sysfs's "M:m".
pub(crate) fn parse_dev(text: &str) -> Option<u32> {
    let (major, minor) = text.trim().split_once(':')?;
    Some((major.parse::<u32>().ok()? << 20) | minor.parse::<u32>().ok()?)
}

/// One mounted F2FS device: its name (as /sys/fs/f2fs calls it), number and node in /dev.
pub(crate) fn device_of(name: &str) -> Result<(u32, PathBuf)> {
    let sys = Path::new("/sys/class/block").join(name).join("dev");
    let text =
        std::fs::read_to_string(&sys).with_context(|| format!("reading {}", sys.display()))?;
    let dev =
        parse_dev(&text).with_context(|| format!("{}: {text:?} is not M:m", sys.display()))?;
    Ok((dev, Path::new("/dev").join(name)))
}

/// Write every mounted F2FS device's areas into `META_AREAS`. Returns one line per device
/// whose layout could not be read: its metadata writes then count as area "unknown".
pub(crate) fn write_meta_areas(ebpf: &mut Ebpf) -> Result<Vec<String>> {
    let map = ebpf.named_map_mut(maps::META_AREAS)?;
    let mut map: HashMap<_, u32, MetaAreas> = HashMap::try_from(map)?;
    let mut problems = Vec::new();
    for device in system::f2fs_devices(Path::new("/sys/fs/f2fs")) {
        let read = device_of(&device.name).and_then(|(dev, path)| Ok((dev, read_areas(&path)?)));
        match read {
            Ok((dev, areas)) => map
                .insert(dev, areas, 0)
                .with_context(|| format!("writing META_AREAS for {}", device.name))?,
            Err(err) => problems.push(format!(
                "meta_writes: {}: layout unknown, its metadata writes count as area unknown: \
                 {err:#}",
                device.name
            )),
        }
    }
    Ok(problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_numbers_as_the_tracepoints_print_them() {
        assert_eq!(parse_dev("254:16\n"), Some((254 << 20) | 16));
        assert_eq!(parse_dev("8:0"), Some(8 << 20));
        assert_eq!(parse_dev("garbage"), None);
    }
}

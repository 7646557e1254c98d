//! The RFC's VM file set: `files/d-0..d-255/f-0..f-63` (16,384 replay files),
//! `shaped/b-{1,32,80,128,192,256,384,512}-{0..3}` (zero-filled, that many 4 KiB blocks) and a
//! `sentinel`, created in that order under the mount point (the filesystem root).
use super::{Content, Manifest, ManifestEntry};

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct VmFileSet {
    pub dirs: u32,
    pub files_per_dir: u32,
    /// Block counts of the shaped files.
    pub shaped_blocks: Vec<u32>,
    /// Copies of each shaped size.
    pub shaped_copies: u32,
    /// Size of the (sparse) image file.
    pub image_bytes: u64,
}

impl Default for VmFileSet {
    /// The RFC's parameters.
    fn default() -> VmFileSet {
        VmFileSet {
            dirs: 256,
            files_per_dir: 64,
            shaped_blocks: vec![1, 32, 80, 128, 192, 256, 384, 512],
            shaped_copies: 4,
            image_bytes: IMAGE_BYTES,
        }
    }
}

/// The RFC's guest used a 2 GiB image; the file is sparse, so this costs little disk.
const IMAGE_BYTES: u64 = 2 << 30;

impl VmFileSet {
    pub fn replay_path(&self, dir: u32, file: u32) -> String {
        format!("files/d-{dir}/f-{file}")
    }

    /// The replay files in manifest order (directory by directory).
    pub fn replay_paths(&self) -> Vec<String> {
        (0..self.dirs)
            .flat_map(|d| (0..self.files_per_dir).map(move |f| (d, f)))
            .map(|(d, f)| self.replay_path(d, f))
            .collect()
    }

    pub fn manifest(&self) -> Manifest {
        let dir = |path: String| ManifestEntry {
            path,
            content: Content::Dir,
        };
        let mut entries = vec![dir("files".into())];
        for d in 0..self.dirs {
            entries.push(dir(format!("files/d-{d}")));
            for f in 0..self.files_per_dir {
                entries.push(ManifestEntry {
                    path: self.replay_path(d, f),
                    content: Content::Text(format!("d-{d}/f-{f}\n")),
                });
            }
        }
        entries.push(dir("shaped".into()));
        for blocks in &self.shaped_blocks {
            for copy in 0..self.shaped_copies {
                entries.push(ManifestEntry {
                    path: format!("shaped/b-{blocks}-{copy}"),
                    content: Content::Zeros { blocks: *blocks },
                });
            }
        }
        entries.push(ManifestEntry {
            path: "sentinel".into(),
            content: Content::Text("nodescope sentinel: clean unmount, remount, verify\n".into()),
        });
        let name = if *self == VmFileSet::default() {
            "vm-replay".to_string()
        } else {
            "vm-custom".to_string()
        };
        Manifest {
            name,
            entries,
            image_bytes: self.image_bytes,
        }
    }
}

//! The node blocks of one image, loaded once and shared by every run (runs are cheap).
use std::{
    collections::{BTreeMap, HashMap, HashSet},
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
};

use anyhow::{Context as _, Result};

use crate::{
    f2fs::{image::inode_info, Block, Image, NodeBlock, NodeKind},
    fileset::{
        self,
        android::AndroidFileSet,
        fbe::{AndroidImage, EncryptedImage},
        Manifest,
    },
};

pub struct NodeSet {
    pub image_path: PathBuf,
    blocks: HashMap<u32, Arc<Block>>,
    /// Nids of every node block, ascending.
    nids: Vec<u32>,
    /// Path relative to the root ("files/d-0/f-1"; "" is the root) -> inode nid.
    paths: HashMap<String, u32>,
    /// Inode -> its other node blocks (direct, indirect, xattr), ascending.
    children: HashMap<u32, Vec<u32>>,
    pub root_ino: u32,
    pub inode_checksums: bool,
    pub checksum_seed: u32,
}

impl NodeSet {
    /// The node blocks of the image at `path`, each file's inode found by the names and
    /// parents its inodes keep.
    pub fn load(path: &Path) -> Result<NodeSet> {
        NodeSet::load_with(path, None)
    }

    /// [`NodeSet::load`] for an image whose names are ciphertext: paths come from `index`
    /// (path -> inode number, as the writer of the image listed them).
    pub fn load_indexed(path: &Path, index: &BTreeMap<String, u32>) -> Result<NodeSet> {
        NodeSet::load_with(path, Some(index))
    }

    fn load_with(path: &Path, index: Option<&BTreeMap<String, u32>>) -> Result<NodeSet> {
        let image = Image::open(path)?;
        let nodes = image
            .nodes()
            .with_context(|| format!("reading node blocks of {}", path.display()))?;
        let inodes: Vec<_> = nodes
            .iter()
            .filter_map(|(nid, block)| inode_info(*nid, block))
            .collect();
        let root_ino = image.superblock.root_ino;
        let paths = match index {
            None => Image::paths(&inodes, root_ino)
                .into_iter()
                .map(|(nid, path)| (path.trim_start_matches('/').to_string(), nid))
                .collect(),
            Some(index) => {
                let mut paths: HashMap<String, u32> =
                    index.iter().map(|(p, ino)| (p.clone(), *ino)).collect();
                paths.insert(String::new(), root_ino);
                let inode_nids: HashSet<u32> = inodes.iter().map(|inode| inode.nid).collect();
                if let Some((path, ino)) = index.iter().find(|(_, ino)| !inode_nids.contains(ino)) {
                    anyhow::bail!(
                        "{}: its index gives {path} inode {ino}, which the image does not have",
                        image.path().display()
                    );
                }
                paths
            }
        };
        let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
        for (nid, block) in &nodes {
            let node = NodeBlock(&block[..]);
            if node.kind() != NodeKind::Inode {
                children.entry(node.footer_ino()).or_default().push(*nid);
            }
        }
        let nids = nodes.iter().map(|(nid, _)| *nid).collect();
        Ok(NodeSet {
            image_path: path.to_owned(),
            blocks: nodes
                .into_iter()
                .map(|(nid, block)| (nid, Arc::from(block)))
                .collect(),
            nids,
            paths,
            children,
            root_ino,
            inode_checksums: image.inode_checksums(),
            checksum_seed: image.checksum_seed(),
        })
    }

    /// A node set from blocks made in memory (tests, synthetic workloads). Paths are not known.
    pub fn from_blocks(
        blocks: Vec<(u32, Box<Block>)>,
        inode_checksums: bool,
        checksum_seed: u32,
    ) -> NodeSet {
        let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
        for (nid, block) in &blocks {
            let node = NodeBlock(&block[..]);
            if node.kind() != NodeKind::Inode {
                children.entry(node.footer_ino()).or_default().push(*nid);
            }
        }
        let mut nids: Vec<u32> = blocks.iter().map(|(nid, _)| *nid).collect();
        nids.sort_unstable();
        NodeSet {
            image_path: PathBuf::new(),
            blocks: blocks
                .into_iter()
                .map(|(nid, block)| (nid, Arc::from(block)))
                .collect(),
            nids,
            paths: HashMap::new(),
            children,
            root_ino: 3,
            inode_checksums,
            checksum_seed,
        }
    }

    /// The node set of a manifest's image, built when missing and loaded once per process.
    pub fn for_manifest(manifest: &Manifest) -> Result<Arc<NodeSet>> {
        let key = format!("{}-{:016x}", manifest.name, manifest.fingerprint());
        loaded_once(&key, || NodeSet::load(&fileset::build_image(manifest)?))
    }

    /// The node set of the Android file set: the encrypted image when `image` says so (or,
    /// for [`AndroidImage::choose`]'s default, when it is built), else the plain one.
    pub fn for_android(set: &AndroidFileSet, image: AndroidImage) -> Result<Arc<NodeSet>> {
        match image {
            AndroidImage::Plain => NodeSet::for_manifest(&set.manifest()),
            AndroidImage::Encrypted => {
                let built = EncryptedImage::of(set);
                anyhow::ensure!(
                    built.is_built(),
                    "the encrypted Android image {} is not built: `cargo xtask android-image` \
                     writes it (in a QEMU guest, as root)",
                    built.image.display()
                );
                let key = built.image.to_string_lossy().into_owned();
                loaded_once(&key, || {
                    NodeSet::load_indexed(&built.image, &built.read_index()?)
                })
            }
        }
    }

    pub fn len(&self) -> usize {
        self.nids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nids.is_empty()
    }

    pub fn nids(&self) -> &[u32] {
        &self.nids
    }

    pub fn block(&self, nid: u32) -> Option<&Arc<Block>> {
        self.blocks.get(&nid)
    }

    pub fn kind(&self, nid: u32) -> Option<NodeKind> {
        self.block(nid).map(|b| NodeBlock(&b[..]).kind())
    }

    /// Inode nid of a path relative to the root ("" = root).
    pub fn nid_of(&self, path: &str) -> Option<u32> {
        self.paths.get(path.trim_matches('/')).copied()
    }

    /// The inode of `path` followed by its other node blocks.
    pub fn nodes_of(&self, path: &str) -> Vec<u32> {
        let Some(ino) = self.nid_of(path) else {
            return Vec::new();
        };
        let mut nodes = vec![ino];
        nodes.extend(self.children.get(&ino).into_iter().flatten());
        nodes
    }
}

/// Each image is loaded once per process, shared by every run.
fn loaded_once(key: &str, load: impl FnOnce() -> Result<NodeSet>) -> Result<Arc<NodeSet>> {
    static LOADED: Mutex<Vec<(String, Arc<NodeSet>)>> = Mutex::new(Vec::new());
    let mut loaded = LOADED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((_, set)) = loaded.iter().find(|(k, _)| k == key) {
        return Ok(set.clone());
    }
    let set = Arc::new(load()?);
    loaded.push((key.to_string(), set.clone()));
    Ok(set)
}

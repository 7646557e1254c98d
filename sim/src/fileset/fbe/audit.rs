//! What an encrypted image holds, read from its own bytes: for every entry of the guest's
//! index, the inode block's name, owner, mode, inline xattrs (fscrypt context, SELinux label)
//! and inline data, checked against the recipe's metadata.
use std::collections::BTreeSet;

use anyhow::{Context as _, Result};

use super::{metadata, read_index, EncryptedImage, MKFS_FEATURE_BITS};
use crate::f2fs::{
    node::{F2FS_INLINE_DATA, FADVISE_ENCRYPT, FADVISE_ENC_NAME},
    xattr::{self, Xattr, ENCRYPTION_CONTEXT_NAME, INDEX_ENCRYPTION, INDEX_SECURITY},
    Image, NodeBlock,
};

/// `sizeof(struct fscrypt_context_v2)`: version, modes, flags, log2 data unit size, 3 reserved
/// bytes, the 16-byte key identifier and the 16-byte nonce.
const CONTEXT_V2_BYTES: usize = 40;
const SELINUX_NAME: &[u8] = b"selinux";
/// The first problems kept, each named.
const PROBLEMS_KEPT: usize = 8;

/// Counts over the index's entries; each `_ok` out of the entries it applies to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Audit {
    /// The superblock's feature bits.
    pub features: u32,
    pub entries: usize,
    pub files: usize,
    /// Entries under a policy (their names, in an encrypted parent, are ciphertext).
    pub encrypted_names: usize,
    pub ciphertext_names_ok: usize,
    /// Entries that are encrypted (a policy on them or above) and those with a v2 context.
    pub encrypted: usize,
    pub contexts_ok: usize,
    /// Distinct nonces among the contexts (each inode draws its own).
    pub nonces: usize,
    /// Regular files with a v2 context and with their label: every one, on a phone.
    pub files_with_context: usize,
    pub files_with_label: usize,
    pub labels_ok: usize,
    pub owners_ok: usize,
    /// Encrypted regular files whose data sits inline in the inode (F2FS never does that).
    pub inline_encrypted_files: usize,
    pub problems: Vec<String>,
}

impl Audit {
    pub fn passes(&self) -> bool {
        self.problems.is_empty()
            && self.features == MKFS_FEATURE_BITS
            && self.entries > 0
            && self.ciphertext_names_ok == self.encrypted_names
            && self.contexts_ok == self.encrypted
            && self.nonces == self.encrypted
            && self.files > 0
            && self.files_with_context == self.files
            && self.files_with_label == self.files
            && self.labels_ok == self.entries
            && self.owners_ok == self.entries
            && self.inline_encrypted_files == 0
    }

    /// One line of `name=N` and `name=N/N` counts.
    pub fn summary(&self) -> String {
        format!(
            "features={:#x} entries={} files={} file_contexts={}/{} file_labels={}/{} \
             ciphertext_names={}/{} contexts={}/{} nonces={} labels={}/{} owners={}/{} \
             inline_encrypted={}",
            self.features,
            self.entries,
            self.files,
            self.files_with_context,
            self.files,
            self.files_with_label,
            self.files,
            self.ciphertext_names_ok,
            self.encrypted_names,
            self.contexts_ok,
            self.encrypted,
            self.nonces,
            self.labels_ok,
            self.entries,
            self.owners_ok,
            self.entries,
            self.inline_encrypted_files
        )
    }

    fn problem(&mut self, text: String) {
        if self.problems.len() < PROBLEMS_KEPT {
            self.problems.push(text);
        }
    }
}

/// Audit `image` against the recipe's metadata for its index's entries.
pub fn audit(built: &EncryptedImage) -> Result<Audit> {
    let image = Image::open(&built.image)?;
    let index = read_index(&built.index)?;
    let mut audit = Audit {
        features: image.superblock.feature,
        ..Audit::default()
    };
    let policy_roots: BTreeSet<&str> = index
        .keys()
        .filter(|path| metadata(path, true).policy.is_some())
        .map(String::as_str)
        .collect();
    let under_policy = |path: &str| {
        policy_roots
            .iter()
            .any(|root| path == *root || path.starts_with(&format!("{root}/")))
    };
    let mut nonces = BTreeSet::new();
    for (path, &ino) in &index {
        let block = image
            .read_node(ino)
            .with_context(|| format!("inode {ino} of {path}"))?;
        let node = NodeBlock(&block[..]);
        let xattrs = xattr::inline_xattrs(&node).with_context(|| path.clone())?;
        audit.entries += 1;
        audit.files += usize::from(node.is_regular());
        let (parent, name) = path.rsplit_once('/').unwrap_or(("", path));
        let expected = metadata(path, node.is_dir());
        check_name(&mut audit, path, &node, name, under_policy(parent));
        if under_policy(path) {
            audit.encrypted += 1;
            if let Some(nonce) = check_context(&mut audit, path, &node, &xattrs) {
                nonces.insert(nonce);
                audit.files_with_context += usize::from(node.is_regular());
            }
            if node.is_regular() && node.inline_flags() & F2FS_INLINE_DATA != 0 {
                audit.inline_encrypted_files += 1;
            }
        }
        let mut label = expected.label.clone().into_bytes();
        label.push(0);
        if find(&xattrs, INDEX_SECURITY, SELINUX_NAME) == Some(&label[..]) {
            audit.labels_ok += 1;
            audit.files_with_label += usize::from(node.is_regular());
        } else {
            audit.problem(format!("{path}: no security.selinux {:?}", expected.label));
        }
        let owner = (node.uid(), node.gid(), node.permissions());
        if owner == (expected.uid, expected.gid, expected.mode) {
            audit.owners_ok += 1;
        } else {
            audit.problem(format!(
                "{path}: uid {} gid {} mode {:o}, the recipe's {} {} {:o}",
                owner.0, owner.1, owner.2, expected.uid, expected.gid, expected.mode
            ));
        }
    }
    audit.nonces = nonces.len();
    Ok(audit)
}

fn find<'a>(xattrs: &'a [Xattr], index: u8, name: &[u8]) -> Option<&'a [u8]> {
    xattrs
        .iter()
        .find(|x| x.index == index && x.name == name)
        .map(|x| &x.value[..])
}

/// In an encrypted directory the inode keeps the ciphertext of its name, flagged as such;
/// elsewhere the plaintext.
fn check_name(audit: &mut Audit, path: &str, node: &NodeBlock, name: &str, encrypted: bool) {
    let flagged = node.advise() & FADVISE_ENC_NAME != 0;
    let plaintext = node.name_bytes() == name.as_bytes();
    if encrypted {
        audit.encrypted_names += 1;
        if flagged && !plaintext {
            audit.ciphertext_names_ok += 1;
        } else {
            audit.problem(format!("{path}: its name is on disk in plaintext"));
        }
    } else if flagged || !plaintext {
        audit.problem(format!(
            "{path}: outside any policy, yet its name is not plaintext"
        ));
    }
}

/// The entry's v2 context (AES-256-XTS, AES-256-CTS, 16-byte padding), its nonce.
fn check_context(
    audit: &mut Audit,
    path: &str,
    node: &NodeBlock,
    xattrs: &[Xattr],
) -> Option<[u8; 16]> {
    let context = find(xattrs, INDEX_ENCRYPTION, ENCRYPTION_CONTEXT_NAME);
    let valid = node.advise() & FADVISE_ENCRYPT != 0
        && context.is_some_and(|c| c.len() == CONTEXT_V2_BYTES && c[..4] == [2, 1, 4, 2]);
    if !valid {
        audit.problem(format!("{path}: no fscrypt v2 context ({context:?})"));
        return None;
    }
    audit.contexts_ok += 1;
    context.and_then(|c| c[24..40].try_into().ok())
}

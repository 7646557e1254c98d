//! What both guests on the Android image get: the writer and the mkfs and mount options.
use sim::fileset::fbe;

/// The guest's writer (also adds the keys for the apps' run).
pub(crate) const WRITER: &str = include_str!("../../guest/android_data.c");

/// The mkfs and mount options, for both guests.
pub(super) fn guest_config() -> String {
    format!(
        "MKFS_ARGS=\"{}\"\nMOUNT_OPTIONS={}\n",
        fbe::MKFS_ARGS.join(" "),
        fbe::MOUNT_OPTIONS
    )
}

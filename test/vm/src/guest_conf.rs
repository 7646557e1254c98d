//! /etc/vm-test.conf, the guest script's settings: the file set's and each phase's.
use super::{
    check, churn, cp_anatomy, remount,
    settings::{HEADROOM_MB, NDIRS, NFILES, TUNE_PSI_GOAL, VARIANTS, VARIANT_DIRS},
    uidswitch,
};

/// /etc/vm-test.conf, the guest script's settings.
pub(super) fn guest_config() -> String {
    format!(
        "NDIRS={NDIRS}\nNFILES={NFILES}\nVARIANTS=\"{}\"\nVARIANT_DIRS={VARIANT_DIRS}\n\
         HEADROOM_MB={HEADROOM_MB}\nTUNE_PSI_GOAL={TUNE_PSI_GOAL}\nCHURN={}\n\
         CPANAT_MIXES=\"{}\"\nCPANAT_ARGS=\"-p {} -n {} -s {}\"\nUID_SWITCH={}\n\
         REMOUNT_FILES={}\nTYPES_FILE={}\nTYPES_FILE_BLOCKS={}\n",
        VARIANTS.join(" "),
        churn::CHURN,
        cp_anatomy::MIXES.join(" "),
        cp_anatomy::PROCS,
        cp_anatomy::OPS,
        cp_anatomy::SEED,
        uidswitch::UID,
        remount::FILES,
        check::TYPES_FILE,
        check::TYPES_FILE_BLOCKS
    )
}

//! `nodescope whatif`: would the compressed node cache help on this device, and with which
//! settings? `--compressors --image IMG` measures every compressor setting on the image's node
//! blocks (view/whatif_compressors.rs).
use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;

use crate::view::{
    stdout::{closed_is_success, print},
    whatif_compressors::compressors_table,
};

#[derive(Args)]
pub struct WhatifArgs {
    /// Measure lz4 and zstd levels 1..15 on the image's node blocks: ratio, compress and
    /// decompress MB/s, working memory, and how many blocks fit 256/512/1024-byte slots.
    #[arg(long)]
    compressors: bool,
    /// The F2FS image (or device, read-only) whose node blocks are compressed.
    #[arg(long, value_name = "IMG")]
    image: Option<PathBuf>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(args: WhatifArgs) -> Result<()> {
    if !args.compressors {
        bail!("whatif needs --compressors (the replay grid is not built yet)");
    }
    let Some(image) = args.image else {
        bail!("whatif --compressors needs --image IMG");
    };
    closed_is_success(compressors_table(&image, args.json).and_then(|table| print(&table)))
}

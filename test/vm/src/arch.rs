//! The guest architectures: x86_64 (the VM test's default) and arm64 (Android's conventions).
use anyhow::{bail, Result};

/// An architecture nodescope is distributed for, and a guest can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    X86_64,
    Aarch64,
}

impl Arch {
    /// `aarch64`/`arm64` or `x86_64`/`amd64`; `None` for the host.
    pub fn parse(name: Option<&str>) -> Result<Self> {
        match name.unwrap_or(std::env::consts::ARCH) {
            "x86_64" | "amd64" => Ok(Self::X86_64),
            "aarch64" | "arm64" => Ok(Self::Aarch64),
            other => bail!("unknown architecture {other:?}: use aarch64 or x86_64"),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::X86_64 => "x86_64",
            Self::Aarch64 => "aarch64",
        }
    }
}

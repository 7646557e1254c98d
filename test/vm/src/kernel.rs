//! Debian's kernel packages, downloaded with apt and unpacked with dpkg-deb: nothing is
//! installed on the host. Both the .deb and the unpacked tree are cached between runs.
use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{bail, Context as _, Result};

use crate::util;

/// A kernel the VM test knows: its label and the meta package that names the exact one.
#[derive(Clone, Copy, Debug)]
pub struct KernelSpec {
    pub label: &'static str,
    meta: &'static str,
    /// The exact package's version must start with this (guards a meta package that moved on).
    version_prefix: &'static str,
    /// The Debian suite it comes from when it is not the host's (bookworm's) own: read through
    /// a private apt configuration under target/ (`Apt`), the host's sources untouched.
    suite: Option<&'static str>,
}

pub const KERNELS: [KernelSpec; 4] = [
    KernelSpec {
        label: "6.1",
        meta: "linux-image-amd64",
        version_prefix: "6.1.",
        suite: None,
    },
    KernelSpec {
        label: "6.12",
        meta: "linux-image-6.12-amd64",
        version_prefix: "6.12.",
        suite: None,
    },
    // Debian's newest: trixie-backports' 7.3 and sid's 7.2, as a user of a current
    // distribution runs them. Their image packages are split (below, `split_parts`).
    KernelSpec {
        label: "7.3",
        meta: "linux-image-amd64",
        version_prefix: "7.3.",
        suite: Some("trixie-backports"),
    },
    KernelSpec {
        label: "7.2",
        meta: "linux-image-amd64",
        version_prefix: "7.2.",
        suite: Some("sid"),
    },
];

/// Debian's arm64 kernel (not the cloud flavour, which has no f2fs), for
/// `vm-test --arch arm64`: apt resolves it through the arm64 dpkg architecture.
pub const ARM64_KERNELS: [KernelSpec; 1] = [KernelSpec {
    label: "6.1",
    meta: "linux-image-arm64:arm64",
    version_prefix: "6.1.",
    suite: None,
}];

/// How apt is asked: the host's configuration, or a private one for another suite, whose
/// sources, package lists and cache live under target/vm-cache/apt/<suite>/.
struct Apt {
    options: Vec<String>,
}

impl Apt {
    fn for_spec(spec: &KernelSpec) -> Result<Apt> {
        let Some(suite) = spec.suite else {
            return Ok(Apt {
                options: Vec::new(),
            });
        };
        let root = util::target_dir().join("vm-cache/apt").join(suite);
        for dir in ["etc/apt.conf.d", "etc/preferences.d", "etc/sources.list.d"] {
            fs::create_dir_all(root.join(dir))?;
        }
        fs::create_dir_all(root.join("lists/partial"))?;
        fs::create_dir_all(root.join("cache/archives/partial"))?;
        // Only the suite asked for: a meta package then resolves within it alone.
        fs::write(
            root.join("etc/sources.list"),
            format!(
                "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] \
                 http://deb.debian.org/debian {suite} main\n"
            ),
        )?;
        let path = |p: &str| root.join(p).display().to_string();
        let options = [
            format!("Dir::Etc={}", path("etc")),
            format!("Dir::Etc::SourceParts={}", path("etc/sources.list.d")),
            format!("Dir::State::Lists={}", path("lists")),
            format!("Dir::Cache={}", path("cache")),
            "Dir::State::status=/dev/null".to_string(),
        ]
        .into_iter()
        .flat_map(|o| ["-o".to_string(), o])
        .collect();
        let apt = Apt { options };
        let fetched = fs::read_dir(root.join("lists"))?
            .flatten()
            .any(|e| e.file_name().to_string_lossy().ends_with("_Packages"));
        if !fetched {
            eprintln!("vm-test: reading the package list of Debian's {suite}");
            apt.update()?;
        }
        Ok(apt)
    }

    fn command(&self, program: &str) -> Command {
        let mut command = Command::new(program);
        command.args(&self.options);
        command
    }

    fn update(&self) -> Result<()> {
        util::run(self.command("apt-get").args(["update", "-q"])).context("apt-get update")
    }

    fn depends(&self, package: &str) -> Option<String> {
        let out = self
            .command("apt-cache")
            .args(["depends", package])
            .stderr(std::process::Stdio::null())
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

/// An unpacked kernel: its release string and where its image and modules are.
pub struct Kernel {
    pub release: String,
    pub vmlinuz: PathBuf,
    pub modules: PathBuf,
}

/// Resolve, download (once) and unpack (once) the kernel of `spec` under `cache`.
pub fn prepare(spec: &KernelSpec, cache: &Path) -> Result<Kernel> {
    let apt = Apt::for_spec(spec)?;
    let package = resolve(spec, &apt)?;
    let release = package.trim_start_matches("linux-image-").to_string();
    let tree = cache.join(format!("kernel-{release}"));
    if !tree.join(".complete").exists() {
        let debs = cache.join("debs");
        let mut parts = vec![package.clone()];
        parts.extend(split_parts(&apt, &package, &release));
        let mut downloaded = Vec::new();
        for part in &parts {
            downloaded.push(download_with(
                &apt,
                part,
                None,
                &debs,
                &format!("vm-test: downloading {part}"),
            )?);
        }
        unpack(&downloaded, &tree)?;
        // The unpacked tree is the cache; the .debs would only double the kernel's disk use.
        for deb in downloaded {
            let _ = fs::remove_file(&deb);
        }
    }
    // Debian's 6.x packages put the image in /boot and the modules in /lib/modules; the split
    // 7.x ones put both (and `config`, `modules.builtin`) under /usr/lib/modules/<release>/.
    let candidates = [
        (
            tree.join(format!("boot/vmlinuz-{release}")),
            tree.join(format!("lib/modules/{release}")),
        ),
        (
            tree.join(format!("usr/lib/modules/{release}/vmlinuz")),
            tree.join(format!("usr/lib/modules/{release}")),
        ),
    ];
    let Some((vmlinuz, modules)) = candidates
        .into_iter()
        .find(|(image, modules)| image.exists() && modules.join("kernel").is_dir())
    else {
        bail!("{} has no kernel image or modules", tree.display());
    };
    Ok(Kernel {
        vmlinuz,
        modules,
        release,
    })
}

/// The packages a split image package (Debian's 7.x: `linux-image-<release>` is empty) depends
/// on for its image, modules and base files; none for a whole one.
fn split_parts(apt: &Apt, package: &str, release: &str) -> Vec<String> {
    let Some(text) = apt.depends(package) else {
        return Vec::new();
    };
    ["linux-binary", "linux-modules", "linux-base"]
        .iter()
        .map(|part| format!("{part}-{release}"))
        .filter(|wanted| {
            text.lines()
                .filter_map(|l| l.trim().strip_prefix("Depends: "))
                .any(|p| p.trim().split(':').next() == Some(wanted.as_str()))
        })
        .collect()
}

/// `linux-image-amd64` -> `linux-image-6.1.0-57-amd64` (the ABI number moves: never hard-coded).
fn resolve(spec: &KernelSpec, apt: &Apt) -> Result<String> {
    if let Some(found) = depends_of(apt, spec.meta) {
        return check_version(spec, found);
    }
    eprintln!(
        "vm-test: apt-cache does not know {}; running apt-get update",
        spec.meta
    );
    apt.update()?;
    let found = depends_of(apt, spec.meta)
        .with_context(|| format!("cannot resolve the kernel package from {}", spec.meta))?;
    check_version(spec, found)
}

fn depends_of(apt: &Apt, meta: &str) -> Option<String> {
    let text = apt.depends(meta)?;
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("Depends: "))
        .map(str::trim)
        .find(|p| {
            p.starts_with("linux-image-") && p.as_bytes().get(12).is_some_and(u8::is_ascii_digit)
        })
        // A foreign architecture's dependency is spelled `linux-image-6.1.0-57-arm64:arm64`.
        .map(|p| p.split(':').next().unwrap_or(p).to_string())
}

fn check_version(spec: &KernelSpec, package: String) -> Result<String> {
    let version = package.trim_start_matches("linux-image-");
    if !version.starts_with(spec.version_prefix) {
        bail!(
            "{} now points at {package}, not a {} kernel",
            spec.meta,
            spec.label
        );
    }
    Ok(package)
}

/// A .deb of `package` in `debs` (of `version` when given), as `apt-get download` names it:
/// `<package>_<version>_<arch>.deb`, an epoch's colon spelled `%3a`.
fn cached_deb(package: &str, version: Option<&str>, debs: &Path) -> Option<PathBuf> {
    let prefix = match version {
        Some(version) => format!("{package}_{}_", version.replace(':', "%3a")),
        None => format!("{package}_"),
    };
    fs::read_dir(debs)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".deb"))
        })
}

/// `apt-get download` of `package` (exactly `version` when given) into `debs`, unless a .deb
/// of it is there already; `announce` is printed before a download. Runs `apt-get update` once
/// when apt does not know the package (yet).
pub(crate) fn download_deb(
    package: &str,
    version: Option<&str>,
    debs: &Path,
    announce: &str,
) -> Result<PathBuf> {
    let host = Apt {
        options: Vec::new(),
    };
    download_with(&host, package, version, debs, announce)
}

fn download_with(
    apt: &Apt,
    package: &str,
    version: Option<&str>,
    debs: &Path,
    announce: &str,
) -> Result<PathBuf> {
    if let Some(deb) = cached_deb(package, version, debs) {
        return Ok(deb);
    }
    fs::create_dir_all(debs)?;
    eprintln!("{announce}");
    let wanted = match version {
        Some(version) => format!("{package}={version}"),
        None => package.to_string(),
    };
    let fetch = || {
        util::run(
            apt.command("apt-get")
                .args(["download", "-q", &wanted])
                .current_dir(debs),
        )
    };
    if fetch().is_err() {
        apt.update()?;
        fetch().with_context(|| format!("apt-get download {wanted}"))?;
    }
    cached_deb(package, version, debs)
        .with_context(|| format!("apt-get download left no {wanted} .deb"))
}

fn unpack(debs: &[PathBuf], tree: &Path) -> Result<()> {
    let partial = tree.with_extension("partial");
    let _ = fs::remove_dir_all(&partial);
    fs::create_dir_all(&partial)?;
    for deb in debs {
        eprintln!("vm-test: unpacking {}", deb.display());
        util::run(Command::new("dpkg-deb").arg("-x").arg(deb).arg(&partial))?;
    }
    fs::write(partial.join(".complete"), b"")?;
    let _ = fs::remove_dir_all(tree);
    fs::rename(&partial, tree).context("moving the unpacked kernel into place")
}

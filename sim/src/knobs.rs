//! The two sysfs controls, read from a sysfs-like directory `<root>/<dev>/` with the files
//! `node_compress_threshold` and `node_compress_interval` (the files a controller writes).
//! Validated like the kernel's store functions: a value that does not parse, or is out of
//! range, is rejected (EINVAL), the old value is kept, and the rejection is logged.
//! This is the kernel's side of the files, so it parses as `kstrtouint` does (hex and octal
//! too); every reader of a knob file (the controller, nodescope's display) goes through
//! `controller::knobs::read_file`, which parses what sysfs prints. Both open the files the
//! same way (`tracer_common::files::read_no_follow`: no symlink, no FIFO).
use std::{
    fs,
    ops::RangeInclusive,
    path::{Path, PathBuf},
};

use anyhow::{bail, Context as _, Result};
use tracer_common::{
    files,
    knobs::{Knob, Knobs},
    text::quote_capped,
};

/// Where the knob values come from.
pub enum KnobSource {
    /// Fixed values: cheap scenario runs.
    Static(Knobs),
    /// A sysfs-like directory, re-read at every worker pass.
    Dir(KnobDir),
}

impl KnobSource {
    pub fn values(&self) -> Knobs {
        match self {
            KnobSource::Static(values) => *values,
            KnobSource::Dir(dir) => dir.values,
        }
    }

    /// Re-read the files (no-op for static knobs) and return the values in force.
    pub fn refresh(&mut self) -> Knobs {
        match self {
            KnobSource::Static(values) => *values,
            KnobSource::Dir(dir) => dir.refresh(),
        }
    }
}

pub struct KnobDir {
    dir: PathBuf,
    values: Knobs,
    /// The last rejected text of each file, so a bad value is logged once, not every pass.
    rejected: [Option<String>; 2],
}

impl KnobDir {
    /// Open `<root>/<dev>/`, creating it and the two files with the defaults when absent.
    pub fn open(root: &Path, dev: &str) -> Result<KnobDir> {
        let dir = root.join(dev);
        fs::create_dir_all(&dir)
            .with_context(|| format!("creating knob directory {}", dir.display()))?;
        // A symlink here would make every knob and stats write land somewhere else.
        if !files::is_real_dir(&dir) {
            bail!(
                "{} is not a directory of its own (a symlink?): refusing to write knob files \
                 through it; remove it or choose another knob directory",
                dir.display()
            );
        }
        let defaults = Knobs::DEFAULT;
        for knob in Knob::ALL {
            create_default(&dir.join(knob.file_name()), defaults.get(knob))?;
        }
        let mut knobs = KnobDir {
            dir,
            values: defaults,
            rejected: [None, None],
        };
        knobs.refresh();
        Ok(knobs)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn refresh(&mut self) -> Knobs {
        for (which, knob) in Knob::ALL.into_iter().enumerate() {
            let value = self.read(which, knob, self.values.get(knob));
            self.values.set(knob, value);
        }
        self.values
    }

    /// The value in `knob`'s file, or `old` when it cannot be read or the kernel would refuse
    /// it; `which` is the knob's index in [`Knob::ALL`].
    fn read(&mut self, which: usize, knob: Knob, old: u32) -> u32 {
        let path = self.dir.join(knob.file_name());
        let text = match files::read_no_follow(&path) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(e) => {
                self.reject_once(which, format!("unreadable: {e}"), || {
                    format!("{}: cannot read ({e}); keeping {old}", path.display())
                });
                return old;
            }
        };
        match validate(&text, knob.range()) {
            Ok(value) => {
                self.rejected[which] = None;
                value
            }
            Err(why) => {
                self.reject_once(which, text.clone(), || rejection(&path, &text, &why, old));
                old
            }
        }
    }

    fn reject_once(&mut self, which: usize, key: String, message: impl FnOnce() -> String) {
        if self.rejected[which].as_deref() != Some(key.as_str()) {
            log::warn!("{}", message());
            self.rejected[which] = Some(key);
        }
    }
}

/// The warning for a value the kernel would refuse: quotes at most the head of the file, which
/// may be a secret if the knob is somebody's file.
fn rejection(path: &Path, text: &str, why: &str, old: u32) -> String {
    format!(
        "{}: {} rejected ({why}); keeping {old}",
        path.display(),
        quote_capped(text.trim_end().as_bytes())
    )
}

/// Create a knob file holding `value` unless one is there; anything else in its place (a
/// symlink, dangling or not; a directory) is refused, never followed.
fn create_default(path: &Path, value: u32) -> Result<()> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_file() => Ok(()),
        Ok(_) => bail!(
            "{} is not a regular file (a symlink?): refusing to use it as a knob file",
            path.display()
        ),
        Err(_) => files::create_new(path, format!("{value}\n").as_bytes())
            .with_context(|| format!("creating {}", path.display())),
    }
}

/// `kstrtouint(buf, 0, &t)` (one trailing newline allowed; 0x hex and 0 octal prefixes), then
/// the range check the store function makes.
pub fn validate(text: &str, range: RangeInclusive<u32>) -> Result<u32, String> {
    let trimmed = text.strip_suffix('\n').unwrap_or(text);
    let parsed = if let Some(hex) = trimmed
        .strip_prefix("0x")
        .or_else(|| trimmed.strip_prefix("0X"))
    {
        u32::from_str_radix(hex, 16)
    } else if trimmed.len() > 1 && trimmed.starts_with('0') {
        u32::from_str_radix(&trimmed[1..], 8)
    } else {
        trimmed.parse::<u32>()
    };
    let value = parsed.map_err(|_| "EINVAL: not an unsigned integer".to_string())?;
    if !range.contains(&value) {
        return Err(format!(
            "EINVAL: outside {}..={}",
            range.start(),
            range.end()
        ));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use tracer_common::knobs::{INTERVAL_FILE, INTERVAL_RANGE_MS, THRESHOLD_FILE, THRESHOLD_RANGE};

    use super::*;

    #[test]
    fn validation_follows_the_kernel() {
        assert_eq!(validate("25\n", THRESHOLD_RANGE), Ok(25));
        assert_eq!(validate("0", THRESHOLD_RANGE), Ok(0));
        assert_eq!(validate("100", THRESHOLD_RANGE), Ok(100));
        assert!(validate("101", THRESHOLD_RANGE).is_err());
        assert!(validate("-1", THRESHOLD_RANGE).is_err());
        assert!(validate("", THRESHOLD_RANGE).is_err());
        assert!(validate("25\n\n", THRESHOLD_RANGE).is_err());
        assert!(validate(" 25", THRESHOLD_RANGE).is_err());
        assert!(validate("abc", THRESHOLD_RANGE).is_err());
        assert_eq!(validate("0x64", THRESHOLD_RANGE), Ok(100));
        assert_eq!(
            validate("99", INTERVAL_RANGE_MS).unwrap_err(),
            "EINVAL: outside 100..=30000"
        );
        assert_eq!(validate("100", INTERVAL_RANGE_MS), Ok(100));
        assert_eq!(validate("30000", INTERVAL_RANGE_MS), Ok(30_000));
        assert!(validate("30001", INTERVAL_RANGE_MS).is_err());
    }

    #[test]
    fn files_are_created_with_defaults_and_bad_values_keep_the_old_ones() {
        let dir = tempfile::TempDir::new().unwrap();
        let root = dir.path();
        let mut knobs = KnobDir::open(root, "sim0").unwrap();
        assert_eq!(knobs.values, Knobs::DEFAULT);
        assert_eq!(
            fs::read_to_string(root.join("sim0").join(THRESHOLD_FILE)).unwrap(),
            "25\n"
        );

        fs::write(knobs.dir().join(THRESHOLD_FILE), "40\n").unwrap();
        fs::write(knobs.dir().join(INTERVAL_FILE), "250").unwrap();
        assert_eq!(
            knobs.refresh(),
            Knobs {
                threshold: 40,
                interval_ms: 250
            }
        );

        fs::write(knobs.dir().join(THRESHOLD_FILE), "101\n").unwrap();
        fs::write(knobs.dir().join(INTERVAL_FILE), "fast").unwrap();
        assert_eq!(
            knobs.refresh(),
            Knobs {
                threshold: 40,
                interval_ms: 250
            }
        );

        fs::write(knobs.dir().join(THRESHOLD_FILE), "0\n").unwrap();
        assert_eq!(knobs.refresh().threshold, 0);
        assert!(!knobs.values.enabled());
    }

    #[test]
    fn symlinks_in_the_knob_directory_are_refused_not_followed() {
        let dir = tempfile::TempDir::new().unwrap();
        let (root, outside) = (dir.path().join("root"), dir.path().join("outside"));
        fs::create_dir_all(root.join("sim0")).unwrap();
        fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(
            outside.join("created"),
            root.join("sim0").join(THRESHOLD_FILE),
        )
        .unwrap();
        let err = KnobDir::open(&root, "sim0")
            .err()
            .expect("a dangling knob symlink");
        assert!(format!("{err:#}").contains("not a regular file"), "{err:#}");
        assert!(!outside.join("created").exists());

        std::os::unix::fs::symlink(&outside, root.join("linked")).unwrap();
        let err = KnobDir::open(&root, "linked")
            .err()
            .expect("a linked device dir");
        assert!(
            format!("{err:#}").contains("not a directory of its own"),
            "{err:#}"
        );
        assert_eq!(fs::read_dir(&outside).unwrap().count(), 0);
    }

    #[test]
    fn a_rejected_value_is_quoted_capped() {
        let secret = format!("{}SECRET\x1b[2J", "x".repeat(40));
        let message = rejection(Path::new("/k/t"), &secret, "EINVAL", 25);
        assert!(
            !message.contains("SECRET") && !message.contains('\x1b'),
            "{message}"
        );
        assert!(message.starts_with(&format!("/k/t: \"{}\"...", "x".repeat(32))));
    }
}

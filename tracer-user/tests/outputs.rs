//! One policy for every file a subcommand creates (issue 33, finding 9): an existing file is
//! refused unless `--force`; a symlink is never written through, `--force` or not; a FIFO is
//! refused without blocking. `export -o` overwrote and followed symlinks; `record -o --force`
//! followed them.
use std::{
    fs,
    os::unix::fs::symlink,
    path::{Path, PathBuf},
    process::{Command, Output},
    time::Duration,
};

use tracer_common::{Event, EventKind};

mod common;

use common::{mkfifo, output_within, recording_header, scratch, NODESCOPE};

const PROMPTLY: Duration = Duration::from_secs(30);

/// A small complete recording.
fn recording(path: &Path) {
    let header = recording_header(1_000_000_000);
    let file = fs::File::create(path).unwrap();
    let mut writer = nodescope::record::writer::Writer::new(file, &header).unwrap();
    for i in 0..100u64 {
        let event = Event::new(EventKind::NodeRead, i * 10_000_000)
            .task(7)
            .nid(i as u32);
        writer.event(&event).unwrap();
    }
    writer.finish(1_000_000_000).unwrap();
}

/// The traps: an existing file, a symlink to a file outside, a dangling symlink, a FIFO, a
/// name under a symlinked directory and one under a directory anyone may write in.
struct Traps {
    existing: PathBuf,
    link: PathBuf,
    target: PathBuf,
    dangling: PathBuf,
    never_created: PathBuf,
    fifo: PathBuf,
    /// Under `shared/ns`, a link to `elsewhere`: a symlink above the last component.
    under_link: PathBuf,
    elsewhere: PathBuf,
    /// Under `open`, a directory anyone may write in (0777, not sticky).
    under_open: PathBuf,
}

impl Traps {
    fn set(dir: &Path) -> Traps {
        let traps = Traps {
            existing: dir.join("existing"),
            link: dir.join("link"),
            target: dir.join("target"),
            dangling: dir.join("dangling"),
            never_created: dir.join("never-created"),
            fifo: dir.join("fifo"),
            under_link: dir.join("shared/ns/out"),
            elsewhere: dir.join("elsewhere"),
            under_open: dir.join("open/out"),
        };
        fs::create_dir(&traps.elsewhere).unwrap();
        fs::create_dir(dir.join("shared")).unwrap();
        symlink(&traps.elsewhere, dir.join("shared/ns")).unwrap();
        fs::create_dir(dir.join("open")).unwrap();
        {
            use std::os::unix::fs::PermissionsExt as _;
            fs::set_permissions(dir.join("open"), fs::Permissions::from_mode(0o777)).unwrap();
        }
        fs::write(&traps.existing, "precious").unwrap();
        fs::write(&traps.target, "precious").unwrap();
        symlink(&traps.target, &traps.link).unwrap();
        symlink(&traps.never_created, &traps.dangling).unwrap();
        mkfifo(&traps.fifo);
        traps
    }

    /// `command(output, force)` against every trap: what each must say, and nothing written.
    fn check(&self, command: impl Fn(&Path, bool) -> Command) {
        let refused = |path: &Path, force: bool, says: &str| {
            let output = output_within(&mut command(path, force), PROMPTLY);
            let stderr = stderr(&output);
            assert!(!output.status.success(), "{path:?} force={force}: {stderr}");
            assert!(stderr.contains(says), "{path:?} force={force}: {stderr}");
        };
        refused(
            &self.existing,
            false,
            "exists: refusing to overwrite it (--force replaces it)",
        );
        for force in [false, true] {
            refused(
                &self.link,
                force,
                "is a symlink: refusing to write through it",
            );
            refused(
                &self.dangling,
                force,
                "is a symlink: refusing to write through it",
            );
            refused(&self.fifo, force, "is a FIFO: refusing to write there");
            refused(
                &self.under_link,
                force,
                "ns is a symlink: refusing to follow it",
            );
            refused(&self.under_open, force, "has mode 777: others may replace");
        }
        assert!(!self.elsewhere.join("out").exists());
        assert!(!self.under_open.exists());
        assert_eq!(fs::read_to_string(&self.existing).unwrap(), "precious");
        assert_eq!(fs::read_to_string(&self.target).unwrap(), "precious");
        assert!(!self.never_created.exists());
        let forced = output_within(&mut command(&self.existing, true), PROMPTLY);
        assert!(forced.status.success(), "{}", stderr(&forced));
        assert_ne!(fs::read(&self.existing).unwrap(), b"precious");
    }
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn export_follows_the_output_policy() {
    let dir = scratch("outputs-export");
    let rec = dir.path().join("rec.nsr");
    recording(&rec);
    Traps::set(dir.path()).check(|out, force| {
        let mut command = Command::new(NODESCOPE);
        command
            .arg("export")
            .arg("--perfetto")
            .arg(&rec)
            .arg("-o")
            .arg(out);
        if force {
            command.arg("--force");
        }
        command
    });
}

#[test]
fn record_follows_the_output_policy() {
    let dir = scratch("outputs-record");
    let runtime = dir.path().join("runtime");
    fs::create_dir(&runtime).unwrap();
    Traps::set(dir.path()).check(|out, force| {
        let mut command = Command::new(NODESCOPE);
        command
            .args([
                "record",
                "--source",
                "sim",
                "--speed",
                "0",
                "--duration",
                "1",
                "-o",
            ])
            .arg(out)
            .env("XDG_RUNTIME_DIR", &runtime);
        if force {
            command.arg("--force");
        }
        command
    });
}

#[test]
fn probe_discover_output_follows_the_output_policy() {
    let dir = scratch("outputs-probe");
    let kallsyms = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/btf/kallsyms.txt");
    Traps::set(dir.path()).check(|out, force| {
        let mut command = Command::new(NODESCOPE);
        command
            .args(["probe", "--discover", "--no-btf", "--kallsyms"])
            .arg(&kallsyms)
            .arg("-o")
            .arg(out);
        if force {
            command.arg("--force");
        }
        command
    });
}

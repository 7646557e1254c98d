//! Boot the guest under QEMU: TCG unless real KVM is loaded (a PVM-only /dev/kvm cannot boot
//! stock kernels), the F2FS disk and the results disk on virtio, the console on stdout.
use std::{
    io::{BufRead as _, BufReader, Write as _},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _, Result};

use crate::Arch;

pub struct Boot<'a> {
    pub label: &'a str,
    /// The guest's architecture: x86_64 (the host's, KVM when loaded) or aarch64 (always TCG).
    pub arch: Arch,
    pub vmlinuz: &'a Path,
    pub initrd: &'a Path,
    pub disk: &'a Path,
    pub results: &'a Path,
    pub console_log: &'a Path,
    pub timeout: Duration,
    /// Virtual CPUs.
    pub cpus: u32,
}

/// One guest run's files in its work directory, named the same in every phase: the
/// initramfs, the F2FS disk, the results disk (its tar comes back there) and the console log.
pub struct GuestFiles {
    pub work: PathBuf,
    pub initrd: PathBuf,
    pub disk: PathBuf,
    pub results: PathBuf,
    pub console_log: PathBuf,
    /// The guest's virtual CPUs: 2 unless a phase sets it.
    pub cpus: u32,
}

/// The guest's F2FS disk in the run's directory, next to its `results` (the checks read it:
/// the access phase's what-if takes its node blocks).
pub const DISK_IMAGE: &str = "f2fs.img";
/// The F2FS disk's size (sparse).
pub const DISK_BYTES: u64 = 1 << 30;
/// The results disk's size (sparse): the tar of /results.
const RESULTS_BYTES: u64 = 64 << 20;

impl GuestFiles {
    /// The files of a run in `work`, emptied first (a run starts from nothing).
    pub fn fresh(work: PathBuf) -> Result<GuestFiles> {
        let _ = std::fs::remove_dir_all(&work);
        std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
        Ok(GuestFiles::in_dir(&work))
    }

    fn in_dir(work: &Path) -> GuestFiles {
        GuestFiles {
            work: work.to_path_buf(),
            initrd: work.join("initramfs.cpio"),
            disk: work.join(DISK_IMAGE),
            results: work.join("results.img"),
            console_log: work.join("console.log"),
            cpus: 2,
        }
    }

    /// Both disks, empty and sparse (the guest formats its own F2FS disk).
    pub fn create_disks(&self) -> Result<()> {
        sparse_file(&self.disk, DISK_BYTES)?;
        self.create_results_disk()
    }

    /// The results disk only (a phase that formats the F2FS disk on the host).
    pub fn create_results_disk(&self) -> Result<()> {
        sparse_file(&self.results, RESULTS_BYTES)
    }

    /// The boot of `vmlinuz` with these files.
    pub fn boot<'a>(
        &'a self,
        label: &'a str,
        arch: Arch,
        vmlinuz: &'a Path,
        timeout: Duration,
    ) -> Boot<'a> {
        Boot {
            label,
            arch,
            vmlinuz,
            initrd: &self.initrd,
            disk: &self.disk,
            results: &self.results,
            console_log: &self.console_log,
            timeout,
            cpus: self.cpus,
        }
    }

    /// Boot `vmlinuz` with these files to its power-off, then unpack the results archive the
    /// guest left ([`GuestFiles::unpack`]); that directory.
    pub fn boot_and_unpack(
        &self,
        label: &str,
        arch: Arch,
        vmlinuz: &Path,
        timeout: Duration,
    ) -> Result<PathBuf> {
        let boot = self.boot(label, arch, vmlinuz, timeout);
        let mut took = run(&boot)?;
        let console = std::fs::read_to_string(&self.console_log).unwrap_or_default();
        if let Some(why) = panicked_before_init(&console) {
            // Nothing of ours ran and the disks are as they were: one more boot is the same
            // test. The first console is kept beside the second.
            let _ = std::fs::rename(&self.console_log, self.work.join("console.panic.log"));
            eprintln!(
                "vm-test {label}: the guest kernel panicked before its init ran ({why}); \
                 booting once more"
            );
            took = run(&boot)?;
        }
        eprintln!("vm-test {label}: VM ran {:.1} s", took.as_secs_f64());
        self.unpack()
    }

    /// The results archive the guest left on its results disk, unpacked into `work`/results;
    /// that directory.
    pub fn unpack(&self) -> Result<PathBuf> {
        let out = self.work.join("results");
        std::fs::create_dir_all(&out)?;
        crate::util::run(
            Command::new("tar")
                .arg("-xf")
                .arg(&self.results)
                .arg("-C")
                .arg(&out),
        )
        .context("the guest left no results archive (see console.log)")?;
        Ok(out)
    }

    /// The disks and the initramfs removed: a passing run frees ~180 MB of disk (a failing one
    /// keeps them for inspection).
    pub fn remove_images(&self) {
        for image in [&self.disk, &self.results, &self.initrd] {
            let _ = std::fs::remove_file(image);
        }
    }
}

/// An empty file of `bytes` (sparse).
pub fn sparse_file(path: &Path, bytes: u64) -> Result<()> {
    let file = crate::util::create_no_follow(path)
        .with_context(|| format!("creating {}", path.display()))?;
    file.set_len(bytes)?;
    Ok(())
}

/// The QEMU binary, machine arguments, CPU and console for a guest architecture.
struct Machine {
    qemu: &'static str,
    machine: &'static [&'static str],
    accel: &'static str,
    cpu: &'static str,
    console: &'static str,
}

fn machine(arch: Arch) -> Machine {
    match arch {
        Arch::X86_64 => {
            let accel = accel();
            Machine {
                qemu: "qemu-system-x86_64",
                machine: &[],
                accel,
                cpu: if accel == "kvm" { "host" } else { "max" },
                console: "ttyS0",
            }
        }
        // Under TCG neoverse-n1 booted to /init fastest of the CPUs tried (cortex-a57/a72,
        // max, max with pauth-impdef=on): max pays for emulating pointer authentication.
        Arch::Aarch64 => Machine {
            qemu: "qemu-system-aarch64",
            machine: &["-M", "virt"],
            accel: "tcg",
            cpu: "neoverse-n1",
            console: "ttyAMA0",
        },
    }
}

fn accel() -> &'static str {
    let kvm_loaded =
        Path::new("/sys/module/kvm_intel").exists() || Path::new("/sys/module/kvm_amd").exists();
    let writable = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_ok();
    if kvm_loaded && writable {
        "kvm"
    } else {
        "tcg"
    }
}

/// Run the VM to its power-off; the console goes to stderr (prefixed) and to `console_log`.
pub fn run(boot: &Boot) -> Result<Duration> {
    let Machine {
        qemu,
        machine,
        accel,
        cpu,
        console,
    } = machine(boot.arch);
    let drive = |file: &Path, id: &str, serial: &str| {
        [
            "-drive".to_string(),
            format!(
                "file={},format=raw,if=none,id={id},cache=unsafe",
                file.display()
            ),
            "-device".to_string(),
            format!("virtio-blk-pci,drive={id},serial={serial}"),
        ]
    };
    let mut command = Command::new(qemu);
    command
        .args(machine)
        .args(["-accel", accel, "-cpu", cpu, "-m", "2048"])
        .arg("-smp")
        .arg(boot.cpus.to_string())
        .args([
            "-nodefaults",
            "-no-user-config",
            "-display",
            "none",
            "-serial",
            "stdio",
            "-no-reboot",
        ])
        .arg("-kernel")
        .arg(boot.vmlinuz)
        .arg("-initrd")
        .arg(boot.initrd)
        .arg("-append")
        // loglevel=5, not quiet: a soft lockup's or RCU stall's stack is printed at the
        // default level (4), which quiet hides; one 6.1 run hung with only the headline.
        .arg(format!(
            "console={console} panic=-1 loglevel=5 rdinit=/init"
        ))
        .args(drive(boot.disk, "d0", "f2fs"))
        .args(drive(boot.results, "d1", "results"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    eprintln!("vm-test {}: booting with -accel {accel}", boot.label);
    let started = Instant::now();
    let mut child = command
        .spawn()
        .with_context(|| format!("starting {qemu} (cargo xtask setup installs it)"))?;
    let stdout = child.stdout.take().context("qemu stdout")?;
    let stderr = child.stderr.take().context("qemu stderr")?;
    let mut log = crate::util::create_no_follow(boot.console_log)?;
    let label = boot.label.to_string();
    let echo = thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let line = line.trim_end_matches('\r');
            let _ = writeln!(log, "{line}");
            eprintln!(
                "[vm {label} {:6.1}] {line}",
                started.elapsed().as_secs_f64()
            );
        }
    });
    let errors = thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut BufReader::new(stderr), &mut text);
        text
    });
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if started.elapsed() > boot.timeout {
            let _ = child.kill();
            let _ = child.wait();
            let _ = echo.join();
            bail!(
                "the VM did not power off within {} s{}",
                boot.timeout.as_secs(),
                hang_context(boot.console_log)
            );
        }
        thread::sleep(Duration::from_millis(100));
    };
    let _ = echo.join();
    let qemu_errors = errors.join().unwrap_or_default();
    if !status.success() {
        bail!("qemu failed ({status}): {}", qemu_errors.trim());
    }
    Ok(started.elapsed())
}

/// The kernel's first complaint, when the guest panicked before its init printed a mark: a
/// boot that never reached the project's code. Seen under TCG: an int3 oops in
/// hrtimer_start_range_ns 1.3 s into a Debian 6.12 boot (kdevtmpfs), once in many boots.
fn panicked_before_init(console: &str) -> Option<String> {
    if !console.contains("Kernel panic") || console.lines().any(|l| l.starts_with("@@ ")) {
        return None;
    }
    console
        .lines()
        .find(|l| {
            ["Oops", "BUG:", "Kernel panic"]
                .iter()
                .any(|k| l.contains(k))
        })
        .map(|l| l.trim().to_string())
}

/// What the console says about a guest that never powered off: the last phase it marked and
/// the first kernel complaint (a soft lockup, an RCU stall, a BUG, a panic), whose stack
/// follows it in the console log.
fn hang_context(console_log: &Path) -> String {
    let text = std::fs::read_to_string(console_log).unwrap_or_default();
    describe_hang(&text, console_log)
}

fn describe_hang(text: &str, console_log: &Path) -> String {
    let last_mark = text.lines().rfind(|l| l.starts_with("@@ "));
    let complaint = text.lines().find(|l| {
        [
            "soft lockup",
            "self-detected stall",
            "detected stalls",
            "BUG:",
            "Kernel panic",
        ]
        .iter()
        .any(|k| l.contains(k))
    });
    let mut context = String::new();
    if let Some(mark) = last_mark {
        context += &format!("; last mark: {}", mark.trim_start_matches("@@ "));
    }
    if let Some(line) = complaint {
        context += &format!(
            "; the guest kernel reported: {} (stack in {})",
            line.trim(),
            console_log.display()
        );
    }
    context
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_panic_before_the_guests_first_mark_is_booted_again() {
        let early = "[    1.328068] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI\n\
            [    1.331635] Kernel panic - not syncing: Fatal exception in interrupt\n";
        assert_eq!(
            panicked_before_init(early).as_deref(),
            Some("[    1.328068] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI")
        );
        let late = "@@ 3.2 boot\n[   40.0] Kernel panic - not syncing: hung_task\n";
        assert_eq!(
            panicked_before_init(late),
            None,
            "our code ran: a real failure"
        );
        assert_eq!(panicked_before_init("@@ 3.2 boot\n@@ 9.9 done\n"), None);
        assert_eq!(panicked_before_init(""), None);
    }

    #[test]
    fn a_hang_names_its_last_mark_and_first_complaint() {
        let console = "[    2.1] tsc: Unable to calibrate against PIT\n@@ 20.1 names_start\n\
            @@ 39.9 names_done\n[   68.2] watchdog: BUG: soft lockup - CPU#1 stuck for 26s! [exe:708]\n\
            [   70.0] rcu: INFO: rcu_sched detected stalls on CPUs/tasks:\n";
        let said = describe_hang(console, Path::new("run/console.log"));
        assert_eq!(
            said,
            "; last mark: 39.9 names_done; the guest kernel reported: [   68.2] watchdog: BUG: \
             soft lockup - CPU#1 stuck for 26s! [exe:708] (stack in run/console.log)"
        );
    }

    #[test]
    fn a_quiet_hang_says_only_its_last_mark() {
        assert_eq!(
            describe_hang("@@ 3.2 boot\n", Path::new("c")),
            "; last mark: 3.2 boot"
        );
        assert_eq!(describe_hang("", Path::new("c")), "");
    }
}

//! Boot the guest under QEMU: TCG unless real KVM is loaded (a PVM-only /dev/kvm cannot boot
//! stock kernels), the F2FS disk and the results disk on virtio, the console on stdout.
use std::{
    fs::File,
    io::{BufRead as _, BufReader, Write as _},
    path::Path,
    process::{Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _, Result};

pub struct Boot<'a> {
    pub label: &'a str,
    pub vmlinuz: &'a Path,
    pub initrd: &'a Path,
    pub disk: &'a Path,
    pub results: &'a Path,
    pub console_log: &'a Path,
    pub timeout: Duration,
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
    let accel = accel();
    let cpu = if accel == "kvm" { "host" } else { "max" };
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
    let mut command = Command::new("qemu-system-x86_64");
    command
        .args(["-accel", accel, "-cpu", cpu, "-smp", "2", "-m", "2048"])
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
        .args(["-append", "console=ttyS0 panic=-1 quiet rdinit=/init"])
        .args(drive(boot.disk, "d0", "f2fs"))
        .args(drive(boot.results, "d1", "results"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    eprintln!("vm-test {}: booting with -accel {accel}", boot.label);
    let started = Instant::now();
    let mut child = command
        .spawn()
        .context("starting qemu-system-x86_64 (cargo xtask setup installs it)")?;
    let stdout = child.stdout.take().context("qemu stdout")?;
    let stderr = child.stderr.take().context("qemu stderr")?;
    let mut log = File::create(boot.console_log)?;
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
            bail!(
                "the VM did not power off within {} s",
                boot.timeout.as_secs()
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

//! Prove that this kernel loads and runs our programs: attach a tracepoint on getpid, call
//! getpid, and receive the event through the ring buffer.
use crate::source::bpf::ObjectMaps as _;
use std::time::{Duration, Instant};
use tracer_common::maps;

use anyhow::{bail, Context as _, Result};
use aya::{maps::Array, programs::TracePoint};
use tracer_common::{EventKind, CONFIG_TARGET_TGID};

use super::{dropped, init_logger, load, EventReader};

/// What the self-test saw.
#[derive(Clone, Debug, serde::Serialize)]
pub(crate) struct SelfTest {
    pub attached: String,
    pub events: usize,
    pub pid: u32,
    pub comm: String,
    pub micros: u128,
    pub drops: u64,
}

const RING_BYTES: u32 = 64 * 1024;

pub(crate) async fn run() -> Result<SelfTest> {
    let started = Instant::now();
    let mut ebpf = load(RING_BYTES)?;
    let mut kernel_log = init_logger(&mut ebpf);
    let tgid = std::process::id();
    let mut config: Array<_, u32> = Array::try_from(ebpf.named_map_mut(maps::CONFIG)?)?;
    config
        .set(CONFIG_TARGET_TGID, tgid, 0)
        .context("writing CONFIG")?;
    let program: &mut TracePoint = ebpf
        .program_mut("hello_getpid")
        .context("program hello_getpid missing")?
        .try_into()?;
    program.load().context("verifier rejected hello_getpid")?;
    program
        .attach("syscalls", "sys_enter_getpid")
        .context("attaching to syscalls:sys_enter_getpid")?;
    let mut reader = EventReader::new(&mut ebpf)?;
    let mut seen = None;
    let deadline = Instant::now() + Duration::from_secs(3);
    while seen.is_none() && Instant::now() < deadline {
        // SAFETY: a raw getpid syscall has no preconditions (the libc wrapper may cache).
        unsafe { libc::syscall(libc::SYS_getpid) };
        let batch = tokio::time::timeout(
            Duration::from_millis(100),
            reader.read_batch(|event| {
                if event.kind() == Some(EventKind::Hello) && seen.is_none() {
                    seen = Some(event);
                }
            }),
        );
        if let Ok(result) = batch.await {
            result?;
        }
        reader.take_waiting(|event| {
            if event.kind() == Some(EventKind::Hello) && seen.is_none() {
                seen = Some(event);
            }
        });
    }
    if let Some(logger) = kernel_log.as_mut() {
        logger.flush(); // the program's aya-log line reaches our log here
    }
    let Some(event) = seen else {
        bail!("program attached but no event arrived through the ring buffer within 3 s");
    };
    Ok(SelfTest {
        attached: "tracepoint syscalls:sys_enter_getpid".into(),
        events: 1,
        pid: event.tgid,
        comm: String::from_utf8_lossy(event.comm_bytes()).into_owned(),
        micros: started.elapsed().as_micros(),
        drops: dropped(&ebpf)?,
    })
}

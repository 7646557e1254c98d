//! Observe in-process work (a simulator run) only through eBPF: attach the probe programs as
//! uprobes on this binary's hook functions, run the work, and count what arrives through the
//! ring buffer next to what the work itself says it emitted.
use crate::source::bpf::ObjectMaps as _;
use std::{
    collections::BTreeMap,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    thread,
    time::Duration,
};
use tracer_common::maps;

use anyhow::{Context as _, Result};
use aya::{maps::RingBuf, programs::uprobe::UProbeScope};
use tracer_common::{Event, EventKind};

use super::{
    dropped, init_logger, load,
    manifest::{Manifest, SIM_MANIFEST},
    rfc::{self, AttachReport},
};

/// 64 MiB: a million events of slack, so a burst never outruns the reader.
const RING_BYTES: u32 = 64 * 1024 * 1024;

/// Per kind: what eBPF delivered, what the probes counted in the kernel, what the work emitted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub(crate) struct KindCounts {
    pub bpf: u64,
    pub kernel: u64,
    pub sim: u64,
}

#[derive(Debug, serde::Serialize)]
pub(crate) struct Observation {
    pub via_bpf: BTreeMap<&'static str, KindCounts>,
    pub drops: u64,
    pub probes: AttachReport,
}

impl Observation {
    /// Every kind matches and nothing was lost.
    pub(crate) fn all_equal(&self) -> bool {
        self.drops == 0
            && self
                .via_bpf
                .values()
                .all(|c| c.bpf == c.sim && c.kernel == c.sim)
    }
}

/// Attach the simulator manifest's probes to this process, run `work`, and return its result
/// with the per-kind comparison. `emitted` gives the work's own per-kind counts (index =
/// `EventKind as usize`); it is read before and after.
pub(crate) fn observe<R>(
    work: impl FnOnce() -> R,
    emitted: impl Fn() -> [u64; sim::events::KIND_SLOTS],
) -> Result<(R, Observation)> {
    let mut ebpf = load(RING_BYTES)?;
    let _logger = init_logger(&mut ebpf);
    let manifest = Manifest::parse("sim.toml (built in)", SIM_MANIFEST)?;
    for (name, address) in sim::hooks::all() {
        log::debug!("simulator hook {name} at {address:#x}");
    }
    let pid = std::num::NonZeroU32::new(std::process::id()).context("pid 0")?;
    let probes = rfc::attach(&mut ebpf, &manifest, UProbeScope::OneProcess(pid))?;
    anyhow::ensure!(
        probes.failed.is_empty(),
        "some simulator probes did not attach: {}",
        probes.failed.join("; ")
    );
    let ring = RingBuf::try_from(ebpf.take_named_map(maps::EVENTS)?)?;
    let reader = RingReader::start(ring);
    let before = emitted();
    let result = work();
    let after = emitted();
    let bpf_counts = reader.finish()?;
    let kernel_counts = rfc::kernel_counts(&ebpf)?;
    let drops = dropped(&ebpf)?;
    let sim_counts: BTreeMap<&'static str, u64> = EventKind::ALL
        .iter()
        .map(|kind| (kind.name(), after[*kind as usize] - before[*kind as usize]))
        .collect();
    let via_bpf = compare(&manifest, &sim_counts, &bpf_counts, &kernel_counts);
    Ok((
        result,
        Observation {
            via_bpf,
            drops,
            probes,
        },
    ))
}

fn compare(
    manifest: &Manifest,
    sim: &BTreeMap<&'static str, u64>,
    bpf: &BTreeMap<&'static str, u64>,
    kernel: &[(EventKind, u64)],
) -> BTreeMap<&'static str, KindCounts> {
    manifest
        .probes
        .iter()
        .map(|probe| {
            let name = probe.kind.name();
            let kernel = kernel
                .iter()
                .find(|(kind, _)| *kind == probe.kind)
                .map_or(0, |(_, n)| *n);
            let counts = KindCounts {
                bpf: bpf.get(name).copied().unwrap_or(0),
                kernel,
                sim: sim.get(name).copied().unwrap_or(0),
            };
            (name, counts)
        })
        .collect()
}

/// Drains the ring buffer on its own thread while the work runs on ours.
struct RingReader {
    stop: Arc<AtomicBool>,
    handle: thread::JoinHandle<Result<BTreeMap<&'static str, u64>>>,
}

impl RingReader {
    fn start(mut ring: RingBuf<aya::maps::MapData>) -> RingReader {
        let stop = Arc::new(AtomicBool::new(false));
        let stop_seen = Arc::clone(&stop);
        let handle = thread::spawn(move || {
            let mut counts = BTreeMap::new();
            loop {
                // Read the flag before draining so that the last drain follows the last event.
                let stopping = stop_seen.load(Ordering::Acquire);
                let drained = drain(&mut ring, &mut counts);
                if stopping {
                    return Ok(counts);
                }
                if drained == 0 {
                    thread::sleep(Duration::from_micros(200));
                }
            }
        });
        RingReader { stop, handle }
    }

    fn finish(self) -> Result<BTreeMap<&'static str, u64>> {
        self.stop.store(true, Ordering::Release);
        self.handle
            .join()
            .map_err(|_| anyhow::anyhow!("the ring buffer reader panicked"))?
    }
}

fn drain(
    ring: &mut RingBuf<aya::maps::MapData>,
    counts: &mut BTreeMap<&'static str, u64>,
) -> usize {
    let mut drained = 0;
    while let Some(item) = ring.next() {
        if let Some(kind) = Event::from_bytes(&item).and_then(|event| event.kind()) {
            *counts.entry(kind.name()).or_default() += 1;
        }
        drained += 1;
    }
    drained
}

#[cfg(test)]
mod tests {
    use std::ffi::c_void;

    use sim::hooks;
    use tracer_common::QUEUE_512;

    use super::*;
    use crate::system::is_root;

    /// The uprobes watch the whole test process, so tests that call the hooks and count them
    /// exactly must not run at the same time.
    static HOOK_CALLERS: std::sync::Mutex<()> = std::sync::Mutex::new(());

    extern "C" fn restore_ok(_ctx: *mut c_void) -> i32 {
        0
    }

    extern "C" fn restore_crc_failure(_ctx: *mut c_void) -> i32 {
        -(tracer_common::RESTORE_FAIL_CRC as i32)
    }

    /// Call each hook a known number of times; every call must arrive through the uprobes,
    /// and only successful restores count as restores (the manifest's `when = "ret == 0"`).
    #[test]
    fn every_hook_call_arrives_through_uprobes() {
        let _alone = HOOK_CALLERS.lock().unwrap_or_else(|p| p.into_inner());
        if !is_root() {
            test_skip::skip("needs root for uprobes");
            return;
        }
        let counted = std::cell::RefCell::new([0u64; sim::events::KIND_SLOTS]);
        let count = |kind: EventKind| counted.borrow_mut()[kind as usize] += 1;
        let work = || {
            for nid in 0..1000 {
                hooks::nodescope_sim_convert(7, nid, 300, 512);
                count(EventKind::Convert);
            }
            for nid in 0..300 {
                let work = if nid % 3 == 0 {
                    restore_crc_failure
                } else {
                    restore_ok
                };
                let ret =
                    hooks::nodescope_sim_restore(7, nid, 300, 512, work, std::ptr::null_mut());
                if ret == 0 {
                    count(EventKind::Restore);
                } else {
                    hooks::nodescope_sim_restore_fail(7, nid, (-ret) as u32, QUEUE_512 as u32);
                    count(EventKind::RestoreFail);
                }
            }
            for nid in 0..50 {
                hooks::nodescope_sim_reclaim(7, nid, QUEUE_512 as u32);
                count(EventKind::Reclaim);
            }
            for nid in 0..400 {
                hooks::nodescope_sim_insert(7, nid);
                count(EventKind::Insert);
            }
            for nid in 0..30 {
                hooks::nodescope_sim_forget(7, nid, QUEUE_512 as u32);
                count(EventKind::Forget);
            }
        };
        let ((), observation) = observe(work, || *counted.borrow()).unwrap();
        assert_eq!(observation.drops, 0);
        let counts = |name: &str| observation.via_bpf[name];
        let expect = |bpf| KindCounts {
            bpf,
            kernel: bpf,
            sim: bpf,
        };
        assert_eq!(counts("convert"), expect(1000));
        assert_eq!(counts("restore"), expect(200));
        assert_eq!(counts("restore_fail"), expect(100));
        assert_eq!(counts("reclaim"), expect(50));
        assert_eq!(counts("second_chance"), expect(0));
        assert_eq!(counts("insert"), expect(400));
        assert_eq!(counts("forget"), expect(30));
        assert!(observation.all_equal());
        assert_eq!(
            observation.probes.attached.len(),
            11,
            "{:?}",
            observation.probes
        );
    }

    /// A ring buffer too small for a burst: every event is either delivered or counted as a
    /// drop, exactly, and the drops are visible.
    #[test]
    fn ring_buffer_overflow_is_counted_exactly() {
        let _alone = HOOK_CALLERS.lock().unwrap_or_else(|p| p.into_inner());
        if !is_root() {
            test_skip::skip("needs root for uprobes");
            return;
        }
        let mut ebpf = crate::source::bpf::load(4096).unwrap();
        let manifest = Manifest::parse("sim.toml", SIM_MANIFEST).unwrap();
        sim::hooks::all();
        let pid = std::num::NonZeroU32::new(std::process::id()).unwrap();
        rfc::attach(&mut ebpf, &manifest, UProbeScope::OneProcess(pid)).unwrap();
        let mut ring = RingBuf::try_from(ebpf.take_map(maps::EVENTS).unwrap()).unwrap();
        for nid in 0..1000 {
            hooks::nodescope_sim_convert(7, nid, 300, 512); // nothing drains meanwhile
        }
        let mut counts = BTreeMap::new();
        let delivered = drain(&mut ring, &mut counts) as u64;
        let drops = dropped(&ebpf).unwrap();
        assert!(
            drops > 0 && delivered > 0,
            "delivered {delivered}, drops {drops}"
        );
        assert_eq!(delivered + drops, 1000);
        assert_eq!(counts["convert"], delivered);
    }
}

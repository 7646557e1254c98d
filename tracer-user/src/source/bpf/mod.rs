//! Loading nodescope's eBPF object and reading what it sends.
pub(crate) mod arch;
pub(crate) mod cache_counters;
pub(crate) mod coverage;
pub(crate) mod discover;
pub(crate) mod f2fs;
pub(crate) mod footprints;
pub(crate) mod format;
pub(crate) mod live;
pub(crate) mod manifest;
pub(crate) mod observe;
pub(crate) mod rfc;
pub(crate) mod selftest;
pub(crate) mod trampoline;
pub(crate) mod unpreempted;

pub use self::{
    discover::btf::{BtfFiles, KernelBtf},
    f2fs::access::{struct_offsets, StructOffsets},
    live::RING_BYTES,
    manifest::Manifest,
};

use std::os::fd::AsRawFd as _;
use tracer_common::maps;

use anyhow::{Context as _, Result};
use aya::{maps::RingBuf, Ebpf, EbpfLoader};
use tokio::io::unix::AsyncFd;
use tracer_common::{AccessBatch, Event, EventKind};

/// The object tracer-user's build.rs built from tracer-ebpf.
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/tracer"));

/// The embedded object's bytes, for loaders beside aya's (trampoline.rs).
pub fn object() -> &'static [u8] {
    OBJECT
}

/// Older kernels account BPF memory against RLIMIT_MEMLOCK; newer ones use memcg and ignore it.
fn raise_memlock_rlimit() {
    let unlimited = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: setrlimit reads a valid, initialised struct; failure is reported, not fatal.
    let rc = unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &unlimited) };
    if rc != 0 {
        log::debug!(
            "could not raise RLIMIT_MEMLOCK: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// Load the object with a ring buffer of `ring_bytes` (a power of two multiple of the page size).
pub fn load(ring_bytes: u32) -> Result<Ebpf> {
    load_object(OBJECT, ring_bytes)
}

/// Load `object`, a build of tracer-ebpf (the product's, or the bench's with its `bench`
/// feature), the way [`load`] loads the product's.
pub fn load_object(object: &[u8], ring_bytes: u32) -> Result<Ebpf> {
    raise_memlock_rlimit();
    EbpfLoader::new()
        .map_max_entries("EVENTS", ring_bytes)
        .load(object)
        .context("loading the eBPF object into the kernel")
}

/// Load a program unless it already is: one program serves several attachments (entry and
/// return probes, or several functions), and the kernel verifies it once.
pub(crate) fn load_once(
    loaded: bool,
    load: impl FnOnce() -> Result<(), aya::programs::ProgramError>,
) -> Result<()> {
    if loaded {
        return Ok(());
    }
    load().context("the verifier rejected the program")
}

pub(crate) type KernelLogger = aya_log::EbpfLogger<&'static dyn log::Log>;

/// The reader of kernel-side aya-log messages; `flush()` forwards them to our `log` logger.
/// Programs without log statements have no log map; that is not an error.
pub(crate) fn init_logger(ebpf: &mut Ebpf) -> Option<KernelLogger> {
    aya_log::EbpfLogger::init(ebpf)
        .map_err(|err| log::debug!("no eBPF logger: {err}"))
        .ok()
}

/// The object's maps by their shared names ([`tracer_common::maps`]), each missing one an
/// error that names it.
pub trait ObjectMaps {
    fn named_map(&self, name: &str) -> Result<&aya::maps::Map>;
    fn named_map_mut(&mut self, name: &str) -> Result<&mut aya::maps::Map>;
    fn take_named_map(&mut self, name: &str) -> Result<aya::maps::Map>;
}

impl ObjectMaps for Ebpf {
    fn named_map(&self, name: &str) -> Result<&aya::maps::Map> {
        self.map(name).with_context(|| missing_map(name))
    }

    fn named_map_mut(&mut self, name: &str) -> Result<&mut aya::maps::Map> {
        self.map_mut(name).with_context(|| missing_map(name))
    }

    fn take_named_map(&mut self, name: &str) -> Result<aya::maps::Map> {
        self.take_map(name).with_context(|| missing_map(name))
    }
}

fn missing_map(name: &str) -> String {
    format!("the eBPF object has no map {name} (or it was taken already)")
}

/// Reads events from the EVENTS ring buffer as they arrive.
pub struct EventReader {
    ring: AsyncFd<RingBuf<aya::maps::MapData>>,
    names: ProcessNames,
}

/// The uid and comm of each process whose lookups come in batches (issue 51): a batch's
/// records carry neither, and the lookup program sends a process's first lookup on each CPU as
/// a single event with both, ahead of the batches; the batched lookups of that process get
/// them here, so a lookup counts for its process's app as every other event does.
#[derive(Default)]
pub(crate) struct ProcessNames {
    by_tgid: std::collections::HashMap<u32, (u32, [u8; tracer_common::COMM_LEN])>,
}

impl ProcessNames {
    /// Processes kept at most; past it the table starts again (a lookup of a process it no
    /// longer knows then goes unnamed until its CPU names it anew).
    const MAX: usize = 1 << 16;

    fn learn(&mut self, event: &Event) {
        if event.kind == EventKind::NodeAccess as u8 && event.comm[0] != 0 {
            if self.by_tgid.len() >= Self::MAX {
                self.by_tgid.clear();
            }
            self.by_tgid.insert(event.tgid, (event.uid, event.comm));
        }
    }

    fn name(&self, event: &mut Event) {
        if let Some((uid, comm)) = self.by_tgid.get(&event.tgid) {
            event.uid = *uid;
            event.comm = *comm;
        }
    }
}

impl EventReader {
    pub fn new(ebpf: &mut Ebpf) -> Result<EventReader> {
        let map = ebpf.take_named_map(maps::EVENTS)?;
        let ring = RingBuf::try_from(map).context("EVENTS is not a ring buffer")?;
        log::debug!("ring buffer fd {}", ring.as_raw_fd());
        // SAFETY: RingBuf owns the map fd, keeps it open until dropped and always returns the
        // same fd from as_raw_fd.
        let ring = unsafe { AsyncFd::register_with_interest(ring, tokio::io::Interest::READABLE) }
            .map_err(|err| err.into_parts().1)
            .context("registering the ring buffer with tokio")?;
        Ok(EventReader {
            ring,
            names: ProcessNames::default(),
        })
    }

    /// The ring buffer's map fd (what another loader relocates the programs' EVENTS to).
    pub(crate) fn ring_fd(&self) -> std::os::fd::RawFd {
        self.ring.get_ref().as_raw_fd()
    }

    /// Wait until the kernel wakes the reader, then hand each waiting event to `sink`.
    /// Returns how many. The F2FS programs wake the reader only once a batch waits
    /// (tracer-ebpf `emit_batched`): what a quiet ring holds meanwhile is taken by
    /// [`EventReader::take_waiting`], which the run loop calls at every refresh (so the reader
    /// itself never wakes on a timer). Cancel-safe: events are taken only after the last await.
    pub async fn read_batch(&mut self, sink: impl FnMut(Event)) -> Result<usize> {
        let mut guard = self
            .ring
            .readable_mut()
            .await
            .context("polling ring buffer")?;
        let count = take_all(guard.get_inner_mut(), &mut self.names, sink);
        guard.clear_ready();
        Ok(count)
    }

    /// Hand every event the ring holds now to `sink`, without waiting. Returns how many.
    pub(crate) fn take_waiting(&mut self, sink: impl FnMut(Event)) -> usize {
        take_all(self.ring.get_mut(), &mut self.names, sink)
    }
}

/// Every record the ring holds, as events: a batch of node lookups (`AccessBatch`, from the
/// `--accesses` programs) becomes its lookups' events, each named after its process.
fn take_all(
    ring: &mut RingBuf<aya::maps::MapData>,
    names: &mut ProcessNames,
    mut sink: impl FnMut(Event),
) -> usize {
    let mut count = 0;
    while let Some(item) = ring.next() {
        if let Some(batch) = AccessBatch::from_bytes(&item) {
            for mut event in batch.events() {
                names.name(&mut event);
                sink(event);
                count += 1;
            }
        } else if let Some(event) = Event::from_bytes(&item) {
            names.learn(&event);
            sink(event);
            count += 1;
        }
    }
    count
}

/// Events the kernel side could not put in the ring buffer.
pub fn dropped(ebpf: &Ebpf) -> Result<u64> {
    let map = ebpf.named_map(maps::DROPS)?;
    let drops: aya::maps::PerCpuArray<_, u64> =
        aya::maps::PerCpuArray::try_from(map).context("DROPS type")?;
    let per_cpu = drops.get(&0, 0).context("reading DROPS")?;
    Ok(per_cpu.iter().sum())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::OBJECT;

    /// Issue 51: a process's named lookup names its batched ones (uid and comm); other kinds
    /// and unnamed events teach nothing; an unknown process stays unnamed.
    #[test]
    fn batched_lookups_take_their_process_name() {
        use tracer_common::{Event, EventKind};
        let mut names = super::ProcessNames::default();
        let named = Event::new(EventKind::NodeAccess, 1)
            .task(40)
            .uid(10123)
            .comm("com.example");
        names.learn(&named);
        names.learn(&Event::new(EventKind::NodeRead, 2).task(41).comm("other"));
        let mut batched = Event::new(EventKind::NodeAccess, 3).task(40);
        batched.pid = 42;
        names.name(&mut batched);
        assert_eq!(
            (batched.uid, batched.comm_bytes()),
            (10123, &b"com.example"[..])
        );
        assert_eq!(batched.pid, 42, "the thread stays the record's");
        let mut unknown = Event::new(EventKind::NodeAccess, 4).task(41);
        names.name(&mut unknown);
        assert_eq!((unknown.uid, unknown.comm_bytes()), (0, &b""[..]));
    }

    /// The eBPF side names its maps in `#[map(name = "...")]` literals: the built object holds
    /// exactly the maps `tracer_common::maps::ALL` names, no more, no fewer (checked without a
    /// kernel, from the object file).
    #[test]
    fn the_objects_maps_are_the_shared_names() {
        let object = aya_obj::Object::parse(OBJECT).expect("parsing the eBPF object");
        let in_object: BTreeSet<&str> = object
            .maps
            .keys()
            .map(String::as_str)
            // Global data (.rodata, .bss, .data) and aya-log's map are not ours to name.
            .filter(|name| !name.starts_with('.') && *name != "AYA_LOGS")
            .collect();
        let shared: BTreeSet<&str> = tracer_common::maps::ALL.into_iter().collect();
        assert_eq!(in_object, shared);
    }
}

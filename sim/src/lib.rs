//! The compressed node cache simulator: a faithful userspace model of the F2FS RFC "retain
//! clean node blocks in a compressed cache" (its cover letter and patch).
//!
//! - [`f2fs`]: the project's own reader of the on-disk format; [`fileset`] builds real images
//!   with mkfs.f2fs + sload.f2fs; [`nodes`] loads their node blocks; [`disk`] serves them and
//!   counts reads (FS_NODE_READ_IO).
//! - [`cache`]: raw LRU, 256/512/1024 compressed queues, admission, the bounded worker, the
//!   weighted shrinker, validated restore. [`accounting`] defines attributed memory (and
//!   documents the 88-byte entry and 19,960 fixed bytes chosen).
//! - [`knobs`]: `node_compress_threshold` / `node_compress_interval` from a sysfs-like dir.
//! - [`events`]: every event goes through a uprobe hook ([`hooks`]) and becomes a
//!   `tracer_common::Event`.
//! - [`engine`]: the virtual-time discrete-event engine; [`scenario`]: `vm-replay` and
//!   `android-launch`; [`live`]: the same engine paced against the wall clock.
//!
//! # Using it
//!
//! - Live view: `live::LiveSim::new(ScenarioName::VmReplay, knob_root, seed)?`, then
//!   `poll(Instant::now(), &mut events)` as often as wanted; `snapshot()` gives the gauges
//!   (pressure, memory, queue and slot counts, knob values, counters). It loops forever; the
//!   knob files are `<knob_root>/vdb/node_compress_{threshold,interval}`.
//! - Controller benchmark: `scenario::run_static(ScenarioName, Knobs { threshold,
//!   interval_ms }, seed)?` returns `RunTotals`: per-phase and whole-run `Totals` (lookups, raw
//!   hits, retrievals, node reads, restores, conversions, rejects, aborts, reclaims, second
//!   chances, worker passes), the final `Snapshot`, and attributed memory over time (one sample
//!   a virtual second, with its mean and peak). The image is built once per machine and loaded
//!   once per process: a vm-replay run then takes about 0.1 s (release).
//! - The RFC comparison: `scenario::vm_replay::compare` and `scenario::android::compare`.
//!
//! # Modelling choices the cover letter leaves open
//!
//! - Reclaim weights are the memory an entry holds in 256-byte units (raw 16, slots 1/2/4); the
//!   effective count is the weighted population in raw units ([`cache::shrinker`]).
//! - Reclaim batches: 32 entries a call to hold a budget (SWAP_CLUSTER_MAX), 128 under
//!   priority-driven pressure (SHRINK_BATCH), `2 x count >> priority` a tick (do_shrink_slab
//!   with DEFAULT_SEEKS).
//! - The default threshold is 25 % (1024 bytes: everything a slot can hold; [`knobs`]).
//! - A rejected conversion moves the entry to the raw tail, so the next pass reaches the
//!   entries behind it; it is tried again in a later pass (nothing is remembered).
//! - An access sets REFERENCED and does not move the entry (the dev-test metadata cache's
//!   CLOCK-like rule); a disk read inserts unreferenced at the raw tail; a restore puts the
//!   entry at the raw tail, referenced (the lookup that restored it is an access).
//! - Only clean entries are converted or reclaimed; dirty ones are skipped until written back.
//! - Virtual time costs are in [`costs`] (an NVMe read 90 us, a restore about 1-3 us).
//! - The calibration of `vm-replay` against the RFC's figures is explained in
//!   [`scenario::vm_replay`]: nothing is fitted, the figures follow from the file set, the
//!   budget, the mechanisms and the real LZ4 sizes.
pub mod accounting;
pub mod cache;
pub mod compressors;
pub mod costs;
pub mod disk;
pub mod engine;
pub mod events;
pub mod f2fs;
pub mod fileset;
pub mod hooks;
pub mod knobs;
pub mod live;
pub mod nodes;
pub mod rng;
pub mod scenario;
#[cfg(test)]
mod testutil;
pub mod whatif;

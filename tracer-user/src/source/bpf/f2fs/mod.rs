//! F2FS node reads, node writes and checkpoints through the programs of tracer-ebpf/src/f2fs.rs:
//! which variant this kernel offers (the planner), attaching the chosen programs, and reading
//! their in-kernel counters; `access`: the node lookups and evictions of `--accesses`;
//! `areas`: the superblock's metadata areas, to sort META writes by.
pub(crate) mod access;
pub(crate) mod areas;
pub(crate) mod attach;
pub(crate) mod counters;
pub(crate) mod planner;
pub(crate) mod slots;

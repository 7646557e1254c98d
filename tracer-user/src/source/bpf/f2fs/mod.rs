//! F2FS node reads, node writes and checkpoints through the programs of tracer-ebpf/src/f2fs.rs:
//! which variant this kernel offers (the planner), attaching the chosen programs, and reading
//! their in-kernel counters.
pub mod areas;
pub mod attach;
pub mod counters;
pub mod planner;

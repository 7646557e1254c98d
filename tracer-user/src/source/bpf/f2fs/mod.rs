//! F2FS node reads, node writes and checkpoints through the programs of tracer-ebpf/src/f2fs.rs:
//! which variant this kernel offers (the planner), attaching the chosen programs, and reading
//! their in-kernel counters.
pub mod attach;
pub mod counters;
pub mod planner;

/// The planner's items at their old paths (`f2fs::plan`, `f2fs::Plan`, ...), kept while
/// cmd/stream.rs and source/open.rs still name them there; once they name `f2fs::planner::...`
/// this re-export goes.
pub use planner::{plan, plan_this_kernel, KernelView, NodeReadVariant, Plan};

//! nodescope: see, and tune, F2FS compressed node caching.
//!
//! Data flows one way: a source (bpf | sim | replay) produces `tracer_common::Event`s, the
//! model aggregates them, views show the model, the controller reads the model and writes
//! knobs (docs/ARCHITECTURE.md). The binary (src/main.rs) only calls [`main`]. What is public
//! here is what the benchmarks, the fuzz targets and the integration tests use; the rest is
//! crate-private (`unreachable_pub` keeps it so).
#![warn(unreachable_pub)]

/// A line to stderr, as `eprintln!` but never held long by a reader that stopped reading
/// (`output::stderr_text`, issue 52): every diagnostic of the product goes through it.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::output::stderr_text(&format!("{}\n", format_args!($($arg)*)))
    };
}

pub(crate) mod client;
pub(crate) mod cmd;
pub(crate) mod control;
pub(crate) mod fsstress;
pub mod model;
pub mod output;
pub mod pipeline;
pub(crate) mod probe;
pub mod record;
pub(crate) mod runner;
pub mod schema;
pub mod source;
pub mod system;
pub mod view;

pub use cmd::main;

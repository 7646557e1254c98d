//! nodescope: see, and tune, F2FS compressed node caching.
//!
//! Data flows one way: a source (bpf | sim | replay) produces `tracer_common::Event`s, the
//! model aggregates them, views show the model, the controller reads the model and writes
//! knobs (docs/ARCHITECTURE.md). The binary (src/main.rs) only parses the command line; the
//! benchmarks and the fuzz targets use these modules too.
pub mod client;
pub mod cmd;
pub mod control;
pub mod fsstress;
pub mod model;
pub mod output;
pub mod pipeline;
pub mod protocol;
pub mod record;
pub mod runner;
pub mod source;
pub mod system;
pub mod view;

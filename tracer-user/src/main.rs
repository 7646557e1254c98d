//! nodescope: see, and tune, F2FS compressed node caching.
//!
//! Data flows one way: a source (bpf | sim | replay) produces `tracer_common::Event`s, the
//! model aggregates them, views show the model, the controller reads the model and writes
//! knobs. See docs/ARCHITECTURE.md.
fn main() {
    nodescope::main();
}

//! The parts of nodescope that other crates use too: the recording format (the fuzz target
//! reads recordings through it). The binary is src/main.rs.
pub mod record;

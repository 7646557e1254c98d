//! The compressed node cache simulator (issue #4).

pub mod hooks;

//! The compressed node cache simulator (issue #4).

#![no_std]
// This library target is empty: it exists so that tracer-user can name this crate as a
// build-dependency and be rebuilt when the programs change (see aya's template).

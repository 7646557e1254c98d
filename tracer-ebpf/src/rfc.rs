//! Programs on the RFC's own functions, configured by a probe manifest: issue #5.

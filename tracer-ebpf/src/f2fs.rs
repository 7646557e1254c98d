//! Programs on mainline F2FS tracepoints (node reads, node writes, checkpoints): issue #3.

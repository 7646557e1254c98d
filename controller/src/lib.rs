//! The feedback controller for node_compress_threshold and node_compress_interval (issue #7).

//! The model's hash maps are keyed by what the kernel reports (tgids, node ids, uids) and by
//! app names from packages.list: nobody picks those keys to collide, so a fast hash with a
//! fixed seed is enough. SipHash, the standard map's, was the largest single cost of a daemon
//! at 100,000 events/s (`cargo xtask bench daemon`, perf: 17 % of its samples). foldhash is
//! the hash hashbrown (and so std's map) already compiles in.
use std::collections::HashMap;

/// A `HashMap` hashed by foldhash's fast hash, with a fixed seed (so runs are repeatable).
pub(super) type FastMap<K, V> = HashMap<K, V, foldhash::fast::FixedState>;

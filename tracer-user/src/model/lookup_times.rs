//! Each timed lookup's time in a recording (issue 51), for `report --compare`'s latency rows:
//! the cover letter judges the mechanism by a median and a paired median of replay times, so
//! the comparison needs the lookups one by one, not the histograms' buckets.
use std::collections::BTreeMap;

/// Lookups kept one by one: 4 Mi (32 MiB); past it the medians cover the first ones.
pub(crate) const MAX_LOOKUP_SAMPLES: usize = 1 << 22;
/// Nodes kept for the per-node sums, as `report --nids` bounds its pairs.
pub(crate) const MAX_NODES: usize = 1 << 20;

/// A recording's timed lookups: every lookup's time, and per node (nid) the time its lookups
/// took (a small file's inode is looked up once per read of the file: per node is per file).
#[derive(Clone, Debug, Default)]
pub(crate) struct LookupTimes {
    pub latencies_ns: Vec<u64>,
    pub per_node_ns: BTreeMap<(u32, u32), u64>,
    /// Lookups past either bound, counted only.
    pub left_out: u64,
}

impl LookupTimes {
    pub(crate) fn add(&mut self, dev: u32, nid: u32, latency_ns: u64) {
        let mut kept = false;
        if self.latencies_ns.len() < MAX_LOOKUP_SAMPLES {
            self.latencies_ns.push(latency_ns);
            kept = true;
        }
        if let Some(sum) = self.per_node_ns.get_mut(&(dev, nid)) {
            *sum = sum.saturating_add(latency_ns);
        } else if self.per_node_ns.len() < MAX_NODES {
            self.per_node_ns.insert((dev, nid), latency_ns);
        } else {
            kept = false;
        }
        if !kept {
            self.left_out += 1;
        }
    }

    /// The median lookup time (the lower middle of an even count); None without lookups.
    pub(crate) fn median_ns(&self) -> Option<u64> {
        let mut sorted = self.latencies_ns.clone();
        median(&mut sorted)
    }
}

/// The median of `values` (the lower middle of an even count), sorting them; None when empty.
pub(crate) fn median(values: &mut [u64]) -> Option<u64> {
    values.sort_unstable();
    values.get(values.len().saturating_sub(1) / 2).copied()
}

/// The median of the changes in percent, (on - off) / off, over the keys both maps have with a
/// non-zero `off`: the cover letter's "paired median" (its pairs are replays; here nodes or
/// apps of the same workload). Returns the median and how many pairs it is over.
pub(crate) fn paired_median_change<K: Ord>(
    off: &BTreeMap<K, u64>,
    on: &BTreeMap<K, u64>,
) -> (Option<f64>, u64) {
    let mut changes: Vec<f64> = off
        .iter()
        .filter(|(_, &a)| a > 0)
        .filter_map(|(key, &a)| {
            on.get(key)
                .map(|&b| (b as f64 - a as f64) / a as f64 * 100.0)
        })
        .collect();
    changes.sort_by(f64::total_cmp);
    let pairs = changes.len() as u64;
    let median = match changes.len() {
        0 => None,
        n if n % 2 == 1 => Some(changes[n / 2]),
        n => Some((changes[n / 2 - 1] + changes[n / 2]) / 2.0),
    };
    (median, pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_paired_medians() {
        let mut times = LookupTimes::default();
        for (nid, ns) in [(1, 100), (2, 300), (1, 200), (3, 50)] {
            times.add(7, nid, ns);
        }
        // 50 100 200 300: the lower middle.
        assert_eq!(times.median_ns(), Some(100));
        assert_eq!(times.per_node_ns[&(7, 1)], 300);
        assert_eq!(LookupTimes::default().median_ns(), None);
        let off: BTreeMap<u32, u64> = [(1, 100), (2, 200), (3, 400), (4, 0)].into();
        // 1: -50 %, 2: +0 %, 3: -25 %; 4 has no off time; 5 is not in off.
        let on: BTreeMap<u32, u64> = [(1, 50), (2, 200), (3, 300), (4, 10), (5, 1)].into();
        assert_eq!(paired_median_change(&off, &on), (Some(-25.0), 3));
        let on_two: BTreeMap<u32, u64> = [(1, 50), (3, 300)].into();
        assert_eq!(paired_median_change(&off, &on_two), (Some(-37.5), 2));
        assert_eq!(paired_median_change(&off, &BTreeMap::new()), (None, 0));
    }
}

//! The what-if's grid: its axes, the product of them as cells (indices into the axes), each
//! cell's settings, and the run of every cell over all cores. `nodescope whatif` parses the
//! axes, runs the grid and renders its tables.
use std::sync::{
    atomic::{AtomicUsize, Ordering},
    Arc, Mutex,
};

use anyhow::Result;
use tracer_common::knobs::Knobs;

use super::{replay, Outcome, Reclaim, Settings, Trace};
use crate::{
    cache::{CacheConfig, Payload, PayloadSizes, SlotSet, Weights},
    compressors::Compressor,
    nodes::NodeSet,
};

/// A weights axis value: the memory rule, or fixed numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightChoice {
    Memory,
    Fixed(Weights),
}

impl WeightChoice {
    /// The weights for `slots`, when this choice fits it.
    pub fn for_slots(&self, slots: &SlotSet) -> Option<Weights> {
        match self {
            WeightChoice::Memory => Some(memory_weights(slots)),
            WeightChoice::Fixed(w) => (w.len() == 1 + slots.sizes().len()).then_some(*w),
        }
    }
}

/// Each queue's entry bytes divided by the greatest common divisor of them all (4096 and the
/// slot sizes): the RFC's 16:1:2:4 for 256/512/1024.
pub fn memory_weights(slots: &SlotSet) -> Weights {
    let bytes: Vec<u64> = std::iter::once(4096)
        .chain(slots.sizes().iter().map(|b| u64::from(*b)))
        .collect();
    let unit = bytes.iter().copied().fold(0, gcd);
    let weights: Vec<u64> = bytes.iter().map(|b| b / unit).collect();
    Weights::new(&weights).expect("4096 / 64 fits a weight")
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The grid's axes, each in the order given (its first value is the others' setting).
pub struct Axes {
    pub budgets: Vec<u64>,
    /// How episodes reclaim (`Reclaim::AsRecorded`: the budgets are not used).
    pub reclaim: Reclaim,
    pub thresholds: Vec<u32>,
    pub intervals: Vec<u32>,
    pub slot_sets: Vec<SlotSet>,
    pub weights: Vec<WeightChoice>,
    pub compressors: Vec<Compressor>,
}

/// One grid point: indices into the axes (`knobs` None: compression off).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cell {
    pub budget: usize,
    pub knobs: Option<(usize, usize)>,
    pub slots: usize,
    pub weights: usize,
    pub compressor: usize,
}

/// Every node's compressed size under each compressor, once per image (in parallel).
pub fn payload_sizes(nodes: &NodeSet, compressors: &[Compressor]) -> Vec<Arc<PayloadSizes>> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = compressors
            .iter()
            .map(|c| {
                scope.spawn(move || match c {
                    Compressor::Lz4 => PayloadSizes::lz4(nodes),
                    other => PayloadSizes::measure(nodes, |block| other.compressed_len(block)),
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| Arc::new(h.join().expect("a sizes thread panicked")))
            .collect()
    })
}

/// The full product of the axes: per budget, compression off once (the RFC's slots and
/// weights, lz4: nothing is compressed), then every on setting.
pub fn cells(axes: &Axes) -> Vec<Cell> {
    let mut cells = Vec::new();
    for budget in 0..axes.budgets.len() {
        cells.push(Cell {
            budget,
            knobs: None,
            slots: 0,
            weights: first_weights(axes, 0),
            compressor: 0,
        });
        for slots in 0..axes.slot_sets.len() {
            for (weights, choice) in axes.weights.iter().enumerate() {
                if choice.for_slots(&axes.slot_sets[slots]).is_none() {
                    continue;
                }
                for compressor in 0..axes.compressors.len() {
                    for threshold in 0..axes.thresholds.len() {
                        for interval in 0..axes.intervals.len() {
                            cells.push(Cell {
                                budget,
                                knobs: Some((threshold, interval)),
                                slots,
                                weights,
                                compressor,
                            });
                        }
                    }
                }
            }
        }
    }
    cells
}

/// The first weights choice that fits slot set `slots` (the tables' setting for it).
pub fn first_weights(axes: &Axes, slots: usize) -> usize {
    axes.weights
        .iter()
        .position(|c| c.for_slots(&axes.slot_sets[slots]).is_some())
        .unwrap_or(0)
}

pub fn settings(axes: &Axes, cell: &Cell) -> Settings {
    let knobs = match cell.knobs {
        Some((t, i)) => Knobs {
            threshold: axes.thresholds[t],
            interval_ms: axes.intervals[i],
        },
        None => Knobs {
            threshold: 0,
            interval_ms: tracer_common::knobs::DEFAULT_INTERVAL_MS,
        },
    };
    let (slots, weights) = match cell.knobs {
        Some(_) => {
            let slots = axes.slot_sets[cell.slots];
            let weights = axes.weights[cell.weights]
                .for_slots(&slots)
                .expect("cells pair weights with the slot sets they fit");
            (slots, weights)
        }
        None => (SlotSet::RFC, Weights::RFC),
    };
    Settings {
        knobs,
        budget_bytes: axes.budgets[cell.budget],
        reclaim: axes.reclaim,
        cache: CacheConfig::new(slots, weights).expect("weights checked against their slots"),
    }
}

/// Every grid point, spread over all cores (each thread takes the next point not yet taken);
/// `point_done` is called as each ends (a progress bar's step).
pub fn run_grid(
    trace: &Trace,
    nodes: &Arc<NodeSet>,
    sizes: &[Arc<PayloadSizes>],
    axes: &Axes,
    cells: &[Cell],
    point_done: &(dyn Fn() + Sync),
) -> Result<Vec<Outcome>> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<Outcome>>>> =
        Mutex::new((0..cells.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..cores.min(cells.len()) {
            scope.spawn(|| loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                let Some(cell) = cells.get(index) else { break };
                let payload = Payload::Sizes(sizes[cell.compressor].clone());
                let outcome = replay(trace, nodes.clone(), settings(axes, cell), payload);
                results.lock().expect("no thread panics holding it")[index] = Some(outcome);
                point_done();
            });
        }
    });
    results
        .into_inner()
        .expect("no thread panicked holding it")
        .into_iter()
        .map(|r| r.expect("every point ran"))
        .collect()
}

//! The per-app table: columns, sorting and filtering.
use tracer_common::text::escape_name;

use crate::model::{AppKey, AppRow, Counters};

/// A column of the per-app table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Column {
    App,
    Processes,
    Reads,
    Readahead,
    Restores,
    HitRatio,
    Conversions,
    Reclaims,
    SecondChances,
    ReadsPerWindow,
    /// What the app's timed node lookups took, summed, in ms (issue 51; `--lookup-latency`).
    Wait,
}

pub(super) const COLUMNS: [Column; 11] = [
    Column::App,
    Column::Processes,
    Column::Reads,
    Column::Readahead,
    Column::Restores,
    Column::HitRatio,
    Column::Conversions,
    Column::Reclaims,
    Column::SecondChances,
    Column::ReadsPerWindow,
    Column::Wait,
];

impl Column {
    pub fn title(self) -> &'static str {
        match self {
            Column::App => "APP",
            Column::Processes => "PROCS",
            Column::Reads => "READS",
            Column::Readahead => "RA",
            Column::Restores => "RESTORES",
            Column::HitRatio => "HIT%",
            Column::Conversions => "CONV",
            Column::Reclaims => "RECLAIM",
            Column::SecondChances => "2ND",
            Column::ReadsPerWindow => "READS/W",
            Column::Wait => "WAIT_MS",
        }
    }

    pub fn width(self) -> u16 {
        match self {
            Column::App => 32,
            Column::HitRatio | Column::Processes => 6,
            _ => 9,
        }
    }

    /// The cell text for a row.
    pub fn cell(self, row: &AppRow) -> String {
        let t = &row.total;
        match self {
            Column::App => label(&row.app),
            Column::Processes => row.processes.to_string(),
            Column::Reads => t.node_reads_demand.to_string(),
            Column::Readahead => t.node_reads_readahead.to_string(),
            Column::Restores => t.restores.to_string(),
            Column::HitRatio => percent(t),
            Column::Conversions => t.conversions.to_string(),
            Column::Reclaims => t.reclaims.total().to_string(),
            Column::SecondChances => t.second_chances.total().to_string(),
            Column::ReadsPerWindow => row.last_window.node_reads().to_string(),
            Column::Wait => wait_ms(t),
        }
    }

    /// Numeric sort key (larger first); the App column sorts by name instead.
    fn key(self, row: &AppRow) -> f64 {
        let t = &row.total;
        match self {
            Column::App => 0.0,
            Column::Processes => f64::from(row.processes),
            Column::Reads => t.node_reads_demand as f64,
            Column::Readahead => t.node_reads_readahead as f64,
            Column::Restores => t.restores as f64,
            Column::HitRatio => t.hit_ratio().unwrap_or(-1.0),
            Column::Conversions => t.conversions as f64,
            Column::Reclaims => t.reclaims.total() as f64,
            Column::SecondChances => t.second_chances.total() as f64,
            Column::ReadsPerWindow => row.last_window.node_reads() as f64,
            Column::Wait => t.retrievals.wait_ns() as f64,
        }
    }
}

/// An app's name as printed, by the live view's table and `report`'s: escaped as every name
/// is ([`escape_name`]: a comm is whatever its process set).
pub fn label(app: &AppKey) -> String {
    match app {
        AppKey::App(name) | AppKey::Program(name) => escape_name(name),
        AppKey::Kernel(name) => format!("[{}]", escape_name(name)),
    }
}

/// The time an app's timed lookups took, ms with one decimal; `-` without timed lookups.
pub(super) fn wait_ms(counters: &Counters) -> String {
    match counters.retrievals.count() {
        0 => "-".into(),
        _ => format!("{:.1}", counters.retrievals.wait_ns() as f64 / 1e6),
    }
}

fn percent(counters: &Counters) -> String {
    counters
        .hit_ratio()
        .map_or_else(|| "-".into(), |r| format!("{:.1}", r * 100.0))
}

/// Sort (descending unless `ascending`; names ascending first) and filter by substring.
pub(super) fn arrange(rows: &mut Vec<AppRow>, column: Column, ascending: bool, filter: &str) {
    if !filter.is_empty() {
        let needle = filter.to_lowercase();
        rows.retain(|row| label(&row.app).to_lowercase().contains(&needle));
    }
    rows.sort_by(|a, b| {
        let order = match column {
            Column::App => label(&a.app).cmp(&label(&b.app)),
            _ => column.key(b).total_cmp(&column.key(a)),
        };
        let order = if ascending { order.reverse() } else { order };
        order.then_with(|| label(&a.app).cmp(&label(&b.app)))
    });
}

//! The what-if tables: one per question the RFC's cover letter asks, each over one grid axis
//! with the other axes held at their first value (the RFC's unless given otherwise):
//! (a) slot sets, (b) reclaim weights, (c) threshold x interval, and the compressor. Every
//! table has the compression-off point of each budget as its baseline and marks its own
//! Pareto front (node reads against retained bytes, among the table's rows). A table is printed
//! when its axis has more than one value; (c) always.
use std::fmt::Write as _;

use sim::whatif::{
    grid::{first_weights, settings, Axes, Cell},
    Outcome, Settings, Trace,
};

use tracer_common::{activity::Retrievals, Outcome as LookupOutcome};

use super::whatif_plot::{pareto_front, PlotPoint};

/// The wait prediction's latency table (issue 51): per outcome the mean time of the
/// recording's own timed lookups on the traced device (`--lookup-latency`), so a setting's
/// predicted wait is its replay's lookups per outcome times these. A restore the recording
/// did not time (compression was off) takes the recording's restore events' mean, else the
/// replay's simulated restore times (`sim::costs`, per payload); an outcome with no timed
/// lookup counts 0 ns and the legend says so.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub(crate) struct WaitTable {
    /// Means in ns and how many lookups each is over: hit, restore, disk_read, error.
    pub hit: Option<(u64, u64)>,
    pub restore: Option<(u64, u64)>,
    pub disk_read: Option<(u64, u64)>,
    pub error: Option<(u64, u64)>,
    /// The mean of the recording's timed `Restore` events, where its lookups timed none.
    pub restore_events: Option<(u64, u64)>,
}

impl WaitTable {
    /// None when the recording has no timed lookup: no prediction then.
    pub(crate) fn measured(
        lookups: &Retrievals,
        restores: &tracer_common::activity::LatencyHistogram,
    ) -> Option<WaitTable> {
        if lookups.count() == 0 {
            return None;
        }
        let mean = |o: LookupOutcome| {
            let h = lookups.get(o);
            h.mean_ns().map(|mean| (mean, h.count))
        };
        Some(WaitTable {
            hit: mean(LookupOutcome::Hit),
            restore: mean(LookupOutcome::Restore),
            disk_read: mean(LookupOutcome::DiskRead),
            error: mean(LookupOutcome::Error),
            restore_events: restores.mean_ns().map(|mean| (mean, restores.count)),
        })
    }

    /// The predicted wait of a replay's lookups, ns.
    pub(crate) fn predict(&self, outcome: &Outcome) -> u64 {
        let l = &outcome.lookups;
        let at = |mean: Option<(u64, u64)>, n: u64| mean.map_or(0, |(m, _)| m.saturating_mul(n));
        let restores = match self.restore.or(self.restore_events) {
            Some((mean, _)) => mean.saturating_mul(l.restores),
            None => outcome.restore_ns,
        };
        at(self.hit, l.hits)
            .saturating_add(restores)
            .saturating_add(at(self.disk_read, l.disk_reads))
            .saturating_add(at(self.error, l.errors))
    }

    /// The legend line: where each mean comes from.
    pub(crate) fn legend(&self) -> String {
        let shown = |name: &str, mean: Option<(u64, u64)>| match mean {
            Some((mean, n)) => format!("{name} {:.1} us over {n}", mean as f64 / 1e3),
            None => format!("{name} not timed (0)"),
        };
        let restore = match (self.restore, self.restore_events) {
            (Some(timed), _) => shown("restore", Some(timed)),
            (None, Some((mean, n))) => {
                format!(
                    "restore {:.1} us over {n} restore events",
                    mean as f64 / 1e3
                )
            }
            (None, None) => "restore simulated (sim::costs)".into(),
        };
        format!(
            "wait ms = the replay's lookups per outcome x the recording's mean lookup times: {}, \
             {restore}, {}, {}",
            shown("hit", self.hit),
            shown("disk_read", self.disk_read),
            shown("error", self.error)
        )
    }
}

/// Which question a table answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Question {
    Slots,
    Weights,
    ThresholdInterval,
    Compressor,
}

impl Question {
    pub(crate) const ALL: [Question; 4] = [
        Question::Slots,
        Question::Weights,
        Question::ThresholdInterval,
        Question::Compressor,
    ];

    fn title(self) -> &'static str {
        match self {
            Question::Slots => "(a) are 256/512/1024 the right slab boundaries? (slot sets)",
            Question::Weights => "(b) are fixed reclaim weights reasonable? (raw:slot queues)",
            Question::ThresholdInterval => {
                "(c) are threshold and interval enough control? (at each budget)"
            }
            Question::Compressor => "compressor: lz4 as in the RFC, or zstd",
        }
    }

    /// The columns naming the axis values of a row.
    fn axis_columns(self) -> &'static [&'static str] {
        match self {
            Question::Slots => &["slots", "weights"],
            Question::Weights => &["weights"],
            Question::ThresholdInterval => &["threshold", "interval"],
            Question::Compressor => &["compressor"],
        }
    }
}

/// One grid point as the tables see it.
#[derive(Clone, Debug)]
pub(crate) struct Row {
    pub budget_bytes: u64,
    pub compression: bool,
    pub slots: String,
    pub weights: String,
    pub threshold: u32,
    pub interval_ms: u32,
    pub compressor: String,
    pub retained_nodes: u64,
    pub retained_bytes: u64,
    pub node_reads: u64,
    pub restores: u64,
    /// The predicted wait of the lookups after the budget point (issue 51), ns; None without
    /// a latency table.
    pub wait_ns: Option<u64>,
    /// Episodes reclaimed as the recording did (`--budget recorded`), not to a budget.
    pub as_recorded: bool,
}

impl Row {
    fn budget_cell(&self) -> String {
        if self.as_recorded {
            "recorded".into()
        } else {
            budget_label(self.budget_bytes)
        }
    }

    fn axis_cells(&self, question: Question) -> Vec<String> {
        if !self.compression {
            return question
                .axis_columns()
                .iter()
                .map(|_| "off".into())
                .collect();
        }
        match question {
            Question::Slots => vec![self.slots.clone(), self.weights.clone()],
            Question::Weights => vec![self.weights.clone()],
            Question::ThresholdInterval => {
                vec![
                    format!("{}%", self.threshold),
                    format!("{} ms", self.interval_ms),
                ]
            }
            Question::Compressor => vec![self.compressor.clone()],
        }
    }

    pub(crate) fn plot_point(&self) -> PlotPoint {
        PlotPoint {
            // Attributed memory is what the cache holds at the budget point, not the budget.
            memory_bytes: self.retained_bytes,
            node_reads: self.node_reads,
            compression: self.compression,
            chosen: self.compression
                && self.threshold == tracer_common::knobs::DEFAULT_THRESHOLD
                && self.interval_ms == tracer_common::knobs::DEFAULT_INTERVAL_MS,
            label: format!(
                "{} {} budget{}",
                if self.compression { "on" } else { "off" },
                self.budget_cell(),
                self.wait_ns
                    .map_or_else(String::new, |ns| format!(", wait {}", wait_ms(ns)))
            ),
        }
    }
}

/// One table: the indices (into the grid's points) of its rows, in order, and of its Pareto
/// points.
#[derive(Clone, Debug)]
pub(crate) struct Table {
    pub question: Question,
    /// What the other axes are held at.
    pub held: String,
    pub rows: Vec<usize>,
    pub pareto: Vec<usize>,
}

impl Table {
    /// A table over `rows` (indices into `points`, in display order).
    pub(crate) fn new(question: Question, held: String, rows: Vec<usize>, points: &[Row]) -> Table {
        let plot: Vec<PlotPoint> = rows.iter().map(|i| points[*i].plot_point()).collect();
        let pareto = pareto_front(&plot).into_iter().map(|k| rows[k]).collect();
        Table {
            question,
            held,
            rows,
            pareto,
        }
    }

    pub(crate) fn render(&self, points: &[Row]) -> String {
        let mut header: Vec<&str> = vec!["budget"];
        header.extend(self.question.axis_columns());
        header.extend(["retained nodes", "retained bytes", "node reads", "restores"]);
        let waits = self.rows.iter().any(|i| points[*i].wait_ns.is_some());
        if waits {
            header.push("wait ms");
        }
        let mut cells: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
        for index in &self.rows {
            let p = &points[*index];
            let mut line = vec![p.budget_cell()];
            line.extend(p.axis_cells(self.question));
            line.extend([
                p.retained_nodes.to_string(),
                p.retained_bytes.to_string(),
                p.node_reads.to_string(),
                p.restores.to_string(),
            ]);
            if waits {
                line.push(
                    p.wait_ns
                        .map_or_else(|| "-".into(), |ns| format!("{:.3}", ns as f64 / 1e6)),
                );
            }
            if self.pareto.contains(index) {
                line.push("*".into());
            }
            cells.push(line);
        }
        let widths: Vec<usize> = (0..header.len())
            .map(|c| cells.iter().map(|l| l[c].len()).max().unwrap_or(0))
            .collect();
        let mut out = format!("{}\n  {}\n", self.question.title(), self.held);
        for line in &cells {
            let mut text = String::new();
            for (c, cell) in line.iter().enumerate() {
                match widths.get(c) {
                    Some(width) => write!(text, "{cell:>width$}  ").unwrap(),
                    None => text.push_str(cell),
                }
            }
            out.push_str(text.trim_end());
            out.push('\n');
        }
        out
    }
}

/// Nanoseconds as milliseconds, three decimals.
pub(crate) fn wait_ms(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

/// "3 MiB", "512 KiB", or bytes.
pub(crate) fn budget_label(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes.is_multiple_of(1 << 10) {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} B")
    }
}

/// One JSON object per grid point (`whatif --json`).
#[derive(serde::Serialize)]
pub(crate) struct Point {
    settings: Settings,
    compressor: String,
    compression: bool,
    outcome: Outcome,
    /// The predicted wait of the lookups after the budget point (issue 51): null without
    /// timed lookups in the recording.
    predicted_wait_ns: Option<u64>,
    /// The tables that show this point, and those whose Pareto front it is on.
    tables: Vec<Question>,
    pareto: Vec<Question>,
}

pub(crate) fn row(axes: &Axes, cell: &Cell, outcome: &Outcome, waits: Option<&WaitTable>) -> Row {
    let settings = settings(axes, cell);
    Row {
        budget_bytes: settings.budget_bytes,
        compression: cell.knobs.is_some(),
        slots: settings.cache.slots.label(),
        weights: settings.cache.weights.label(),
        threshold: settings.knobs.threshold,
        interval_ms: settings.knobs.interval_ms,
        compressor: axes.compressors[cell.compressor].name(),
        retained_nodes: outcome.retained_nodes,
        retained_bytes: outcome.retained_bytes,
        node_reads: outcome.node_reads,
        restores: outcome.restores,
        wait_ns: waits.map(|w| w.predict(outcome)),
        as_recorded: settings.reclaim == sim::whatif::Reclaim::AsRecorded,
    }
}

/// One table per question: per budget, the off point, then the on points that differ from the
/// first value of every axis in the question's axis only.
pub(crate) fn tables(axes: &Axes, cells: &[Cell], rows: &[Row]) -> Vec<Table> {
    let varied = |q: Question| match q {
        Question::Slots => axes.slot_sets.len() > 1,
        Question::Weights => {
            (0..axes.weights.len())
                .filter(|w| axes.weights[*w].for_slots(&axes.slot_sets[0]).is_some())
                .count()
                > 1
        }
        Question::ThresholdInterval => true,
        Question::Compressor => axes.compressors.len() > 1,
    };
    Question::ALL
        .into_iter()
        .filter(|q| varied(*q))
        .map(|q| {
            let members: Vec<usize> = (0..cells.len())
                .filter(|i| in_table(axes, q, &cells[*i]))
                .collect();
            Table::new(q, held(axes, q), members, rows)
        })
        .collect()
}

/// Whether a point belongs to question `q`'s table.
pub(crate) fn in_table(axes: &Axes, q: Question, cell: &Cell) -> bool {
    let Some((threshold, interval)) = cell.knobs else {
        return true;
    };
    let knobs = q == Question::ThresholdInterval || (threshold, interval) == (0, 0);
    let slots = q == Question::Slots || cell.slots == 0;
    let weights = match q {
        Question::Weights => true,
        _ => cell.weights == first_weights(axes, cell.slots),
    };
    let compressor = q == Question::Compressor || cell.compressor == 0;
    knobs && slots && weights && compressor
}

/// "threshold 25%, interval 1000 ms, ..." for the axes a table does not vary.
fn held(axes: &Axes, q: Question) -> String {
    let mut parts = Vec::new();
    if q != Question::ThresholdInterval {
        parts.push(format!(
            "threshold {}%, interval {} ms",
            axes.thresholds[0], axes.intervals[0]
        ));
    }
    if q != Question::Slots {
        parts.push(format!("slots {}", axes.slot_sets[0].label()));
    }
    if q != Question::Weights && q != Question::Slots {
        let weights = axes.weights[first_weights(axes, 0)]
            .for_slots(&axes.slot_sets[0])
            .expect("the first fitting choice fits");
        parts.push(format!("weights {}", weights.label()));
    }
    if q != Question::Compressor {
        parts.push(axes.compressors[0].name());
    }
    format!("held at: {}; off = compression off", parts.join(", "))
}

pub(crate) fn json_points(
    axes: &Axes,
    cells: &[Cell],
    outcomes: Vec<Outcome>,
    tables: &[Table],
    waits: Option<&WaitTable>,
) -> Vec<Point> {
    cells
        .iter()
        .zip(outcomes)
        .enumerate()
        .map(|(index, (cell, outcome))| {
            let showing = |t: &&Table| t.rows.contains(&index);
            let on_front = |t: &&Table| t.pareto.contains(&index);
            Point {
                settings: settings(axes, cell),
                compressor: axes.compressors[cell.compressor].name(),
                compression: cell.knobs.is_some(),
                predicted_wait_ns: waits.map(|w| w.predict(&outcome)),
                outcome,
                tables: tables.iter().filter(showing).map(|t| t.question).collect(),
                pareto: tables.iter().filter(on_front).map(|t| t.question).collect(),
            }
        })
        .collect()
}

/// The tables as `whatif` prints them: the trace's line, the legend, each table.
pub(crate) fn render(
    trace: &Trace,
    tables: &[Table],
    rows: &[Row],
    waits: Option<&WaitTable>,
) -> String {
    let untraced = match trace.untraced_lookups {
        0 => String::new(),
        n => format!(" (and {n} lookups the trace missed, from their demand reads)"),
    };
    let inodes = match trace.inode_evictions {
        0 => String::new(),
        n => format!(
            ", {n} inode evictions (the JSON's `reloads` counts the lookups that reloaded \
             them)"
        ),
    };
    let scans = match trace.scans {
        0 => String::new(),
        n => format!(" (and {n} second chances its shrinker gave, with them what it scanned)"),
    };
    let mut out = format!(
        "whatif: {} accesses{untraced}, {} node page drops{scans} on dev {}:{}{inodes}\n",
        trace.accesses,
        trace.evictions,
        trace.dev >> 20,
        trace.dev & 0xfffff
    );
    out.push_str(
        "* = on the table's Pareto front: no other row has fewer node reads for no more \
         retained bytes\n",
    );
    if let Some(waits) = waits {
        out.push_str(&waits.legend());
        out.push('\n');
    }
    for table in tables {
        out.push('\n');
        out.push_str(&table.render(rows));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(budget_mib: u64, compression: bool, bytes: u64, reads: u64) -> Row {
        Row {
            budget_bytes: budget_mib << 20,
            compression,
            slots: "256/512/1024".into(),
            weights: "16:1:2:4".into(),
            threshold: 25,
            interval_ms: 1000,
            compressor: "lz4".into(),
            retained_nodes: 1,
            retained_bytes: bytes,
            node_reads: reads,
            restores: 0,
            wait_ns: None,
            as_recorded: false,
        }
    }

    #[test]
    fn budgets_read_in_the_largest_whole_unit() {
        assert_eq!(budget_label(3 << 20), "3 MiB");
        assert_eq!(budget_label(1536 << 10), "1536 KiB");
        assert_eq!(budget_label(1000), "1000 B");
    }

    #[test]
    fn a_table_stars_only_its_own_non_dominated_rows() {
        let rows = [
            row(1, false, 1000, 50),
            row(1, true, 400, 40),
            row(3, false, 3000, 45),
            row(3, true, 600, 30),
        ];
        let table = Table::new(Question::Compressor, "held".into(), vec![0, 1, 2, 3], &rows);
        assert_eq!(table.pareto, [1, 3]);
        let text = table.render(&rows);
        let starred: Vec<&str> = text.lines().filter(|l| l.ends_with('*')).collect();
        assert_eq!(starred.len(), 2, "{text}");
        assert!(
            starred[0].trim_start().starts_with("1 MiB") && starred[0].contains(" 400 "),
            "{text}"
        );
        // Off rows name no axis value.
        assert!(text
            .lines()
            .any(|l| l.trim_start().starts_with("1 MiB") && l.contains("off")));
    }
}

//! Drawing: one function per panel, each reading only the snapshot and the UI state.
use ratatui::{
    layout::{Constraint, Layout, Rect},
    style::{Color, Modifier, Style, Stylize},
    text::{Line, Span},
    widgets::{
        Bar, BarChart, BarGroup, Block, Cell, Clear, Gauge, Paragraph, Row, Sparkline, Table, Wrap,
    },
    Frame,
};

use super::{
    table::{arrange, COLUMNS},
    UiState,
};
use crate::schema::protocol::Snapshot;

pub(super) fn draw(frame: &mut Frame, snapshot: &Snapshot, ui: &UiState) {
    // The node-type panel's lines (a header, five types, nids not in the image once there
    // are some) need more than the row's usual four.
    let bottom = match &snapshot.node_types {
        Some(shown) => (super::node_types::lines(shown).len() as u16 + 2).max(6),
        None => 6,
    };
    // The lookup latency panel: a header and five outcomes.
    let timed = snapshot.totals.retrievals.count() > 0;
    let bottom = if timed { bottom.max(8) } else { bottom };
    let [header, sparks, memory, table, bottom, footer] = Layout::vertical([
        Constraint::Length(4),
        Constraint::Length(5),
        Constraint::Length(5),
        Constraint::Min(6),
        Constraint::Length(bottom),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    draw_header(frame, header, snapshot, ui);
    draw_sparklines(frame, sparks, snapshot);
    draw_memory(frame, memory, snapshot);
    draw_table(frame, table, snapshot, ui);
    let bottom = if timed {
        let [rest, latency] =
            Layout::horizontal([Constraint::Min(40), Constraint::Length(52)]).areas(bottom);
        draw_latency(frame, latency, snapshot);
        rest
    } else {
        bottom
    };
    match &snapshot.node_types {
        Some(node_types) => {
            let [decisions, checkpoints, types] = Layout::horizontal([
                Constraint::Percentage(35),
                Constraint::Percentage(35),
                Constraint::Percentage(30),
            ])
            .areas(bottom);
            draw_decisions(frame, decisions, snapshot);
            super::checkpoints::draw(frame, checkpoints, &snapshot.checkpoints);
            super::node_types::draw(frame, types, node_types);
        }
        None => {
            let [decisions, checkpoints] =
                Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)])
                    .areas(bottom);
            draw_decisions(frame, decisions, snapshot);
            super::checkpoints::draw(frame, checkpoints, &snapshot.checkpoints);
        }
    }
    draw_footer(frame, footer, snapshot, ui);
    if ui.help {
        draw_help(frame);
    }
}

fn draw_header(frame: &mut Frame, area: Rect, s: &Snapshot, ui: &UiState) {
    let source = format!("{:?}", s.source.kind).to_lowercase();
    let mut first = vec![
        Span::styled("nodescope ", Style::new().bold().fg(Color::Cyan)),
        Span::raw(format!("source {source}  kernel {}  ", s.source.kernel)),
        Span::raw(format!("device {}  ", s.source.devices.join(","))),
        Span::raw(format!("window {:.1}s", s.window_ns as f64 / 1e9)),
    ];
    if ui.paused {
        first.push(Span::styled(
            "  PAUSED",
            Style::new().bold().fg(Color::Yellow),
        ));
    }
    let second = Line::from(format!(
        "{}  controller {}  {}",
        tracer_common::knobs::shown(s.knobs),
        s.controller.as_deref().unwrap_or("off"),
        s.source.detail
    ));
    let banner = Paragraph::new(vec![Line::from(first), second]).block(Block::bordered());
    frame.render_widget(banner, area);
}

fn draw_sparklines(frame: &mut Frame, area: Rect, s: &Snapshot) {
    let areas = Layout::horizontal([Constraint::Ratio(1, 4); 4]).split(area);
    let panels = [
        ("node reads", &s.node_reads, Color::Red),
        ("restores", &s.restores, Color::Green),
        ("conversions", &s.conversions, Color::Blue),
        ("reclaims", &s.reclaims, Color::Magenta),
    ];
    // The restores' mean latency so far, where the source times them (the reference module's
    // tracepoint, a return probe, the simulator).
    let latency = s
        .totals
        .restore_latency
        .mean_ns()
        .map_or_else(String::new, |ns| format!(" avg {}", micros(ns)));
    for ((title, series, color), area) in panels.into_iter().zip(areas.iter()) {
        let last = series.last().copied().unwrap_or(0);
        let extra = if title == "restores" {
            latency.as_str()
        } else {
            ""
        };
        // Show the newest windows that fit.
        let width = usize::from(area.width.saturating_sub(2));
        let data = &series[series.len().saturating_sub(width)..];
        let spark = Sparkline::default()
            .block(Block::bordered().title(format!("{title} {last}/w{extra}")))
            .data(data)
            .style(Style::new().fg(color));
        frame.render_widget(spark, *area);
    }
}

/// Nanoseconds as microseconds, one decimal below 100 us.
fn micros(ns: u64) -> String {
    let us = ns as f64 / 1e3;
    if us < 100.0 {
        format!("{us:.1}us")
    } else {
        format!("{us:.0}us")
    }
}

/// Timed node lookups since the start (issue 51): per outcome the count, mean, p50 and p99
/// (bucket upper bounds), and the time waited in all.
pub(super) fn latency_lines(r: &tracer_common::activity::Retrievals) -> Vec<String> {
    let or_dash = |ns: Option<u64>| ns.map_or_else(|| "-".into(), micros);
    let mut lines = vec![format!(
        "{:<10}{:>8}{:>10}{:>10}{:>10}",
        "outcome", "count", "mean", "p50<=", "p99<="
    )];
    for outcome in tracer_common::Outcome::ALL {
        let h = r.get(outcome);
        lines.push(format!(
            "{:<10}{:>8}{:>10}{:>10}{:>10}",
            outcome.name(),
            h.count,
            or_dash(h.mean_ns()),
            or_dash(h.quantile_bound_ns(0.5)),
            or_dash(h.quantile_bound_ns(0.99))
        ));
    }
    lines
}

fn draw_latency(frame: &mut Frame, area: Rect, s: &Snapshot) {
    let r = &s.totals.retrievals;
    let title = format!(
        "lookup latency: {} timed, waited {:.1} ms",
        r.count(),
        r.wait_ns() as f64 / 1e6
    );
    let lines: Vec<Line> = latency_lines(r).into_iter().map(Line::from).collect();
    frame.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(title)),
        area,
    );
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

fn draw_memory(frame: &mut Frame, area: Rect, s: &Snapshot) {
    let [gauge_area, slots_area] =
        Layout::horizontal([Constraint::Percentage(60), Constraint::Percentage(40)]).areas(area);
    let c = &s.cache;
    let budget = s
        .budget_bytes
        .map_or_else(String::new, |b| format!(" / budget {}", mib(b)));
    let ratio = match s.budget_bytes {
        Some(budget) if budget > 0 => (c.attributed_bytes as f64 / budget as f64).min(1.0),
        _ if c.attributed_bytes > 0 => c.compressed_bytes as f64 / c.attributed_bytes as f64,
        _ => 0.0,
    };
    let pressure = s
        .memory_pressure
        .map_or_else(String::new, |p| format!("  pressure {p:.1} %"));
    let label = format!(
        "raw {} ({} entries)  compressed {} ({} slots)  attributed {}{budget}{pressure}",
        mib(c.raw_bytes),
        c.raw_entries,
        mib(c.compressed_bytes),
        c.slots.compressed(),
        mib(c.attributed_bytes)
    );
    let title = if s.budget_bytes.is_some() {
        "memory (of budget)"
    } else {
        "memory (compressed share)"
    };
    let gauge = Gauge::default()
        .block(Block::bordered().title(title))
        .gauge_style(Style::new().fg(Color::Green).bg(Color::DarkGray))
        .ratio(ratio)
        .label(label);
    frame.render_widget(gauge, gauge_area);
    let bars = [
        ("256", c.slots.b256),
        ("512", c.slots.b512),
        ("1024", c.slots.b1024),
    ]
    .map(|(name, value)| Bar::default().label(Line::from(name)).value(value));
    let chart = BarChart::default()
        .block(Block::bordered().title("slots"))
        .direction(ratatui::layout::Direction::Horizontal)
        .bar_width(1)
        .bar_gap(0)
        .data(BarGroup::default().bars(&bars));
    frame.render_widget(chart, slots_area);
}

fn draw_table(frame: &mut Frame, area: Rect, s: &Snapshot, ui: &UiState) {
    let mut rows = s.apps.clone();
    arrange(&mut rows, ui.sort, ui.ascending, &ui.filter);
    let header = Row::new(COLUMNS.iter().map(|column| {
        let marker = match (*column == ui.sort, ui.ascending) {
            (true, false) => "▼",
            (true, true) => "▲",
            _ => "",
        };
        Cell::from(format!("{}{marker}", column.title()))
    }))
    .style(Style::new().add_modifier(Modifier::BOLD).fg(Color::Yellow));
    let mut body: Vec<Row> = rows
        .iter()
        .map(|row| Row::new(COLUMNS.iter().map(|column| Cell::from(column.cell(row)))))
        .collect();
    let other = s.apps_other.as_ref().filter(|_| ui.filter.is_empty());
    if let Some(other) = other {
        body.push(other_row(other).style(Style::new().fg(Color::DarkGray)));
    }
    if s.exited_processes > 0 && ui.filter.is_empty() {
        body.push(exited_row(s).style(Style::new().fg(Color::DarkGray)));
    }
    let widths: Vec<Constraint> = COLUMNS
        .iter()
        .map(|c| Constraint::Length(c.width()))
        .collect();
    let filter = if ui.editing_filter {
        format!("  filter: {}_", ui.filter)
    } else if ui.filter.is_empty() {
        String::new()
    } else {
        format!("  filter: {}", ui.filter)
    };
    let more = s
        .apps_other
        .as_ref()
        .map_or_else(String::new, |o| format!(", {} more summed", o.apps));
    let title = format!(
        "apps ({} shown{more}, {} processes live, {} exited){filter}",
        rows.len(),
        s.live_processes,
        s.exited_processes
    );
    let table = Table::new(body, widths)
        .header(header)
        .block(Block::bordered().title(title));
    frame.render_widget(table, area);
}

/// The apps a daemon's snapshot leaves out (it names the most active: docs/DAEMON.md), summed.
fn other_row(other: &crate::model::OtherApps) -> Row<'static> {
    let cells = totals_cells(
        format!("({} more apps)", other.apps),
        other.processes.to_string(),
        &other.total,
        other.last_window.node_reads().to_string(),
    );
    Row::new(cells.map(Cell::from))
}

fn exited_row(s: &Snapshot) -> Row<'static> {
    let cells = totals_cells(
        format!("(exited: {})", s.exited_processes),
        String::new(),
        &s.exited,
        String::new(),
    );
    Row::new(cells.map(Cell::from))
}

fn totals_cells(
    name: String,
    processes: String,
    t: &crate::model::Counters,
    per_window: String,
) -> [String; 11] {
    [
        name,
        processes,
        t.node_reads_demand.to_string(),
        t.node_reads_readahead.to_string(),
        t.restores.to_string(),
        t.hit_ratio()
            .map_or_else(|| "-".into(), |r| format!("{:.1}", r * 100.0)),
        t.conversions.to_string(),
        t.reclaims.total().to_string(),
        t.second_chances.total().to_string(),
        per_window,
        super::table::wait_ms(t),
    ]
}

fn draw_decisions(frame: &mut Frame, area: Rect, s: &Snapshot) {
    let lines: Vec<Line> = if s.decisions.is_empty() {
        vec![
            Line::from("no controller decisions (run with --tune to let the controller act)").dim(),
        ]
    } else {
        s.decisions.iter().map(|d| Line::from(d.as_str())).collect()
    };
    let pane = Paragraph::new(lines)
        .block(Block::bordered().title("controller decisions (newest first)"))
        .wrap(Wrap { trim: true });
    frame.render_widget(pane, area);
}

fn draw_footer(frame: &mut Frame, area: Rect, s: &Snapshot, ui: &UiState) {
    let sort = ui.sort.title();
    let text = format!(
        "q quit  / filter  s sort ({sort})  r reverse  p pause  ? help   | reads {} restores {} conversions {} lost {}",
        s.totals.node_reads(),
        s.totals.restores,
        s.totals.conversions,
        s.totals.lost
    );
    let style = if s.totals.lost > 0 {
        Style::new().fg(Color::Red)
    } else {
        Style::new().dim()
    };
    frame.render_widget(Paragraph::new(text).style(style), area);
}

pub(super) const HELP: [&str; 13] = [
    "nodescope top: node-cache activity, live",
    "",
    "q / Esc      quit",
    "/            filter apps by name (Enter applies, Esc clears)",
    "s / S        sort by the next / previous column",
    "1..9, 0      sort by column N (0 = the tenth)",
    "r            reverse the sort order",
    "p            pause / resume the display (events are still counted)",
    "?            this help",
    "",
    "READS demand node reads, RA readahead reads, HIT% restores / (restores + reads),",
    "READS/W node reads in the last window; [name] rows are kernel threads",
    "WAIT_MS time the app's timed node lookups took (--lookup-latency), since the start",
];

fn draw_help(frame: &mut Frame) {
    let area = frame.area();
    let width = 84.min(area.width);
    let height = (HELP.len() as u16 + 2).min(area.height);
    let popup = Rect::new(
        (area.width - width) / 2,
        (area.height - height) / 2,
        width,
        height,
    );
    frame.render_widget(Clear, popup);
    let text: Vec<Line> = HELP.iter().map(|l| Line::from(*l)).collect();
    frame.render_widget(
        Paragraph::new(text).block(Block::bordered().title("help")),
        popup,
    );
}

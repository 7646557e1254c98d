//! The what-if picture: node reads against attributed memory for every grid point, compression
//! off and on in two colours, the Pareto front, and the chosen settings marked and labelled.
//! SVG or PNG by the file's extension (plotters: its SVG backend, or its bitmap backend into
//! a buffer that the `png` crate encodes).
//!
//! Labels are drawn with a TrueType font found on the system (DejaVu Sans, Liberation Sans,
//! Noto Sans, Android's Roboto; `NODESCOPE_FONT` names another): plotters' text layout needs
//! one for SVG too. `cargo xtask setup` installs fonts-dejavu-core for this.
use std::{
    io::BufWriter,
    path::{Path, PathBuf},
    sync::OnceLock,
};

use anyhow::{anyhow, bail, Context as _, Result};
use plotters::{
    coord::Shift,
    prelude::*,
    style::{register_font, FontStyle},
};

use crate::output::OutputFile;

/// One grid point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlotPoint {
    pub memory_bytes: u64,
    pub node_reads: u64,
    /// Compression on (the RFC's cache) or off (raw entries only).
    pub compression: bool,
    /// Marked and labelled in the picture.
    pub chosen: bool,
    pub label: String,
}

/// Picture size in pixels.
const SIZE: (u32, u32) = (1100, 700);
const OFF_COLOUR: RGBColor = RGBColor(31, 119, 180);
const ON_COLOUR: RGBColor = RGBColor(230, 110, 0);
const CHOSEN_COLOUR: RGBColor = RGBColor(200, 0, 0);
/// The font family the picture asks plotters for; [`ensure_font`] registers it.
const FONT: &str = "sans-serif";
/// Where a TrueType font usually is, most likely first.
const FONT_CANDIDATES: [&str; 7] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/noto/NotoSans-Regular.ttf",
    "/usr/share/fonts/noto/NotoSans-Regular.ttf",
    "/system/fonts/Roboto-Regular.ttf",
];

/// Indices of the non-dominated points, by memory ascending (then index): a point is dominated
/// when another has no more memory and no more reads, and less of one. Equal points dominate
/// neither each other, so both stay.
pub fn pareto_front(points: &[PlotPoint]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..points.len()).collect();
    order.sort_by_key(|&i| (points[i].memory_bytes, points[i].node_reads, i));
    let mut front = Vec::new();
    // The fewest reads of any point with strictly less memory than the group at hand.
    let mut best_below: Option<u64> = None;
    for group in order.chunk_by(|&a, &b| points[a].memory_bytes == points[b].memory_bytes) {
        // Sorted by reads within the group: only its fewest-reads points can be on the front.
        let fewest = points[group[0]].node_reads;
        if best_below.is_none_or(|best| fewest < best) {
            front.extend(
                group
                    .iter()
                    .copied()
                    .take_while(|&i| points[i].node_reads == fewest),
            );
            best_below = Some(fewest);
        }
    }
    front
}

/// Draw `points` to `path`: `.svg` or `.png`, created as `output` says.
pub fn draw(points: &[PlotPoint], path: &Path, output: OutputFile) -> Result<()> {
    if points.is_empty() {
        bail!("no grid points to draw into {}", path.display());
    }
    let extension = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    ensure_font()?;
    match extension.as_deref() {
        Some("svg") => draw_svg(points, path, output),
        Some("png") => draw_png(points, path, output),
        _ => bail!(
            "{}: the picture is written as .svg or .png, by its extension",
            path.display()
        ),
    }
}

/// Drawn into memory, then written: the file is created by [`OutputFile`], not by plotters.
fn draw_svg(points: &[PlotPoint], path: &Path, output: OutputFile) -> Result<()> {
    let mut svg = String::new();
    draw_on(
        SVGBackend::with_string(&mut svg, SIZE).into_drawing_area(),
        points,
    )
    .with_context(|| format!("drawing {}", path.display()))?;
    output.write(path, svg.as_bytes())
}

fn draw_png(points: &[PlotPoint], path: &Path, output: OutputFile) -> Result<()> {
    let (width, height) = SIZE;
    let mut pixels = vec![0u8; width as usize * height as usize * 3];
    draw_on(
        BitMapBackend::with_buffer(&mut pixels, SIZE).into_drawing_area(),
        points,
    )
    .with_context(|| format!("drawing {}", path.display()))?;
    let file = output.create(path)?;
    let mut encoder = png::Encoder::new(BufWriter::new(file), width, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder
        .write_header()
        .and_then(|mut writer| {
            writer.write_image_data(&pixels)?;
            writer.finish()
        })
        .with_context(|| format!("writing {}", path.display()))
}

/// Register a system TrueType font as [`FONT`] once per process.
fn ensure_font() -> Result<()> {
    static FONT_PATH: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();
    FONT_PATH
        .get_or_init(|| load_font().map_err(|e| format!("{e:#}")))
        .as_ref()
        .map(|_| ())
        .map_err(|e| anyhow!("{e}"))
}

/// Fonts are a few MiB (Noto CJK's, tens).
const MAX_FONT_BYTES: u64 = 64 << 20;

fn load_font() -> Result<PathBuf> {
    let chosen = std::env::var_os("NODESCOPE_FONT").map(PathBuf::from);
    let path = chosen
        .clone()
        .or_else(|| {
            FONT_CANDIDATES
                .iter()
                .map(PathBuf::from)
                .find(|p| p.is_file())
        })
        .context(
            "the picture's labels need a TrueType font: install fonts-dejavu-core (cargo xtask \
             setup does) or name a .ttf in NODESCOPE_FONT",
        )?;
    // A regular file of at most MAX_FONT_BYTES (NODESCOPE_FONT=/dev/zero read until memory
    // ran out; a FIFO blocked).
    let bytes = tracer_common::files::read_regular(
        &path,
        tracer_common::files::Symlinks::Follow,
        MAX_FONT_BYTES,
    )
    .with_context(|| format!("reading {}", path.display()))?;
    // Registered fonts live as long as the process: plotters keeps a &'static.
    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    register_font(FONT, FontStyle::Normal, bytes).map_err(|_| {
        anyhow!(
            "{} is not a TrueType font plotters can read",
            path.display()
        )
    })?;
    Ok(path)
}

fn plot_error<E: std::error::Error + Send + Sync>(err: DrawingAreaErrorKind<E>) -> anyhow::Error {
    anyhow!("{err}")
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1u32 << 20)
}

fn coords(point: &PlotPoint) -> (f64, f64) {
    (mib(point.memory_bytes), point.node_reads as f64)
}

/// The chart on any backend.
fn draw_on<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, points: &[PlotPoint]) -> Result<()> {
    root.fill(&WHITE).map_err(plot_error)?;
    let x_max = points
        .iter()
        .map(|p| mib(p.memory_bytes))
        .fold(0.0, f64::max)
        * 1.08
        + 0.1;
    let y_max = points.iter().map(|p| p.node_reads).max().unwrap_or(0) as f64 * 1.08 + 1.0;
    let mut chart = ChartBuilder::on(&root)
        .caption("Node reads against attributed memory", (FONT, 24))
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..x_max, 0f64..y_max)
        .map_err(plot_error)?;
    chart
        .configure_mesh()
        .x_desc("attributed memory (MiB)")
        .y_desc("node reads")
        .label_style((FONT, 15))
        .axis_desc_style((FONT, 17))
        .light_line_style(RGBColor(238, 238, 238))
        .x_label_formatter(&|x| {
            if x_max >= 10.0 {
                format!("{x:.0}")
            } else {
                format!("{x:.1}")
            }
        })
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()
        .map_err(plot_error)?;
    for (compression, colour, name) in [
        (false, OFF_COLOUR, "compression off"),
        (true, ON_COLOUR, "compression on"),
    ] {
        let style = colour.filled();
        chart
            .draw_series(
                points
                    .iter()
                    .filter(|p| p.compression == compression)
                    .map(|p| Circle::new(coords(p), 4, style)),
            )
            .map_err(plot_error)?
            .label(name)
            .legend(move |(x, y)| Circle::new((x, y), 5, style));
    }
    chart
        .draw_series(LineSeries::new(front_steps(points), BLACK.stroke_width(2)))
        .map_err(plot_error)?
        .label("Pareto front")
        .legend(|(x, y)| PathElement::new(vec![(x - 10, y), (x + 10, y)], BLACK.stroke_width(2)));
    chart
        .draw_series(points.iter().filter(|p| p.chosen).map(|p| {
            EmptyElement::at(coords(p))
                + Circle::new((0, 0), 9, CHOSEN_COLOUR.stroke_width(2))
                + Text::new(p.label.clone(), (12, -20), (FONT, 15).into_font())
        }))
        .map_err(plot_error)?
        .label("chosen")
        .legend(|(x, y)| Circle::new((x, y), 7, CHOSEN_COLOUR.stroke_width(2)));
    chart
        .configure_series_labels()
        .label_font((FONT, 15))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(plot_error)?;
    root.present().map_err(plot_error)
}

/// The front as the staircase it is: from each front point, reads stay until the memory of
/// the next, where they drop (a point between two is not reached by interpolation).
fn front_steps(points: &[PlotPoint]) -> Vec<(f64, f64)> {
    let mut steps = Vec::new();
    for i in pareto_front(points) {
        let (x, y) = coords(&points[i]);
        if let Some(&(_, previous_y)) = steps.last() {
            steps.push((x, previous_y));
        }
        steps.push((x, y));
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(memory_bytes: u64, node_reads: u64) -> PlotPoint {
        PlotPoint {
            memory_bytes,
            node_reads,
            compression: false,
            chosen: false,
            label: String::new(),
        }
    }

    fn front_of(pairs: &[(u64, u64)]) -> Vec<usize> {
        let points: Vec<PlotPoint> = pairs.iter().map(|&(m, r)| point(m, r)).collect();
        pareto_front(&points)
    }

    #[test]
    fn front_is_the_non_dominated_points_by_memory() {
        // 0: (10, 100) front; 1: (20, 50) front; 2: (20, 60) dominated by 1 (same memory);
        // 3: (30, 50) dominated by 1 (same reads, more memory); 4: (5, 200) front;
        // 5: (40, 10) front; 6: (35, 90) dominated by 1.
        let pairs = [
            (10, 100),
            (20, 50),
            (20, 60),
            (30, 50),
            (5, 200),
            (40, 10),
            (35, 90),
        ];
        assert_eq!(front_of(&pairs), vec![4, 0, 1, 5]);
    }

    #[test]
    fn equal_points_are_both_on_the_front() {
        assert_eq!(front_of(&[(7, 3), (9, 1), (7, 3)]), vec![0, 2, 1]);
    }

    #[test]
    fn one_point_dominating_all_is_the_whole_front() {
        assert_eq!(front_of(&[(50, 50), (1, 1), (1, 2), (2, 1)]), vec![1]);
        assert_eq!(front_of(&[]), Vec::<usize>::new());
        assert_eq!(front_of(&[(0, 0)]), vec![0]);
    }

    #[test]
    fn a_cheaper_point_with_more_reads_stays() {
        // Less memory but more reads: neither dominates; sorted by memory ascending.
        assert_eq!(front_of(&[(300, 1), (100, 3), (200, 2)]), vec![1, 2, 0]);
    }

    #[test]
    fn front_steps_hold_reads_until_the_next_memory() {
        let points = [point(1 << 20, 100), point(2 << 20, 40), point(3 << 20, 60)];
        assert_eq!(
            front_steps(&points),
            vec![(1.0, 100.0), (2.0, 100.0), (2.0, 40.0)]
        );
    }

    #[test]
    fn unknown_extension_and_no_points_are_refused() {
        let dir = tempfile::TempDir::new().unwrap();
        let err = draw(
            &[point(1, 1)],
            &dir.path().join("x.jpg"),
            OutputFile::new(false),
        )
        .unwrap_err();
        assert!(err.to_string().contains(".svg or .png"), "{err:#}");
        let err = draw(&[], &dir.path().join("x.svg"), OutputFile::new(false)).unwrap_err();
        assert!(err.to_string().contains("no grid points"), "{err:#}");
    }
}

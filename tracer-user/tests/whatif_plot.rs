//! The what-if picture, drawn for real as PNG and SVG: the PNG decodes to the chart's size with
//! pixels of each series' colour, the SVG names the series and the chosen settings' labels.
use nodescope::{
    output::OutputFile,
    view::whatif_plot::{draw, pareto_front, PlotPoint},
};

mod common;

use common::scratch;

/// A small grid shaped like the RFC's: off costs ~4.2 KB a retained node, on ~360 B.
fn grid() -> Vec<PlotPoint> {
    let mut points = Vec::new();
    for budget_mib in [1u64, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64] {
        let memory_bytes = budget_mib << 20;
        let off_retained = (memory_bytes / 4184).min(16_676);
        let on_retained = (memory_bytes / 360).min(16_676);
        for (compression, retained) in [(false, off_retained), (true, on_retained)] {
            points.push(PlotPoint {
                memory_bytes,
                node_reads: 16_384u64.saturating_sub(retained),
                compression,
                chosen: budget_mib == 3,
                label: format!(
                    "{} {budget_mib} MiB",
                    if compression { "on" } else { "off" }
                ),
            });
        }
    }
    points
}

/// The PNG's pixels as RGB triples.
fn decode_png(path: &std::path::Path) -> (u32, u32, Vec<[u8; 3]>) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!(info.color_type, png::ColorType::Rgb);
    let pixels = buf[..info.buffer_size()]
        .chunks_exact(3)
        .map(|p| [p[0], p[1], p[2]])
        .collect();
    (info.width, info.height, pixels)
}

#[test]
fn png_shows_off_on_and_chosen_colours() {
    let dir = scratch("whatif-plot");
    let path = dir.path().join("whatif.png");
    draw(&grid(), &path, OutputFile::new(false)).unwrap();
    let (width, height, pixels) = decode_png(&path);
    assert_eq!((width, height), (1100, 700));
    for (colour, what) in [
        ([31, 119, 180], "off"),
        ([230, 110, 0], "on"),
        ([200, 0, 0], "chosen"),
        ([0, 0, 0], "front and text"),
    ] {
        let count = pixels.iter().filter(|p| **p == colour).count();
        assert!(count > 50, "{what}: {count} pixels of {colour:?}");
    }
    if let Some(out) = std::env::var_os("WHATIF_PLOT_KEEP") {
        std::fs::copy(&path, out).unwrap();
    }
}

#[test]
fn svg_names_the_series_and_labels_the_chosen_points() {
    let dir = scratch("whatif-plot");
    let path = dir.path().join("whatif.svg");
    draw(&grid(), &path, OutputFile::new(false)).unwrap();
    let svg = std::fs::read_to_string(&path).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..80.min(svg.len())]);
    for text in [
        "compression off",
        "compression on",
        "Pareto front",
        "chosen",
        "off 3 MiB",
        "on 3 MiB",
        "attributed memory (MiB)",
        "node reads",
    ] {
        assert!(svg.contains(text), "{text} missing");
    }
}

#[test]
fn the_front_of_the_grid_is_the_compressed_points_until_all_nodes_fit() {
    let points = grid();
    let front = pareto_front(&points);
    // On is cheaper at every budget up to 6 MiB (16,676 nodes x 360 B), where reads reach 0;
    // nothing with more memory is on the front.
    let expected: Vec<usize> = (0..points.len())
        .filter(|&i| points[i].compression && points[i].memory_bytes <= 6 << 20)
        .collect();
    assert_eq!(front, expected);
    assert_eq!(points[*front.last().unwrap()].node_reads, 0);
}

/// `whatif --plot FILE` follows the one output policy (issue 33, finding 9): an existing file
/// is refused unless forced, a symlink never written through, forced or not.
#[test]
fn the_plot_refuses_an_existing_file_and_never_writes_through_a_symlink() {
    let dir = scratch("whatif-plot-policy");
    for name in ["whatif.svg", "whatif.png"] {
        let path = dir.path().join(name);
        std::fs::write(&path, "precious").unwrap();
        let err = format!(
            "{:#}",
            draw(&grid(), &path, OutputFile::new(false)).unwrap_err()
        );
        assert!(
            err.contains("exists: refusing to overwrite it (--force replaces it)"),
            "{err}"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "precious");
        draw(&grid(), &path, OutputFile::new(true)).unwrap();
        assert_ne!(std::fs::read(&path).unwrap(), b"precious");

        let target = dir.path().join(format!("target-{name}"));
        std::fs::write(&target, "precious").unwrap();
        let link = dir.path().join(format!("link-{name}"));
        std::os::unix::fs::symlink(&target, &link).unwrap();
        for force in [false, true] {
            let err = format!(
                "{:#}",
                draw(&grid(), &link, OutputFile::new(force)).unwrap_err()
            );
            assert!(
                err.contains("is a symlink: refusing to write through it"),
                "{err}"
            );
        }
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious");
    }
}

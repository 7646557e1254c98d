//! One module per subcommand. Each parses its own arguments and wires a source to views.
mod cli;
pub(crate) mod daemon;
pub(crate) mod export;
pub(crate) mod fsstress;
pub(crate) mod probe;
pub(crate) mod record;
pub(crate) mod report;
pub(crate) mod sim;
pub(crate) mod stream;
pub(crate) mod top;
pub(crate) mod tune;
pub(crate) mod whatif;

use clap::Args;

pub use self::cli::main;

/// The shortest window: windows are bookkept one by one, so a nanosecond window would cost a
/// billion reports a second. The same limit as a recording's header (`record::MIN_WINDOW_NS`).
pub(crate) const MIN_WINDOW_S: f64 = 0.001;
/// The longest window: a day.
pub(crate) const MAX_WINDOW_S: f64 = 86_400.0;

/// The window length, shared by the subcommands that cut windows (top, stream, record).
#[derive(Args, Clone, Copy, Debug)]
pub(crate) struct WindowArg {
    /// Window length in seconds, 0.001 to 86400: counts, rates and lines are per window.
    #[arg(
        long = "window",
        value_name = "S",
        default_value_t = 1.0,
        allow_negative_numbers = true,
        value_parser = parse_window
    )]
    pub seconds: f64,
    /// The window's old name, refused in words: "interval" is only the knob.
    #[arg(long = "interval", hide = true, value_name = "S", value_parser = retired_interval)]
    pub retired_interval: Option<f64>,
}

/// `--interval` where a window was meant: an error that names the new flag.
fn retired_interval(_text: &str) -> Result<f64, String> {
    Err(
        "--interval is now --window (\"interval\" names only the knob \
         node_compress_interval)"
            .into(),
    )
}

/// A number of seconds, or why it is not one.
fn parse_f64(text: &str) -> Result<f64, String> {
    let value: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number"))?;
    if value.is_nan() {
        return Err(format!("{text:?} is not a number"));
    }
    Ok(value)
}

/// `--window`: between [`MIN_WINDOW_S`] and [`MAX_WINDOW_S`].
pub(crate) fn parse_window(text: &str) -> Result<f64, String> {
    let seconds = parse_f64(text)?;
    if !(MIN_WINDOW_S..=MAX_WINDOW_S).contains(&seconds) {
        return Err(format!(
            "{seconds} s is out of range: a window is {MIN_WINDOW_S} to {MAX_WINDOW_S} seconds"
        ));
    }
    Ok(seconds)
}

/// `--duration`: a positive, finite number of seconds (negative ones reach this parser, with
/// `allow_negative_numbers`, to be refused in words).
pub(crate) fn parse_duration(text: &str) -> Result<f64, String> {
    let seconds = parse_f64(text)?;
    if !(seconds.is_finite() && seconds > 0.0) {
        return Err(format!(
            "{seconds} s: a duration must be positive and finite"
        ));
    }
    Ok(seconds)
}

/// The one pipeline a live command runs: `source` into a model cut in `window`s, its apps named
/// by `packages` (a packages.list) or else by the list the source brings.
/// `image`: `--image`, which tells node types by nid instead of the source's own image.
pub(crate) fn live_pipeline(
    source: Box<dyn crate::source::Source>,
    window: &WindowArg,
    packages: Option<&std::path::Path>,
    image: Option<&std::path::Path>,
) -> anyhow::Result<crate::pipeline::Pipeline> {
    let packages = crate::model::Packages::from_file_or(packages, source.packages_list())?;
    // Read before the pipeline starts its windows: a device's NAT takes a moment.
    let image = image.map(crate::model::NodeImage::load).transpose()?;
    let pipeline = crate::pipeline::Pipeline::new(
        source,
        crate::model::ModelConfig {
            window_ns: (window.seconds * 1e9) as u64,
            packages,
            ..crate::model::ModelConfig::default()
        },
    )?;
    Ok(match image {
        Some(image) => pipeline.with_node_image(image),
        None => pipeline,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_durations_and_speeds_outside_their_range_are_refused_in_words() {
        assert_eq!(parse_window("0.5"), Ok(0.5));
        assert_eq!(parse_window("0.001"), Ok(0.001));
        for bad in ["1e-9", "0", "-1", "1e300", "inf", "NaN", "x"] {
            let err = parse_window(bad).unwrap_err();
            assert!(
                err.contains("window") || err.contains("not a number"),
                "{bad}: {err}"
            );
        }
        assert_eq!(parse_duration("2"), Ok(2.0));
        for bad in ["-1", "0", "inf", "NaN"] {
            let err = parse_duration(bad).unwrap_err();
            assert!(
                err.contains("positive") || err.contains("not a number"),
                "{bad}: {err}"
            );
        }
    }
}

//! One module per subcommand. Each parses its own arguments and wires a source to views.
pub mod export;
pub mod probe;
pub mod record;
pub mod report;
pub mod sim;
pub mod stream;
pub mod top;
pub mod tune;

use clap::Args;

/// The window length, shared by the subcommands that cut windows (top, stream, record).
#[derive(Args, Clone, Copy, Debug)]
pub struct WindowArg {
    /// Window length in seconds: counts, rates and lines are per window (`--interval` is the
    /// old name).
    #[arg(
        long = "window",
        visible_alias = "interval",
        value_name = "S",
        default_value_t = 1.0
    )]
    pub seconds: f64,
}

//! One module per subcommand. Each parses its own arguments and wires a source to views.
pub mod probe;
pub mod record;
pub mod report;
pub mod sim;
pub mod stream;
pub mod top;
pub mod tune;

//! Views: what a person or a program reads of the model. A view never reaches into a source.
pub(crate) mod checkpoint_table;
pub(crate) mod compare_text;
pub mod jsonline;
pub(crate) mod lines;
pub mod metrics;
pub(crate) mod perfetto;
pub(crate) mod probe_table;
pub mod recorder;
pub(crate) mod report_text;
pub(crate) mod rolling;
pub(crate) mod sim_tables;
pub(crate) mod socket;
pub(crate) mod stdout;
pub mod tui;
pub(crate) mod whatif_compressors;
pub mod whatif_plot;
pub(crate) mod whatif_tables;

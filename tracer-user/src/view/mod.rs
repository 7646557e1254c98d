//! Views: what a person or a program reads of the model. A view never reaches into a source.
pub mod checkpoint_table;
pub mod compare_text;
pub mod jsonline;
pub mod lines;
pub mod metrics;
pub mod perfetto;
pub mod recorder;
pub mod report_text;
pub mod rolling;
pub mod sim_tables;
pub mod socket;
pub mod stdout;
pub mod tui;
pub mod whatif_compressors;
pub mod whatif_plot;
pub mod whatif_tables;

//! Shared check code for the fuzz targets. `tests/fuzz_corpus.rs` in the main crate includes
//! these same files with `#[path]` and replays the committed corpus through them.

pub mod config;
pub mod junctions;
pub mod keyed;
pub mod model;

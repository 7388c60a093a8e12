//! Replays the committed fuzz corpus (`fuzz/corpus/<target>/`) through the very check code
//! the fuzz targets run, so plain `cargo test` exercises it without a fuzzer. Also runs a
//! few hundred deterministic pseudo-random inputs through both checks.
//!
//! The `junctions` target's corpus is replayed by `tests/junction_props.rs` instead: its
//! harness disables the deadline timer's thread for the whole process, before any bounded
//! wait, which this binary's `ops` checks (bounded waits of an hour) would race with.

#[path = "../fuzz/src/config.rs"]
mod config;
#[path = "../fuzz/src/keyed.rs"]
mod keyed;
#[path = "../fuzz/src/model.rs"]
mod model;

#[path = "common/replay.rs"]
mod replay;

use replay::{replay, xorshift};

#[test]
fn ops_corpus_matches_reference_model() {
    replay("ops", model::run_ops);
}

#[test]
fn config_parsers_corpus_never_panics_and_errors_name_key() {
    replay("config_parsers", config::run_config);
}

#[test]
fn ops_pseudo_random_sequences_match_reference_model() {
    let mut state = 0x9E37_79B9_7F4A_7C15;
    for len in (0..400).map(|i| 2 + i % 200) {
        let input: Vec<u8> = (0..len).map(|_| xorshift(&mut state)).collect();
        model::run_ops(&input);
    }
}

#[test]
fn config_pseudo_random_inputs_never_panic() {
    let mut state = 0x2545_F491_4F6C_DD1D;
    for len in (0..400).map(|i| i % 120) {
        let input: Vec<u8> = (0..len).map(|_| xorshift(&mut state)).collect();
        config::run_config(&input);
    }
}

#[test]
fn keyed_corpus_matches_reference_model() {
    replay("keyed", keyed::run_keyed_ops);
}

/// The `keyed` target's check (issue 13) on deterministic pseudo-random inputs, which reach
/// combinations the corpus's coverage-based selection may drop.
#[test]
fn keyed_pseudo_random_sequences_match_reference_model() {
    let mut state = 0xD1B5_4A32_D192_ED03;
    for len in (0..600).map(|i| 3 + i % 150) {
        let input: Vec<u8> = (0..len).map(|_| xorshift(&mut state)).collect();
        keyed::run_keyed_ops(&input);
    }
}

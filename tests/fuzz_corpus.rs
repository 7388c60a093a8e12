//! Replays the committed fuzz corpus (`fuzz/corpus/<target>/`) through the very check code
//! the fuzz targets run, so plain `cargo test` exercises it without a fuzzer. Also runs a
//! few hundred deterministic pseudo-random inputs through both checks.

#[path = "../fuzz/src/config.rs"]
mod config;
#[path = "../fuzz/src/keyed.rs"]
mod keyed;
#[path = "../fuzz/src/model.rs"]
mod model;

use std::path::PathBuf;

/// The committed corpus of `target`, plus its hand-written seeds if it has any.
fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let fuzz = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let dir = fuzz.join("corpus").join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("corpus entry").path())
        .collect();
    if let Ok(seeds) = std::fs::read_dir(fuzz.join("seeds").join(target)) {
        files.extend(seeds.map(|entry| entry.expect("seed entry").path()));
    }
    files.sort();
    let inputs: Vec<_> = files
        .into_iter()
        .map(|path| {
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (path, bytes)
        })
        .collect();
    assert!(inputs.len() >= 10, "{}: only {} corpus files", dir.display(), inputs.len());
    inputs
}

/// Runs `check` on every input, naming the file that fails.
fn replay(target: &str, check: fn(&[u8])) {
    for (path, bytes) in corpus(target) {
        let outcome = std::panic::catch_unwind(|| check(&bytes));
        if let Err(panic) = outcome {
            eprintln!("corpus file {} failed; rerun with BULKHEAD_FUZZ_TRACE=1", path.display());
            std::panic::resume_unwind(panic);
        }
    }
}

#[test]
fn ops_corpus_matches_reference_model() {
    replay("ops", model::run_ops);
}

#[test]
fn config_parsers_corpus_never_panics_and_errors_name_key() {
    replay("config_parsers", config::run_config);
}

/// A fixed xorshift stream: the same inputs on every run.
fn xorshift(state: &mut u64) -> u8 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    (*state >> 24) as u8
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

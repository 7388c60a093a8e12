//! Reading and replaying a committed fuzz corpus, shared by `tests/fuzz_corpus.rs` and
//! `tests/junction_props.rs` (each includes this file with `#[path]`).

use std::path::PathBuf;

/// The committed corpus of `target` (`fuzz/corpus/<target>/`, if any), plus its hand-made
/// seeds (`fuzz/seeds/<target>/`, if any): at least 10 inputs in all.
pub fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let fuzz = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut files = Vec::new();
    for dir in [fuzz.join("corpus").join(target), fuzz.join("seeds").join(target)] {
        if let Ok(entries) = std::fs::read_dir(&dir) {
            files.extend(entries.map(|entry| entry.expect("corpus entry").path()));
        }
    }
    files.sort();
    let inputs: Vec<_> = files
        .into_iter()
        .map(|path| {
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (path, bytes)
        })
        .collect();
    assert!(inputs.len() >= 10, "fuzz/*/{target}: only {} corpus files", inputs.len());
    inputs
}

/// Runs `check` on every input, naming the file that fails.
pub fn replay(target: &str, check: fn(&[u8])) {
    for (path, bytes) in corpus(target) {
        let outcome = std::panic::catch_unwind(|| check(&bytes));
        if let Err(panic) = outcome {
            eprintln!("corpus file {} failed; rerun with BULKHEAD_FUZZ_TRACE=1", path.display());
            std::panic::resume_unwind(panic);
        }
    }
}

/// A fixed xorshift stream: the same inputs on every run.
pub fn xorshift(state: &mut u64) -> u8 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    (*state >> 24) as u8
}

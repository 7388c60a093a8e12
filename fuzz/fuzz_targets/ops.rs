//! Decodes bytes into operations on one bulkhead and checks every observable against a
//! sequential reference model after each step (see `src/engine/model.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    bulkhead_fuzz::model::run_ops(data);
});

//! Decodes bytes into operations on a keyed bulkhead (keys, a shared total, a bound on live
//! keys, a fallback key, eviction) and checks every observable against a sequential model
//! after each step (see `src/keyed/mod.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    bulkhead_fuzz::keyed::run_keyed_ops(data);
});

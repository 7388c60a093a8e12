//! Decodes bytes into steps over every feature that shares the queue (issue 29: weights,
//! classes, headroom, the three orders, timer expiry of unpolled futures, close and drain,
//! change_config, an adaptive limit, wakers that panic or re-enter) and checks the engine's
//! invariants, work conservation first, after every step (see `fuzz/src/junctions.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    bulkhead_fuzz::junctions::run_junctions(data);
});

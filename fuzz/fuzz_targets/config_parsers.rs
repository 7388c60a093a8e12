//! Feeds arbitrary bytes to every configuration entry point (see `src/bulkhead/config.rs`): none may
//! panic, and every error must name a key or a position.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    bulkhead_fuzz::config::run_config(data);
});

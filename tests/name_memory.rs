//! Issue 13: a bulkhead's name is not leaked. Creating and dropping 100 000 bulkheads with
//! distinct short names (stored inline, up to 23 bytes), each refusing a call and telling a
//! listener, leaves the live heap where it started; distinct long names are kept once each
//! up to a documented cap (about 1.6 MiB), and past it are shortened, so another 100 000 of
//! them leave the heap where it was; and a refusal allocates nothing, whatever the name.
//!
//! Memory is the process-wide live heap, counted by a global allocator (`stats_alloc`), so
//! this file has one test, which runs the checks one after the other: with more, the test
//! harness's own thread allocates (reporting one test, starting the next) while another
//! test is measuring.

use std::alloc::System;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

use bulkhead::{Bulkhead, BulkheadConfig, BulkheadFull, RejectReason};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const BULKHEADS: usize = 100_000;
/// What the heap may keep after the churn: a few pages of allocator or harness noise. A
/// leak of the names alone would be over a megabyte (100 000 names of 10 to 60 bytes).
const SLACK: isize = 16 * 1024;
/// The documented bound on long names (src/observe/name.rs): 1 MiB of names and a set of at most
/// 16 384 entries (32 768 buckets of 17 bytes).
const LONG_NAMES_BOUND: isize = (1 << 20) + 32_768 * 17;

fn live_bytes() -> isize {
    let s = GLOBAL.stats();
    // stats_alloc adds a realloc's growth to `bytes_allocated` and its shrinkage to
    // `bytes_deallocated`, so this is the live heap.
    s.bytes_allocated as isize - s.bytes_deallocated as isize
}

/// A distinct short name (at most 23 bytes).
fn short(i: usize) -> String {
    format!("tenant-{i}")
}

/// A distinct long name (over 23 bytes), from a series `s`.
fn long(s: usize, i: usize) -> String {
    format!("https://downstream-{s}-{i}.example.internal:8443/api/v2/accounts")
}

fn full(name: String) -> Bulkhead {
    Bulkhead::new(name, BulkheadConfig::builder().max_concurrent_calls(0).build().unwrap())
}

/// One bulkhead's life: created, a listener registered, a call refused (the error and the
/// event both carry the name), then everything dropped. Returns the name the error gave.
fn churn_one(name: String, heard: &Arc<AtomicUsize>) -> String {
    let bulkhead = full(name);
    let sink = Arc::clone(heard);
    bulkhead.on_event(move |event| {
        sink.fetch_add(event.bulkhead_name().len(), Relaxed);
    });
    let refused = bulkhead.try_acquire().unwrap_err();
    assert_eq!(refused.reason(), RejectReason::Full);
    refused.bulkhead_name().to_owned()
}

fn distinct_short_names_churned_leave_the_heap_where_it_started() {
    let heard = Arc::new(AtomicUsize::new(0));
    // Warm-up: one-time costs (thread-locals, lazy statics).
    for i in 0..16 {
        churn_one(short(i), &heard);
    }
    heard.store(0, Relaxed);
    let before = live_bytes();
    let mut expected_heard = 0;
    for i in 0..BULKHEADS {
        // `short(i)` is built twice, outside the measured growth: both copies are dropped.
        assert_eq!(churn_one(short(i), &heard), short(i));
        expected_heard += short(i).len();
    }
    let kept = live_bytes() - before;
    // Every listener saw its bulkhead's whole name.
    assert_eq!(heard.load(Relaxed), expected_heard);
    println!(
        "short names: live heap after {BULKHEADS} bulkheads created and dropped: {kept:+} bytes"
    );
    assert!(kept <= SLACK, "{kept} bytes still live after {BULKHEADS} short-named bulkheads");
}

fn distinct_long_names_stay_within_the_cap() {
    let heard = Arc::new(AtomicUsize::new(0));
    let before = live_bytes();
    let mut shortened = 0;
    for i in 0..BULKHEADS {
        let given = churn_one(long(1, i), &heard);
        if given != long(1, i) {
            // Past the cap: the first bytes of the name and an ellipsis, at most 23 bytes.
            assert!(given.len() <= 23 && given.ends_with('…'), "{given:?}");
            assert!(long(1, i).starts_with(given.trim_end_matches('…')), "{given:?}");
            shortened += 1;
        }
    }
    let kept = live_bytes() - before;
    println!("long names: {kept:+} bytes kept after {BULKHEADS} bulkheads, {shortened} shortened");
    assert!(shortened > 0, "100 000 long names of ~70 bytes exceed the 1 MiB cap");
    assert!(kept <= LONG_NAMES_BOUND + SLACK, "{kept} bytes kept by long names");
    // The cap holds: another series of distinct long names keeps nothing more.
    let before = live_bytes();
    for i in 0..BULKHEADS {
        churn_one(long(2, i), &heard);
    }
    let more = live_bytes() - before;
    assert!(more <= SLACK, "{more} more bytes kept past the cap");
}

fn an_error_keeps_its_name_after_the_bulkhead_is_gone() {
    for name in [short(7), long(1, 7)] {
        let refused: BulkheadFull = full(name.clone()).try_acquire().unwrap_err();
        // The bulkhead is gone; the error still names it.
        assert_eq!(refused.bulkhead_name(), name);
        assert!(refused.to_string().contains(&name));
        let copy = std::convert::identity(refused).clone();
        assert_eq!(copy.bulkhead_name(), name);
    }
}

fn a_refusal_allocates_nothing_whatever_the_name_length() {
    for name in [short(0), long(1, 0)] {
        let bulkhead = full(name.clone());
        let _ = bulkhead.try_acquire();
        let region = Region::new(GLOBAL);
        for _ in 0..1_000 {
            let refused = bulkhead.try_acquire().unwrap_err();
            assert_eq!(refused.bulkhead_name().len(), name.len());
        }
        let change = region.change();
        assert_eq!((change.allocations, change.reallocations), (0, 0), "name {name:?}");
    }
}

#[test]
fn names_are_freed_with_their_last_holder_or_capped() {
    distinct_short_names_churned_leave_the_heap_where_it_started();
    distinct_long_names_stay_within_the_cap();
    an_error_keeps_its_name_after_the_bulkhead_is_gone();
    a_refusal_allocates_nothing_whatever_the_name_length();
}

//! Issue 13: a bulkhead's name is not leaked. Creating and dropping 100 000 bulkheads with
//! distinct names (short ones stored inline, long ones shared behind an `Arc<str>`), each
//! refusing a call and telling a listener, leaves the live heap where it started; and a
//! refusal allocates nothing, whatever the name's length.
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

fn live_bytes() -> isize {
    let s = GLOBAL.stats();
    // stats_alloc adds a realloc's growth to `bytes_allocated` and its shrinkage to
    // `bytes_deallocated`, so this is the live heap.
    s.bytes_allocated as isize - s.bytes_deallocated as isize
}

/// A distinct name: even `i` short (inline), odd `i` longer than any inline capacity.
fn name(i: usize) -> String {
    if i % 2 == 0 {
        format!("tenant-{i}")
    } else {
        format!("https://downstream-{i}.example.internal:8443/api/v2/accounts")
    }
}

fn full(name: String) -> Bulkhead {
    Bulkhead::new(name, BulkheadConfig::builder().max_concurrent_calls(0).build().unwrap())
}

/// One bulkhead's life: created, a listener registered, a call refused (the error and the
/// event both carry the name), then everything dropped.
fn churn_one(i: usize, heard: &Arc<AtomicUsize>) {
    let bulkhead = full(name(i));
    let sink = Arc::clone(heard);
    bulkhead.on_event(move |event| {
        sink.fetch_add(event.bulkhead_name().len(), Relaxed);
    });
    let refused = bulkhead.try_acquire().unwrap_err();
    assert_eq!(refused.reason(), RejectReason::Full);
    assert_eq!(refused.bulkhead_name(), name(i));
}

fn distinct_names_churned_leave_the_heap_where_it_started() {
    let heard = Arc::new(AtomicUsize::new(0));
    // Warm-up: one-time costs (thread-locals, lazy statics) of both name kinds.
    for i in 0..16 {
        churn_one(i, &heard);
    }
    let before = live_bytes();
    let mut expected_heard = 0;
    for i in 0..BULKHEADS {
        churn_one(i, &heard);
        expected_heard += name(i).len();
    }
    let kept = live_bytes() - before;
    // Every listener saw its bulkhead's whole name.
    let warm_up_heard: usize = (0..16).map(|i| name(i).len()).sum();
    assert_eq!(heard.load(Relaxed), warm_up_heard + expected_heard);
    println!("live heap after {BULKHEADS} bulkheads created and dropped: {kept:+} bytes");
    assert!(
        kept <= SLACK,
        "{kept} bytes still live after {BULKHEADS} bulkheads with distinct names were dropped"
    );
}

fn an_error_keeps_its_name_after_the_bulkhead_is_gone() {
    let long = name(1);
    let before = live_bytes();
    let refused: BulkheadFull = full(long.clone()).try_acquire().unwrap_err();
    // The bulkhead is gone; the long name lives on in the error (its `Arc<str>`) ...
    assert!(live_bytes() - before >= long.len() as isize);
    assert_eq!(refused.bulkhead_name(), long);
    assert!(refused.to_string().contains(&long));
    let copy = refused.clone();
    drop(refused);
    assert_eq!(copy.bulkhead_name(), long);
    // ... and goes with the last error that carries it.
    drop(copy);
    assert!(live_bytes() - before <= 0, "{} bytes kept", live_bytes() - before);
}

fn a_refusal_allocates_nothing_whatever_the_name_length() {
    for (i, bulkhead) in [full(name(0)), full(name(1))].iter().enumerate() {
        let expected_len = name(i).len();
        let _ = bulkhead.try_acquire();
        let region = Region::new(GLOBAL);
        for _ in 0..1_000 {
            let refused = bulkhead.try_acquire().unwrap_err();
            assert_eq!(refused.bulkhead_name().len(), expected_len);
        }
        let change = region.change();
        assert_eq!((change.allocations, change.reallocations), (0, 0), "name {:?}", name(i));
    }
}

#[test]
fn names_are_freed_with_their_last_holder() {
    distinct_names_churned_leave_the_heap_where_it_started();
    an_error_keeps_its_name_after_the_bulkhead_is_gone();
    a_refusal_allocates_nothing_whatever_the_name_length();
}

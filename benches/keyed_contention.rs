//! The keyed bulkhead's map under two threads on different keys (the machine this suite
//! targets has 2 cores): `try_acquire` + drop on one live key of 1 000, alone and while a
//! second thread does the same on another key back to back. With one lock for the whole
//! map the two threads write the same lock word on every call; with a sharded map they
//! share nothing unless their keys hash to the same shard.
//!
//! Run with `cargo bench --bench keyed_contention`. Times are wall-clock on a shared
//! machine: compare runs of the same session only.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Instant;

use bulkhead::keyed::KeyedBulkhead;
use bulkhead::BulkheadConfig;
use criterion::{Bencher, Criterion};

/// Keys 0..1 000 live, 16 slots each, no total.
fn keyed() -> Arc<KeyedBulkhead<u64>> {
    let config = BulkheadConfig::builder().max_concurrent_calls(16).build().expect("valid");
    let keyed = KeyedBulkhead::builder("bench").default_config(config).build().expect("valid");
    for key in 0..1_000 {
        drop(keyed.try_acquire(&key).expect("a free slot"));
    }
    Arc::new(keyed)
}

fn acq_rel(keyed: &KeyedBulkhead<u64>, key: u64) {
    drop(black_box(keyed.try_acquire(black_box(&key))));
}

/// Times `iters` calls on key 1 while, if `busy`, another thread calls key 2 in a loop.
fn measure(b: &mut Bencher<'_>, keyed: &Arc<KeyedBulkhead<u64>>, busy: bool) {
    b.iter_custom(|iters| {
        let stop = Arc::new(AtomicBool::new(false));
        let started = Arc::new(Barrier::new(2));
        let other = busy.then(|| {
            let (keyed, stop, started) = (Arc::clone(keyed), Arc::clone(&stop), started.clone());
            thread::spawn(move || {
                started.wait();
                while !stop.load(Ordering::Relaxed) {
                    acq_rel(&keyed, 2);
                }
            })
        });
        if busy {
            started.wait();
        }
        let start = Instant::now();
        for _ in 0..iters {
            acq_rel(keyed, 1);
        }
        let elapsed = start.elapsed();
        stop.store(true, Ordering::Relaxed);
        if let Some(other) = other {
            other.join().expect("the other thread does not panic");
        }
        elapsed
    })
}

fn keyed_two_keys(c: &mut Criterion) {
    let mut group = c.benchmark_group("keyed_two_keys");
    let shared = keyed();
    group.bench_function("alone", |b| measure(b, &shared, false));
    group.bench_function("other_key_busy", |b| measure(b, &shared, true));
    group.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    keyed_two_keys(&mut c);
    c.final_summary();
}

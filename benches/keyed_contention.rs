//! The keyed bulkhead's map under two threads on different keys (the machine this suite
//! targets has 2 cores): `try_acquire` + drop on one live key of 1 000, alone and while a
//! second thread does the same on another key back to back. With one lock for the whole
//! map the two threads write the same lock word on every call; with a sharded map they
//! share nothing unless their keys hash to the same shard.
//!
//! Issue 21 adds the reference: a plain bulkhead per thread (the same two-thread loop on two
//! separate `Bulkhead`s, which share nothing), and the keyed pair with a hasher that places
//! the two keys in different shards (`keyed_shards/different`) or in the same one
//! (`keyed_shards/same`), so the shard lock's cost shows on its own.
//!
//! Run with `cargo bench --bench keyed_contention`. Times are wall-clock on a shared
//! machine: compare runs of the same session only.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Instant;

use std::hash::{BuildHasherDefault, Hasher};

use bulkhead::keyed::KeyedBulkhead;
use bulkhead::{Bulkhead, BulkheadConfig};
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

/// Hashes key `k` to `k << 40 | k`: the keyed bulkhead's shard is bits 40.. of the hash,
/// so key `k` lands in shard `k % shards`.
#[derive(Default)]
struct ShardHasher(u64);

impl Hasher for ShardHasher {
    fn write(&mut self, _bytes: &[u8]) {
        unreachable!("u64 keys")
    }

    fn write_u64(&mut self, k: u64) {
        self.0 = k << 40 | k;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type Placed = KeyedBulkhead<u64, BuildHasherDefault<ShardHasher>>;

/// Keys 0..1 000 live, 16 slots each, 8 shards, keys placed by [`ShardHasher`].
fn placed() -> Arc<Placed> {
    let config = BulkheadConfig::builder().max_concurrent_calls(16).build().expect("valid");
    let keyed = KeyedBulkhead::builder("bench")
        .default_config(config)
        .shards(8)
        .hasher(BuildHasherDefault::<ShardHasher>::default())
        .build()
        .expect("valid");
    for key in 0..1_000 {
        drop(keyed.try_acquire(&key).expect("a free slot"));
    }
    Arc::new(keyed)
}

/// Times `iters` calls of `mine` while, if `busy`, another thread runs `theirs` in a loop.
fn race(
    b: &mut Bencher<'_>,
    mine: impl Fn() + Sync,
    theirs: impl Fn() + Send + Sync + Clone + 'static,
    busy: bool,
) {
    b.iter_custom(|iters| {
        let stop = Arc::new(AtomicBool::new(false));
        let started = Arc::new(Barrier::new(2));
        let other = busy.then(|| {
            let (theirs, stop, started) = (theirs.clone(), Arc::clone(&stop), started.clone());
            thread::spawn(move || {
                started.wait();
                while !stop.load(Ordering::Relaxed) {
                    theirs();
                }
            })
        });
        if busy {
            started.wait();
        }
        let start = Instant::now();
        for _ in 0..iters {
            mine();
        }
        let elapsed = start.elapsed();
        stop.store(true, Ordering::Relaxed);
        if let Some(other) = other {
            other.join().expect("the other thread does not panic");
        }
        elapsed
    })
}

/// The reference (a plain bulkhead per thread) and the keyed pair in different shards and
/// in the same shard, each alone and with the other thread busy.
fn keyed_shards(c: &mut Criterion) {
    let mut group = c.benchmark_group("keyed_shards");
    let config = || BulkheadConfig::builder().max_concurrent_calls(16).build().expect("valid");
    let (mine, theirs) =
        (Arc::new(Bulkhead::new("a", config())), Arc::new(Bulkhead::new("b", config())));
    for busy in [false, true] {
        let suffix = if busy { "other_busy" } else { "alone" };
        let (a, b2) = (Arc::clone(&mine), Arc::clone(&theirs));
        group.bench_function(format!("plain_per_thread/{suffix}"), |b| {
            race(
                b,
                || drop(black_box(a.try_acquire())),
                {
                    let b2 = Arc::clone(&b2);
                    move || drop(black_box(b2.try_acquire()))
                },
                busy,
            )
        });
        let keyed = placed();
        // Keys 1 and 2: shards 1 and 2. Keys 1 and 9: both in shard 1.
        for (name, other_key) in [("different", 2), ("same", 9)] {
            let (k1, k2) = (Arc::clone(&keyed), Arc::clone(&keyed));
            group.bench_function(format!("{name}/{suffix}"), |b| {
                race(
                    b,
                    || drop(black_box(k1.try_acquire(black_box(&1)))),
                    {
                        let k2 = Arc::clone(&k2);
                        move || drop(black_box(k2.try_acquire(black_box(&other_key))))
                    },
                    busy,
                )
            });
        }
    }
    group.finish();
}

/// Times `iters` calls on key 1 while, if `busy`, another thread calls key 2 in a loop.
fn measure(b: &mut Bencher<'_>, keyed: &Arc<KeyedBulkhead<u64>>, busy: bool) {
    let other = Arc::clone(keyed);
    race(b, || acq_rel(keyed, 1), move || acq_rel(&other, 2), busy);
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
    keyed_shards(&mut c);
    c.final_summary();
}

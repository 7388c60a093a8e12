//! Guaranteed shares against a noisy neighbour (issue 32): one tenant flooding at 10x its
//! share, two tenants at steady load, through a keyed bulkhead with a shared total of 12,
//! in four setups:
//!
//! - `alone`: the steady tenants without the flood (their baseline);
//! - `no-guarantees`: each key may use the whole total, no shares (FIFO at the total);
//! - `static`: each key capped at its share of 4 (no borrowing);
//! - `shares`: each key may use the whole total, with a guaranteed share of 4.
//!
//! `cargo run --release --example noisy_neighbour_shares [seconds per setup, default 2]`
//!
//! Every call holds its slot for 4 ms (a sleep standing for the downstream). A steady tenant
//! runs 3 threads, each calling, then pausing 2 ms (within its share of 4); the flood runs
//! 40 threads calling back to back (10x its share). Callers wait at most 100 ms. Printed per
//! setup and tenant: goodput (calls admitted per second), the p99 of the time from asking
//! to finishing, refusals; and the total's utilisation (its mean calls in flight, sampled
//! every millisecond, over its 12 slots).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bulkhead::keyed::KeyedBulkhead;
use bulkhead::BulkheadConfig;

const TOTAL: usize = 12;
const SHARE: u32 = 4;
const HOLD: Duration = Duration::from_millis(4);
const PAUSE: Duration = Duration::from_millis(2);
const MAX_WAIT: Duration = Duration::from_millis(100);
const STEADY_THREADS: usize = 3;
const FLOOD_THREADS: usize = 40;

#[derive(Clone, Copy, PartialEq)]
enum Setup {
    Alone,
    NoGuarantees,
    Static,
    Shares,
}

impl Setup {
    fn name(self) -> &'static str {
        match self {
            Setup::Alone => "alone",
            Setup::NoGuarantees => "no-guarantees",
            Setup::Static => "static",
            Setup::Shares => "shares",
        }
    }

    fn build(self) -> KeyedBulkhead<&'static str> {
        let config = |n| {
            BulkheadConfig::builder()
                .max_concurrent_calls(n)
                .max_wait_duration(MAX_WAIT)
                .build()
                .expect("valid config")
        };
        let key_limit = if self == Setup::Static { SHARE as usize } else { TOTAL };
        let builder = KeyedBulkhead::<&str>::builder("api")
            .default_config(config(key_limit))
            .total(config(TOTAL))
            .max_keys(3);
        let builder = if self == Setup::Shares { builder.guaranteed_share(SHARE) } else { builder };
        builder.build().expect("valid keyed config")
    }
}

#[derive(Default)]
struct Tenant {
    latencies: Mutex<Vec<Duration>>,
    refused: AtomicU64,
}

fn run(setup: Setup, run_for: Duration) {
    let keyed = Arc::new(setup.build());
    let stop = Arc::new(AtomicBool::new(false));
    let tenants: Vec<(&'static str, Arc<Tenant>)> = ["steady-a", "steady-b", "flood"]
        .into_iter()
        .map(|name| (name, Arc::new(Tenant::default())))
        .collect();
    let mut threads = Vec::new();
    for (name, tenant) in &tenants {
        let (count, pause) = match *name {
            "flood" if setup == Setup::Alone => continue,
            "flood" => (FLOOD_THREADS, Duration::ZERO),
            _ => (STEADY_THREADS, PAUSE),
        };
        for _ in 0..count {
            let (keyed, stop, tenant, name) =
                (Arc::clone(&keyed), Arc::clone(&stop), Arc::clone(tenant), *name);
            threads.push(std::thread::spawn(move || {
                let mut latencies = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let asked = Instant::now();
                    match keyed.acquire(&name) {
                        Ok(permit) => {
                            std::thread::sleep(HOLD);
                            drop(permit);
                            latencies.push(asked.elapsed());
                        }
                        Err(_) => {
                            tenant.refused.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    if !pause.is_zero() {
                        std::thread::sleep(pause);
                    }
                }
                tenant.latencies.lock().expect("no panic").extend(latencies);
            }));
        }
    }
    // The sampler: the total's calls in flight, every millisecond.
    let start = Instant::now();
    let (mut samples, mut in_flight) = (0u64, 0u64);
    while start.elapsed() < run_for {
        in_flight += keyed.total_metrics().expect("a total").in_flight_calls() as u64;
        samples += 1;
        std::thread::sleep(Duration::from_millis(1));
    }
    stop.store(true, Ordering::Relaxed);
    let elapsed = start.elapsed().as_secs_f64();
    for thread in threads {
        thread.join().expect("no panic");
    }
    let utilisation = in_flight as f64 / samples as f64 / TOTAL as f64 * 100.0;
    for (name, tenant) in &tenants {
        if setup == Setup::Alone && *name == "flood" {
            continue;
        }
        let mut latencies = tenant.latencies.lock().expect("no panic").clone();
        latencies.sort();
        let p99 = latencies
            .get((latencies.len() * 99 / 100).min(latencies.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default();
        println!(
            "{:<14} {:<9} goodput {:>7.0}/s  p99 {:>6.1} ms  refused {:>6}",
            setup.name(),
            name,
            latencies.len() as f64 / elapsed,
            p99.as_secs_f64() * 1e3,
            tenant.refused.load(Ordering::Relaxed),
        );
    }
    println!("{:<14} total     utilisation {utilisation:.1} % of {TOTAL} slots", setup.name());
}

fn main() {
    let seconds: f64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(2.0);
    let run_for = Duration::from_secs_f64(seconds);
    for setup in [Setup::Alone, Setup::NoGuarantees, Setup::Static, Setup::Shares] {
        run(setup, run_for);
    }
}

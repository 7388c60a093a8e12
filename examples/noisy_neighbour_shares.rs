//! Guaranteed shares against a noisy neighbour (issue 32): one tenant flooding at 10x its
//! share, two tenants at steady load, through a keyed bulkhead with a shared total of 12,
//! in four setups:
//!
//! - `alone`: the steady tenants without the flood (their baseline);
//! - `no-guarantees`: each key may use the whole total, no shares (FIFO at the total);
//! - `static`: each key capped at its share of 4 (no borrowing);
//! - `shares`: each key may use the whole total, with a guaranteed share of 4;
//! - `shares+headroom`: as `shares`, the flood's calls marked `Criticality::Sheddable` and
//!   the total keeping 2 slots free of sheddable calls (`sheddable_headroom(2)`): an owner
//!   finds one of those free instead of waiting for a lent slot to come back.
//!
//! `cargo run --release --example noisy_neighbour_shares [seconds per setup, default 2] [closed]`
//!
//! Every call holds its slot for 4 ms (a sleep standing for the downstream). A steady tenant
//! runs 3 threads, each starting a call every 6 ms on a fixed schedule (a steady load: 500
//! calls/s, 2 slots busy on average, 3 at most, within its share of 4; a thread that falls
//! behind its schedule calls at once until it catches up). With `closed`, each thread
//! instead calls, then pauses 2 ms (a closed loop: its offered load falls as its calls wait,
//! so any wait at all costs goodput). The flood runs 40 threads calling back to back (10x
//! its share). Callers wait at most 100 ms. Printed per setup and tenant: goodput (calls
//! admitted per second), the p99 of the time from asking to finishing, refusals; and the
//! total's utilisation (its mean calls in flight, sampled every millisecond, over its 12
//! slots).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bulkhead::keyed::KeyedBulkhead;
use bulkhead::{BulkheadConfig, Criticality};

const TOTAL: usize = 12;
const SHARE: u32 = 4;
const HOLD: Duration = Duration::from_millis(4);
const PAUSE: Duration = Duration::from_millis(2);
/// A steady thread's schedule: one call every `HOLD + PAUSE`.
const PERIOD: Duration = Duration::from_millis(6);
const MAX_WAIT: Duration = Duration::from_millis(100);
const STEADY_THREADS: usize = 3;
const FLOOD_THREADS: usize = 40;
/// `shares+headroom`: the total's slots sheddable calls must leave free.
const HEADROOM: usize = 2;

#[derive(Clone, Copy, PartialEq)]
enum Setup {
    Alone,
    NoGuarantees,
    Static,
    Shares,
    SharesHeadroom,
}

impl Setup {
    fn name(self) -> &'static str {
        match self {
            Setup::Alone => "alone",
            Setup::NoGuarantees => "no-guarantees",
            Setup::Static => "static",
            Setup::Shares => "shares",
            Setup::SharesHeadroom => "shares+headroom",
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
        let headroom = if self == Setup::SharesHeadroom { HEADROOM } else { 0 };
        let total = BulkheadConfig::builder()
            .max_concurrent_calls(TOTAL)
            .max_wait_duration(MAX_WAIT)
            .sheddable_headroom(headroom)
            .build()
            .expect("valid config");
        let builder = KeyedBulkhead::<&str>::builder("api")
            .default_config(config(key_limit))
            .total(total)
            .max_keys(3);
        let shares = matches!(self, Setup::Shares | Setup::SharesHeadroom);
        let builder = if shares { builder.guaranteed_share(SHARE) } else { builder };
        builder.build().expect("valid keyed config")
    }
}

#[derive(Default)]
struct Tenant {
    latencies: Mutex<Vec<Duration>>,
    refused: AtomicU64,
}

fn run(setup: Setup, run_for: Duration, closed: bool) {
    let keyed = Arc::new(setup.build());
    let stop = Arc::new(AtomicBool::new(false));
    let tenants: Vec<(&'static str, Arc<Tenant>)> = ["steady-a", "steady-b", "flood"]
        .into_iter()
        .map(|name| (name, Arc::new(Tenant::default())))
        .collect();
    let mut threads = Vec::new();
    for (name, tenant) in &tenants {
        let name: &'static str = name;
        let (count, pause) = match name {
            "flood" if setup == Setup::Alone => continue,
            "flood" => (FLOOD_THREADS, Duration::ZERO),
            _ => (STEADY_THREADS, PAUSE),
        };
        for _ in 0..count {
            let (keyed, stop, tenant, name) =
                (Arc::clone(&keyed), Arc::clone(&stop), Arc::clone(tenant), name);
            let paced = !pause.is_zero() && !closed;
            let class = if name == "flood" && setup == Setup::SharesHeadroom {
                Criticality::Sheddable
            } else {
                Criticality::Default
            };
            threads.push(std::thread::spawn(move || {
                let mut latencies = Vec::new();
                let mut next = Instant::now();
                while !stop.load(Ordering::Relaxed) {
                    if paced {
                        // The schedule, not the last call's end, decides when to call.
                        let now = Instant::now();
                        if next > now {
                            std::thread::sleep(next - now);
                        }
                        next += PERIOD;
                    }
                    let asked = Instant::now();
                    match keyed.acquire_many(&name, class) {
                        Ok(permit) => {
                            std::thread::sleep(HOLD);
                            drop(permit);
                            latencies.push(asked.elapsed());
                        }
                        Err(_) => {
                            tenant.refused.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    if !pause.is_zero() && !paced {
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
    let closed = std::env::args().nth(2).is_some_and(|mode| mode == "closed");
    let run_for = Duration::from_secs_f64(seconds);
    println!("steady tenants: {}", if closed { "closed loop" } else { "paced, 500 calls/s each" });
    let setups =
        [Setup::Alone, Setup::NoGuarantees, Setup::Static, Setup::Shares, Setup::SharesHeadroom];
    for setup in setups {
        run(setup, run_for, closed);
    }
}

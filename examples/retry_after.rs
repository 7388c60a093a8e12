//! How good is `BulkheadFull::retry_after`, and what does honouring it buy? (issue 32)
//!
//! ```text
//! cargo run --release --example retry_after -- [--secs 3] [--seed 1]
//! ```
//!
//! The load is the sustained-overload example's: a downstream with 10 slots and a mean
//! service time of 20 ms (capacity 500 calls/s), a bulkhead with limit 10 in front of it,
//! and open-loop Poisson arrivals at 1.5 x capacity for `--secs` seconds per cell, on one
//! current-thread tokio runtime. The bulkhead counts (`enable_counters`), so it is observed
//! and its refusals carry an estimate. Three hold-time distributions, each of mean 20 ms:
//!
//! - `constant`: 20 ms;
//! - `bimodal`: 10 ms (90 %) or 110 ms (10 %);
//! - `heavy`: Pareto with shape 1.5 (infinite variance), scale 6.67 ms, capped at 2 s.
//!
//! **Accuracy.** Every refusal records its time, the callers queued at that moment (`q`)
//! and three estimates of when a slot frees for it: `retry_after()`, the configured max
//! wait, and the mean hold time measured so far. Every release records its time. The
//! *actual* time for a refusal at `t` is the time from `t` to the `(q + 1)`-th release after
//! `t` (the release that would serve it had it queued behind the `q` callers ahead). Two
//! bulkhead settings: fail fast (max wait 0: nobody queues, `q = 0`) and queued (max wait
//! 50 ms, at most 10 waiting: refusals are `TooManyWaiting` or `WaitTimedOut`). Reported:
//! the median and p90 of |estimate - actual|.
//!
//! **What it buys.** The same arrivals, but each arrival is a client that keeps trying until
//! it is served or a 1 s deadline passes, with one of three policies after a refusal:
//! `immediate` (retry at once: `yield_now`), `fixed` (sleep 50 ms, 2.5 service times) and
//! `honour` (sleep `retry_after()`, at least 1 ms; 50 ms if a refusal carries none). The
//! bulkhead fails fast. Reported: goodput (calls served per second), refusals per served
//! call, the served calls' p50 and p99 latency (arrival to answer) and clients that gave up.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bulkhead::{Bulkhead, BulkheadConfig};

const LIMIT: usize = 10;
const MEAN_HOLD: Duration = Duration::from_millis(20);
const OVERLOAD: f64 = 1.5;
const QUEUED_WAIT: Duration = Duration::from_millis(50);
const QUEUED_CAP: usize = 10;
const CLIENT_DEADLINE: Duration = Duration::from_secs(1);
const FIXED_BACKOFF: Duration = Duration::from_millis(50);

/// splitmix64: a small seeded generator (no dependency).
#[derive(Clone)]
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1].
    fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 1.0) / (1u64 << 53) as f64
    }

    fn exp(&mut self, mean: f64) -> f64 {
        -mean * self.unit().ln()
    }
}

#[derive(Clone, Copy, Debug)]
enum Dist {
    Constant,
    Bimodal,
    Heavy,
}

impl Dist {
    const ALL: [Dist; 3] = [Dist::Constant, Dist::Bimodal, Dist::Heavy];

    fn name(self) -> &'static str {
        match self {
            Dist::Constant => "constant",
            Dist::Bimodal => "bimodal",
            Dist::Heavy => "heavy",
        }
    }

    fn sample(self, rng: &mut Rng) -> Duration {
        match self {
            Dist::Constant => MEAN_HOLD,
            Dist::Bimodal if rng.unit() <= 0.9 => Duration::from_millis(10),
            Dist::Bimodal => Duration::from_millis(110),
            Dist::Heavy => {
                let scale = MEAN_HOLD.as_secs_f64() / 3.0; // mean of Pareto(1.5) = 3 x scale
                let x = scale / rng.unit().powf(1.0 / 1.5);
                Duration::from_secs_f64(x.min(2.0))
            }
        }
    }
}

/// The arrivals and hold times of one cell: the same for every policy of a distribution.
fn schedule(dist: Dist, secs: u64, seed: u64) -> Vec<(Duration, Duration)> {
    let mut rng = Rng(seed ^ (dist as u64).wrapping_mul(0x1234_5678_9abc));
    let rate = OVERLOAD * LIMIT as f64 / MEAN_HOLD.as_secs_f64();
    let mut at = 0.0;
    let mut out = Vec::new();
    loop {
        at += rng.exp(1.0 / rate);
        if at >= secs as f64 {
            return out;
        }
        out.push((Duration::from_secs_f64(at), dist.sample(&mut rng)));
    }
}

fn config(max_wait: Duration, cap: Option<usize>) -> BulkheadConfig {
    let mut builder =
        BulkheadConfig::builder().max_concurrent_calls(LIMIT).max_wait_duration(max_wait);
    if let Some(cap) = cap {
        builder = builder.max_waiting_calls(cap);
    }
    builder.build().expect("a valid config")
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

#[derive(Default)]
struct Log {
    releases: Vec<Instant>,
    /// (time, queued ahead, retry_after, mean hold so far)
    refusals: Vec<(Instant, usize, Option<Duration>, Duration)>,
    hold_sum: Duration,
    holds: u32,
}

/// One accuracy cell: the median and p90 of |estimate - actual| for retry_after, max wait
/// and mean hold, in ms, plus the refusals measured and how many had an estimate.
fn accuracy(dist: Dist, queued: bool, secs: u64, seed: u64) -> [f64; 8] {
    let (max_wait, cap) =
        if queued { (QUEUED_WAIT, Some(QUEUED_CAP)) } else { (Duration::ZERO, None) };
    let bulkhead = Arc::new(Bulkhead::new("downstream", config(max_wait, cap)));
    bulkhead.enable_counters();
    let log = Rc::new(RefCell::new(Log::default()));
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    tokio::task::LocalSet::new().block_on(&rt, async {
        let start = tokio::time::Instant::now();
        let mut tasks = Vec::new();
        for (at, hold) in schedule(dist, secs, seed) {
            tokio::time::sleep_until(start + at).await;
            let bulkhead = Arc::clone(&bulkhead);
            let log = Rc::clone(&log);
            tasks.push(tokio::task::spawn_local(async move {
                match bulkhead.acquire_owned_async().await {
                    Ok(permit) => {
                        tokio::time::sleep(hold).await;
                        drop(permit);
                        let mut log = log.borrow_mut();
                        log.releases.push(Instant::now());
                        log.hold_sum += hold;
                        log.holds += 1;
                    }
                    Err(full) => {
                        let now = Instant::now();
                        let q = bulkhead.metrics().waiting_calls();
                        let mut log = log.borrow_mut();
                        let mean =
                            if log.holds == 0 { MEAN_HOLD } else { log.hold_sum / log.holds };
                        log.refusals.push((now, q, full.retry_after(), mean));
                    }
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
    });
    let log = log.borrow();
    let (mut ours, mut wait, mut hold) = (Vec::new(), Vec::new(), Vec::new());
    let mut with_estimate = 0;
    for &(t, q, retry, mean) in &log.refusals {
        let first = log.releases.partition_point(|&r| r <= t);
        let Some(&freed) = log.releases.get(first + q) else { continue };
        let actual = (freed - t).as_secs_f64() * 1e3;
        let err = |estimate: Duration| (estimate.as_secs_f64() * 1e3 - actual).abs();
        if let Some(retry) = retry {
            with_estimate += 1;
            ours.push(err(retry));
        }
        wait.push(err(max_wait));
        hold.push(err(mean));
    }
    let (ours, wait, hold) = (sorted(ours), sorted(wait), sorted(hold));
    [
        quantile(&ours, 0.5),
        quantile(&ours, 0.9),
        quantile(&wait, 0.5),
        quantile(&wait, 0.9),
        quantile(&hold, 0.5),
        quantile(&hold, 0.9),
        log.refusals.len() as f64,
        with_estimate as f64,
    ]
}

#[derive(Clone, Copy, Debug)]
enum Policy {
    Immediate,
    Fixed,
    Honour,
}

impl Policy {
    const ALL: [Policy; 3] = [Policy::Immediate, Policy::Fixed, Policy::Honour];

    fn name(self) -> &'static str {
        match self {
            Policy::Immediate => "immediate",
            Policy::Fixed => "fixed 50 ms",
            Policy::Honour => "honour retry_after",
        }
    }
}

/// One client-policy cell: goodput /s, refusals per served call, p50 and p99 latency (ms)
/// of served calls, clients that gave up.
fn clients(dist: Dist, policy: Policy, secs: u64, seed: u64) -> [f64; 5] {
    let bulkhead = Arc::new(Bulkhead::new("downstream", config(Duration::ZERO, None)));
    bulkhead.enable_counters();
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    let (served, refusals, gave_up) = tokio::task::LocalSet::new().block_on(&rt, async {
        let start = tokio::time::Instant::now();
        let mut tasks = Vec::new();
        for (at, hold) in schedule(dist, secs, seed) {
            tokio::time::sleep_until(start + at).await;
            let bulkhead = Arc::clone(&bulkhead);
            tasks.push(tokio::task::spawn_local(async move {
                let arrived = tokio::time::Instant::now();
                let mut refused = 0u64;
                loop {
                    match bulkhead.try_acquire_owned() {
                        Ok(permit) => {
                            tokio::time::sleep(hold).await;
                            drop(permit);
                            return (Some(arrived.elapsed()), refused);
                        }
                        Err(full) => {
                            refused += 1;
                            let pause = match policy {
                                Policy::Immediate => None,
                                Policy::Fixed => Some(FIXED_BACKOFF),
                                Policy::Honour => Some(
                                    full.retry_after()
                                        .unwrap_or(FIXED_BACKOFF)
                                        .max(Duration::from_millis(1)),
                                ),
                            };
                            if arrived.elapsed() + pause.unwrap_or_default() >= CLIENT_DEADLINE {
                                return (None, refused);
                            }
                            match pause {
                                None => tokio::task::yield_now().await,
                                Some(pause) => tokio::time::sleep(pause).await,
                            }
                        }
                    }
                }
            }));
        }
        let (mut served, mut refusals, mut gave_up) = (Vec::new(), 0u64, 0u64);
        for task in tasks {
            let (latency, refused) = task.await.unwrap();
            refusals += refused;
            match latency {
                Some(latency) => served.push(latency.as_secs_f64() * 1e3),
                None => gave_up += 1,
            }
        }
        (served, refusals, gave_up)
    });
    let n = served.len() as f64;
    let served = sorted(served);
    [
        n / secs as f64,
        refusals as f64 / n.max(1.0),
        quantile(&served, 0.5),
        quantile(&served, 0.99),
        gave_up as f64,
    ]
}

fn main() {
    let mut secs = 3;
    let mut seed = 1;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next().and_then(|v| v.parse().ok());
        match (arg.as_str(), value) {
            ("--secs", Some(v)) => secs = v,
            ("--seed", Some(v)) => seed = v,
            _ => {
                eprintln!("usage: retry_after [--secs N] [--seed N]");
                std::process::exit(2);
            }
        }
    }
    println!("## Accuracy: |estimate - actual| in ms, {secs} s per cell, seed {seed}\n");
    println!("| holds | bulkhead | refusals (with estimate) | retry_after p50 / p90 | max wait p50 / p90 | mean hold p50 / p90 |");
    println!("|---|---|---|---|---|---|");
    for dist in Dist::ALL {
        for queued in [false, true] {
            let r = accuracy(dist, queued, secs, seed);
            let setting = if queued { "queued (50 ms, cap 10)" } else { "fail fast" };
            println!(
                "| {} | {setting} | {} ({}) | {:.2} / {:.2} | {:.2} / {:.2} | {:.2} / {:.2} |",
                dist.name(),
                r[6],
                r[7],
                r[0],
                r[1],
                r[2],
                r[3],
                r[4],
                r[5]
            );
        }
    }
    println!(
        "\n## Clients after a refusal (fail fast, deadline 1 s), {secs} s per cell, seed {seed}\n"
    );
    println!(
        "| holds | policy | goodput /s | refusals per served call | p50 ms | p99 ms | gave up |"
    );
    println!("|---|---|---|---|---|---|---|");
    for dist in Dist::ALL {
        for policy in Policy::ALL {
            let r = clients(dist, policy, secs, seed);
            println!(
                "| {} | {} | {:.0} | {:.2} | {:.1} | {:.1} | {} |",
                dist.name(),
                policy.name(),
                r[0],
                r[1],
                r[2],
                r[3],
                r[4]
            );
        }
    }
}

//! The overload demo: what a bulkhead buys a thread-per-request service whose downstream
//! turns slow.
//!
//! ```text
//! cargo run --release -p bulkhead-overload-demo                    # chart: target/overload.svg
//! cargo run --release -p bulkhead-overload-demo -- --svg out.svg
//! ```
//!
//! Everything is real and runs on 127.0.0.1, each run on fresh ephemeral ports:
//!
//! * **downstream**: an HTTP server that answers every request after 2 s and never fails
//!   (a payment provider on a bad day: slow, not down, so a circuit breaker stays closed);
//! * **our service**: an HTTP server with a fixed pool of 32 worker threads fed by a bounded
//!   accept queue, as a servlet container is built. `/health` answers at once. `/pay` calls
//!   the downstream through ureq with a connection pool of 20; when all 20 connections are
//!   out, a caller waits for one for up to 5 s;
//! * **load**: 150 `/pay` requests released together, and a `/health` probe every 20 ms
//!   (open loop: a new probe each tick, whatever the previous ones are doing). Clients give
//!   up after 10 s.
//!
//! The same burst runs five times: with no bulkhead; with
//! `Bulkhead::new("downstream", BulkheadConfig::for_pool(20))` around the downstream call
//! (16 calls, the guide's 100 ms max wait) mapping `BulkheadFull` to `503`; with 16 calls
//! and no wait at all; and twice with an adaptive limit attached (AIMD, cap 16 = `for_pool(20)`'s,
//! min 4, a call slower than 1 s counts as a failure): once cold, and once after it has seen
//! an identical burst 3 s earlier. The cold one decides the burst with its starting limit (16):
//! all 150 requests arrive at once and the first sample comes back 2 s later, when every one
//! of them is already admitted or refused. The warmed one has learnt from the first burst's
//! 16 slow calls. It prints a side-by-side table and writes an SVG chart of `/health`
//! latency and busy workers over time. The numbers are whatever this run measured.

mod downstream;
mod http;
mod load;
mod report;
mod service;

use std::path::PathBuf;
use std::thread;
use std::time::{Duration, Instant};

use std::sync::Arc;

use bulkhead::adaptive::{AdaptiveLimit, Aimd};
use bulkhead::{Bulkhead, BulkheadConfig};

use downstream::Downstream;
use load::{Prober, Sample};
use service::{Service, ServiceConfig};

/// The downstream's answer time.
const DOWNSTREAM_LATENCY: Duration = Duration::from_secs(2);
/// Worker threads in our service (servlet container style).
const WORKERS: usize = 32;
/// Accepted connections that may queue for a worker.
const ACCEPT_QUEUE: usize = 100;
/// The HTTP client's connection pool to the downstream.
const POOL_SIZE: usize = 20;
/// How long a caller waits for a pooled connection (a pool's "connection request timeout").
const POOL_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);
/// Concurrent `/pay` requests in the burst.
const BURST: usize = 150;
/// One `/health` probe per tick.
const PROBE_INTERVAL: Duration = Duration::from_millis(20);
/// Clients (burst and probes) give up after this long.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);
/// Probing starts this long before the burst, for a baseline.
const LEAD_IN: Duration = Duration::from_millis(600);
/// Probing goes on this long after the service is idle again.
const TAIL: Duration = Duration::from_millis(400);
/// A run is cut off this long after its burst starts, drained or not.
const RUN_DEADLINE: Duration = Duration::from_secs(30);
/// The whole demo is aborted if it has not finished by then (it should take ~30 s).
const WATCHDOG: Duration = Duration::from_secs(90);
/// The adaptive columns: AIMD counts a call slower than this as a failure (the payment
/// provider normally answers in well under a second).
const ADAPTIVE_TIMEOUT: Duration = Duration::from_secs(1);
/// The adaptive columns' lowest limit.
const ADAPTIVE_MIN: usize = 4;

/// How the downstream call is protected in one run.
#[derive(Clone)]
enum Protection {
    None,
    Static(BulkheadConfig),
    /// An adaptive bulkhead; `warm`: an identical burst runs first (not measured), so the
    /// measured burst meets the limit it learnt.
    Adaptive {
        warm: bool,
    },
}

/// One way of protecting the downstream call.
struct Scenario {
    /// Column header.
    label: &'static str,
    /// How the column's bulkhead is built, shown under the table.
    description: &'static str,
    protection: Protection,
}

/// What one run measured.
struct RunResult {
    label: &'static str,
    probes: Vec<Sample>,
    pays: Vec<Sample>,
    /// Seconds from the burst start until the last `/pay` client had its outcome.
    burst_end: f64,
    /// (seconds from the burst start, busy workers), every 10 ms.
    busy: Vec<(f64, usize)>,
    peak_busy: usize,
    peak_pool_waiters: usize,
    downstream_peak: usize,
    downstream_served: usize,
    /// Server-side time from entering `Bulkhead::call` to `BulkheadFull`, per rejection.
    rejections: Vec<Duration>,
    /// Seconds from the burst start until every worker was free again (None: not by the
    /// run's deadline).
    idle_at: Option<f64>,
    /// The adaptive limit when the measured burst starts and once the run is over.
    limits: Option<(usize, usize)>,
    /// The unmeasured first burst of a warmed run: (200 ok, 503 rejected).
    warm_up: Option<(usize, usize)>,
    run_time: Duration,
}

fn scenarios() -> Vec<Scenario> {
    let fail_fast = BulkheadConfig::builder()
        .max_concurrent_calls(BulkheadConfig::for_pool(POOL_SIZE).max_concurrent_calls())
        .max_wait_duration(Duration::ZERO)
        .build()
        .expect("16 calls, no wait is a valid config");
    vec![
        Scenario {
            label: "no bulkhead",
            description: "the downstream call is made directly",
            protection: Protection::None,
        },
        Scenario {
            label: "for_pool(20)",
            description: "BulkheadConfig::for_pool(20): 16 calls, max wait 100 ms (the guide's)",
            protection: Protection::Static(BulkheadConfig::for_pool(POOL_SIZE)),
        },
        Scenario {
            label: "16, no wait",
            description: "16 calls, max wait 0: a full bulkhead refuses at once",
            protection: Protection::Static(fail_fast),
        },
        Scenario {
            label: "adaptive",
            description:
                "for_pool(20) with an adaptive limit: AIMD, limit 4..=16, a call over 1 s \
                          is a failure; starts at 16",
            protection: Protection::Adaptive { warm: false },
        },
        Scenario {
            label: "adaptive, 2nd",
            description: "the same, measured on a second burst, 3 s after an identical first \
                          one it learnt from",
            protection: Protection::Adaptive { warm: true },
        },
    ]
}

fn adaptive_bulkhead() -> Bulkhead {
    let bulkhead = Bulkhead::new("downstream", BulkheadConfig::for_pool(POOL_SIZE));
    let limit =
        AdaptiveLimit::new(Aimd::default()).timeout(ADAPTIVE_TIMEOUT).min_limit(ADAPTIVE_MIN);
    bulkhead.set_adaptive_limit(limit).expect("min 4, max 16 is a valid adaptive config");
    bulkhead
}

/// Waits until the service has been idle for 100 ms in a row (bounded by `RUN_DEADLINE`).
fn wait_idle(service: &Service) {
    let deadline = Instant::now() + RUN_DEADLINE;
    let mut idle_since: Option<Instant> = None;
    while Instant::now() < deadline {
        if service.is_idle() {
            let since = *idle_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= Duration::from_millis(100) {
                return;
            }
        } else {
            idle_since = None;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

fn run(scenario: &Scenario) -> std::io::Result<RunResult> {
    let started = Instant::now();
    let guard = match &scenario.protection {
        Protection::None => None,
        Protection::Static(config) => Some(Arc::new(Bulkhead::new("downstream", config.clone()))),
        Protection::Adaptive { .. } => Some(Arc::new(adaptive_bulkhead())),
    };
    let downstream = Downstream::start(DOWNSTREAM_LATENCY)?;
    let service = Service::start(ServiceConfig {
        workers: WORKERS,
        accept_queue: ACCEPT_QUEUE,
        pool_size: POOL_SIZE,
        pool_acquire_timeout: POOL_ACQUIRE_TIMEOUT,
        downstream_timeout: DOWNSTREAM_LATENCY * 3,
        socket_timeout: Duration::from_secs(5),
        downstream: downstream.addr(),
        bulkhead: guard.clone(),
    })?;
    let addr = service.addr();
    let warm_up = if matches!(scenario.protection, Protection::Adaptive { warm: true }) {
        let pays = load::burst(addr, BURST, CLIENT_TIMEOUT, Instant::now() + LEAD_IN);
        wait_idle(&service);
        service.reset_counters();
        downstream.reset_counters();
        Some((
            pays.iter().filter(|s| s.outcome == Ok(200)).count(),
            pays.iter().filter(|s| s.outcome == Ok(503)).count(),
        ))
    } else {
        None
    };
    let adaptive_limit =
        || guard.as_ref().and_then(|bulkhead| Some(bulkhead.adaptive_limit()?.limit()));
    let limit_at_burst = adaptive_limit();
    let origin = Instant::now() + LEAD_IN;
    let prober = Prober::start(addr, PROBE_INTERVAL, CLIENT_TIMEOUT, origin);
    let burst = thread::spawn(move || load::burst(addr, BURST, CLIENT_TIMEOUT, origin));

    let since = |at: Instant| at.saturating_duration_since(origin).as_secs_f64();
    let mut busy = Vec::new();
    let mut idle_since: Option<Instant> = None;
    let mut tail_until: Option<Instant> = None;
    loop {
        let now = Instant::now();
        if now >= origin {
            busy.push((since(now), service.busy_workers()));
        }
        if tail_until.is_some_and(|end| now >= end) || now >= origin + RUN_DEADLINE {
            break;
        }
        if tail_until.is_none() && burst.is_finished() {
            // Idle for 100 ms in a row, so a connection still in the listen backlog is not
            // mistaken for the end of the work.
            if service.is_idle() {
                let since_idle = *idle_since.get_or_insert(now);
                if now - since_idle >= Duration::from_millis(100) {
                    tail_until = Some(now + TAIL);
                }
            } else {
                idle_since = None;
            }
        }
        thread::sleep(Duration::from_millis(10));
    }
    let pays = burst.join().unwrap_or_default();
    let probes = prober.finish();
    let burst_end = pays.iter().map(|s| s.sent + s.latency.as_secs_f64()).fold(0.0, f64::max);
    let result = RunResult {
        label: scenario.label,
        probes,
        pays,
        burst_end,
        busy,
        peak_busy: service.peak_busy_workers(),
        peak_pool_waiters: service.peak_pool_waiters(),
        downstream_peak: downstream.peak_in_flight(),
        downstream_served: downstream.served(),
        rejections: service.rejection_times(),
        idle_at: tail_until.and(idle_since).map(since),
        limits: limit_at_burst.zip(adaptive_limit()),
        warm_up,
        run_time: Duration::ZERO,
    };
    service.stop();
    downstream.stop();
    Ok(RunResult { run_time: started.elapsed(), ..result })
}

/// `overload.svg` in the target directory cargo built this binary into: the executable is
/// `<target-dir>/<profile>/bulkhead-overload-demo` (or `<target-dir>/<triple>/<profile>/...`),
/// so this honours `CARGO_TARGET_DIR`, `--target-dir` and `build.target-dir` alike. Falls
/// back to the working directory when the executable's path is unknown. Printed after the run.
fn default_svg_path() -> PathBuf {
    let dir = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().and_then(|profile| profile.parent()).map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("."));
    dir.join("overload.svg")
}

fn main() {
    let started = Instant::now();
    let mut args = std::env::args().skip(1);
    let mut svg_path = default_svg_path();
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.next()) {
            ("--svg", Some(path)) => svg_path = PathBuf::from(path),
            _ => {
                eprintln!("usage: bulkhead-overload-demo [--svg PATH]");
                std::process::exit(2);
            }
        }
    }
    thread::spawn(|| {
        thread::sleep(WATCHDOG);
        eprintln!("overload demo: still running after {WATCHDOG:?}; giving up");
        std::process::exit(3);
    });

    println!(
        "Service: {WORKERS} worker threads, accept queue {ACCEPT_QUEUE}, client pool of \
         {POOL_SIZE} connections (wait for one up to {POOL_ACQUIRE_TIMEOUT:?})."
    );
    println!(
        "Downstream answers in {DOWNSTREAM_LATENCY:?}, never fails. Burst: {BURST} concurrent \
         /pay requests; /health probed every {PROBE_INTERVAL:?}; clients time out after \
         {CLIENT_TIMEOUT:?}.\n"
    );
    let scenarios = scenarios();
    let mut results = Vec::new();
    for scenario in &scenarios {
        println!("running: {:<14} ({})", scenario.label, scenario.description);
        match run(scenario) {
            Ok(result) => results.push(result),
            Err(e) => {
                eprintln!("could not run '{}': {e}", scenario.label);
                std::process::exit(1);
            }
        }
    }
    println!();
    print!("{}", report::table(&results, CLIENT_TIMEOUT, WORKERS, POOL_SIZE));
    println!(
        "\n\"during the burst\": probes sent between the burst start and the last /pay \
         answer.\n\"time to a 503\" is what the client saw (it includes waiting for a free \
         worker);\n\"bulkhead refusal\" is the time from entering Bulkhead::call to its \
         BulkheadFull, in the service.\nA /pay whose client gave up still occupies a worker \
         and a downstream call when its turn comes.\n\"adaptive\" decides the burst with its \
         starting limit: all {BURST} requests arrive at once and the first sample comes back \
         {DOWNSTREAM_LATENCY:?} later,\nwhen each is already admitted or refused. \
         \"adaptive, 2nd\" meets the limit AIMD learnt from the first burst's slow calls \
         (over {ADAPTIVE_TIMEOUT:?}: failures).\nThis downstream is as slow at 1 call as at \
         20, so a lower limit buys free workers, not faster calls: see examples/adaptive.rs \
         for a downstream whose latency steps."
    );
    println!("\ntotal run time: {:.1} s", started.elapsed().as_secs_f64());

    let setup = format!(
        "{BURST} concurrent /pay calls; downstream answers in {DOWNSTREAM_LATENCY:?}; \
         {WORKERS} workers; client pool of {POOL_SIZE} connections"
    );
    let svg = report::svg(&results, CLIENT_TIMEOUT, WORKERS, &setup);
    if let Some(dir) = svg_path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    match std::fs::write(&svg_path, svg) {
        Ok(()) => println!("chart: {}", svg_path.display()),
        Err(e) => {
            eprintln!("could not write the chart to {}: {e}", svg_path.display());
            std::process::exit(1);
        }
    }
    // Every thread we started has finished or is bounded by a timeout; exit now anyway so
    // that nothing left over can hold the process.
    std::process::exit(0);
}

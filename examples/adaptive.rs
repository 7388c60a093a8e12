//! Static versus adaptive bulkheads, side by side, on a real loopback downstream whose
//! latency steps from 50 ms to 2 s and back and whose capacity halves meanwhile.
//!
//! ```text
//! cargo run --release --example adaptive [-- benches/results/adaptive.svg]
//! ```
//!
//! Every contender gets its own downstream (a TCP server on 127.0.0.1, same parameters,
//! same phase clock) and the same open-loop load (100 calls per second, each bounded by a
//! 3 s client timeout, each allowed to wait 100 ms for a slot), all in one process at once:
//!
//! - `static`: `Bulkhead::new(.., BulkheadConfig::for_pool(20))`, 16 calls;
//! - `ours-aimd`, `ours-gradient2`, `ours-vegas`: a `Bulkhead` with an `AdaptiveLimit`, the same config
//!   (cap 16) and each algorithm at its defaults (Netflix's); `ours-aimd(0.5, 1 s)`: AIMD
//!   halving on a failure or a call slower than 1 s (tower-resilience's AIMD defaults are
//!   0.5 and 100 ms);
//! - `tower-acc-*` and `tower-resilience-*`: the two Rust crates' tower layers around the
//!   same client, max limit 16, initial 16, min 1, other settings at their defaults; a
//!   call that finds no slot within 100 ms (`ready()` still pending) is rejected.
//!
//! The downstream serves `capacity` calls at once and queues the rest (it never refuses,
//! and it finishes abandoned calls, as a server without deadline propagation does):
//!
//! | phase | from | latency | capacity |
//! |-------|------|---------|----------|
//! | A     | 0 s  | 50 ms   | 16       |
//! | B     | 8 s  | 2 s     | 8        |
//! | C     | 20 s | 50 ms   | 16       |
//!
//! Each contender also stands for a service with a fixed pool of 32 workers (as the overload
//! demo's servlet-style service): a call holds a worker from its arrival until it is
//! rejected or answered (so waiting for a slot pins a worker, R-RES-BH-1), and a `/health`
//! probe every 20 ms needs a worker for an instant. The probe's latency is the time to get
//! a worker: the service's `/health` latency, as in the overload demo, without the HTTP.
//!
//! It prints a Markdown table per phase (goodput, p50/p99 of admitted calls, timeouts,
//! rejected calls, `/health` p99), the time each contender took to adapt after each step,
//! and writes an SVG of limits and latency over time.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bulkhead::adaptive::{AdaptiveLimit, Aimd, Gradient2, Vegas};
use bulkhead::Outcome;
use bulkhead::{Bulkhead, BulkheadConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tower::{Service, ServiceExt};

/// (start, latency, capacity) of each phase.
const PHASES: [(Duration, Duration, usize); 3] = [
    (Duration::from_secs(0), Duration::from_millis(50), 16),
    (Duration::from_secs(8), Duration::from_millis(2000), 8),
    (Duration::from_secs(20), Duration::from_millis(50), 16),
];
const RUN: Duration = Duration::from_secs(30);
const RATE_PER_SEC: u64 = 100;
const CLIENT_TIMEOUT: Duration = Duration::from_secs(3);
const MAX_WAIT: Duration = Duration::from_millis(100);
const SAMPLE_EVERY: Duration = Duration::from_millis(100);
/// Workers of each contender's service (the overload demo's service has 32).
const WORKERS: usize = 32;
/// One `/health` probe per contender per tick.
const PROBE_EVERY: Duration = Duration::from_millis(20);

fn phase_at(t: Duration) -> usize {
    PHASES.iter().rposition(|(start, _, _)| t >= *start).unwrap_or(0)
}

// ------------------------------------------------------------------------------------
// The downstream

/// A TCP server: one byte in, `latency` of work under one of `capacity` workers, one byte
/// out. Latency and capacity follow the phase clock.
async fn downstream(start: Instant) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1");
    let addr = listener.local_addr().unwrap();
    let workers = Arc::new(tokio::sync::Semaphore::new(PHASES[0].2));
    // The capacity changes at each phase start.
    let resize = Arc::clone(&workers);
    tokio::spawn(async move {
        let mut capacity = PHASES[0].2;
        for (at, _, next) in PHASES.iter().skip(1) {
            tokio::time::sleep_until((start + *at).into()).await;
            if *next > capacity {
                resize.add_permits(next - capacity);
            } else {
                let gone = resize.acquire_many((capacity - next) as u32).await.unwrap();
                gone.forget();
            }
            capacity = *next;
        }
    });
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else { continue };
            let workers = Arc::clone(&workers);
            tokio::spawn(async move {
                let mut byte = [0u8; 1];
                if socket.read_exact(&mut byte).await.is_err() {
                    return;
                }
                let _worker = workers.acquire().await.unwrap();
                let latency = PHASES[phase_at(start.elapsed())].1;
                tokio::time::sleep(latency).await;
                let _ = socket.write_all(&byte).await;
            });
        }
    });
    addr
}

/// One call: connect, send a byte, wait for the answer, within the client timeout.
async fn request(addr: std::net::SocketAddr) -> Result<(), &'static str> {
    let call = async {
        let mut stream = TcpStream::connect(addr).await.map_err(|_| "connect")?;
        stream.write_all(b"x").await.map_err(|_| "write")?;
        let mut byte = [0u8; 1];
        stream.read_exact(&mut byte).await.map_err(|_| "read")?;
        Ok(())
    };
    tokio::time::timeout(CLIENT_TIMEOUT, call).await.map_err(|_| "timeout")?
}

// ------------------------------------------------------------------------------------
// The contenders

#[derive(Clone, Copy, Debug, PartialEq)]
enum Result3 {
    Ok,
    Failed,
    Rejected,
}

type BoxFut = Pin<Box<dyn Future<Output = Result<(), &'static str>> + Send>>;
type Client = tower::util::BoxCloneSyncService<(), (), &'static str>;

enum Guard {
    Static(Arc<Bulkhead>),
    Ours(Arc<Bulkhead>),
    /// A tower service (peers); `limit` reads its current limit when the crate exposes one.
    Tower(Client, Option<Box<dyn Fn() -> usize + Send + Sync>>),
}

struct Contender {
    name: String,
    guard: Guard,
    addr: std::net::SocketAddr,
    /// Calls admitted and not yet finished (client side).
    in_flight: AtomicUsize,
    /// (start offset, latency, result) of every call.
    calls: Mutex<Vec<(Duration, Duration, Result3)>>,
    /// (offset, limit or None, in flight) every 100 ms.
    trace: Mutex<Vec<(Duration, Option<usize>, usize)>>,
    /// (offset, busy workers) every 100 ms.
    busy: Mutex<Vec<(Duration, usize)>>,
    /// The service's worker pool: a call holds one from arrival to its end, a `/health`
    /// probe for an instant.
    workers: Arc<tokio::sync::Semaphore>,
    /// (start offset, time to get a worker) of every `/health` probe.
    health: Mutex<Vec<(Duration, Duration)>>,
}

impl Contender {
    fn limit(&self) -> Option<usize> {
        match &self.guard {
            Guard::Static(b) => Some(b.metrics().max_allowed_concurrent_calls()),
            Guard::Ours(b) => b.adaptive_limit().map(|a| a.limit()),
            Guard::Tower(_, limit) => limit.as_ref().map(|f| f()),
        }
    }

    async fn call(&self) -> Result3 {
        let addr = self.addr;
        let counted = async {
            self.in_flight.fetch_add(1, Ordering::Relaxed);
            let result = request(addr).await;
            self.in_flight.fetch_sub(1, Ordering::Relaxed);
            result
        };
        let outcome = match &self.guard {
            Guard::Static(b) => match b.call_async(counted).await {
                Err(_) => return Result3::Rejected,
                Ok(r) => r,
            },
            Guard::Ours(b) => {
                let classify = |r: &Result<_, _>| {
                    if r.is_ok() {
                        Outcome::Success
                    } else {
                        Outcome::Failure
                    }
                };
                match b.call_async_classified(counted, classify).await {
                    Err(_) => return Result3::Rejected,
                    Ok(r) => r,
                }
            }
            Guard::Tower(service, _) => {
                let mut service = service.clone();
                match tokio::time::timeout(MAX_WAIT, service.ready()).await {
                    Err(_) | Ok(Err(_)) => return Result3::Rejected,
                    Ok(Ok(ready)) => {
                        let fut = ready.call(());
                        self.in_flight.fetch_add(1, Ordering::Relaxed);
                        let r = fut.await;
                        self.in_flight.fetch_sub(1, Ordering::Relaxed);
                        r
                    }
                }
            }
        };
        if outcome.is_ok() {
            Result3::Ok
        } else {
            Result3::Failed
        }
    }
}

/// A bulkhead named `name` with `limit` attached.
fn ours(name: &str, config: BulkheadConfig, limit: AdaptiveLimit) -> Guard {
    let bulkhead = Bulkhead::new(name, config);
    bulkhead.set_adaptive_limit(limit).expect("valid adaptive settings");
    Guard::Ours(Arc::new(bulkhead))
}

fn raw_client(
    addr: std::net::SocketAddr,
) -> impl Service<(), Response = (), Error = &'static str, Future = BoxFut> + Clone + Send + Sync + 'static
{
    tower::service_fn(move |()| Box::pin(request(addr)) as BoxFut)
}

/// Builds a contender's guard around the address of its downstream.
type MakeGuard = Box<dyn FnOnce(std::net::SocketAddr) -> Guard>;

async fn contenders(start: Instant) -> Vec<Arc<Contender>> {
    let config = BulkheadConfig::for_pool(20); // 16 calls, 100 ms max wait
    let cap = config.max_concurrent_calls();
    let mut list: Vec<(String, MakeGuard)> = vec![
        ("static for_pool(20)".into(), {
            let config = config.clone();
            Box::new(move |_| Guard::Static(Arc::new(Bulkhead::new("static", config))))
        }),
        ("ours-aimd".into(), {
            let config = config.clone();
            Box::new(move |_| ours("aimd", config, AdaptiveLimit::new(Aimd::default())))
        }),
        ("ours-aimd(0.5, 1 s)".into(), {
            // Tuned like tower-resilience's AIMD defaults (halve; a slow call counts as a
            // failure), within Netflix's allowed ranges: ratio 0.5, timeout 20x the 50 ms.
            let config = config.clone();
            Box::new(move |_| {
                let aimd = Aimd::new(0.5).expect("valid AIMD settings");
                ours("aimd-tuned", config, AdaptiveLimit::new(aimd).timeout(Duration::from_secs(1)))
            })
        }),
        ("ours-gradient2".into(), {
            let config = config.clone();
            Box::new(move |_| ours("gradient2", config, AdaptiveLimit::new(Gradient2::default())))
        }),
        ("ours-vegas".into(), {
            let config = config.clone();
            Box::new(move |_| ours("vegas", config, AdaptiveLimit::new(Vegas::default())))
        }),
    ];
    list.push((
        "tower-acc-aimd".into(),
        Box::new(move |addr| {
            let algo =
                tower_acc::Aimd::builder().initial_limit(cap).min_limit(1).max_limit(cap).build();
            let svc = tower_acc::ConcurrencyLimit::new(raw_client(addr), algo);
            Guard::Tower(tower::util::BoxCloneSyncService::new(svc), None)
        }),
    ));
    list.push((
        "tower-acc-gradient2".into(),
        Box::new(move |addr| {
            let algo = tower_acc::Gradient2::builder()
                .initial_limit(cap)
                .min_limit(1)
                .max_limit(cap)
                .build();
            let svc = tower_acc::ConcurrencyLimit::new(raw_client(addr), algo);
            Guard::Tower(tower::util::BoxCloneSyncService::new(svc), None)
        }),
    ));
    list.push((
        "tower-acc-vegas".into(),
        Box::new(move |addr| {
            let algo = tower_acc::Vegas::builder().initial_limit(cap).max_limit(cap).build();
            let svc = tower_acc::ConcurrencyLimit::new(raw_client(addr), algo);
            Guard::Tower(tower::util::BoxCloneSyncService::new(svc), None)
        }),
    ));
    list.push((
        "tower-resilience-aimd".into(),
        Box::new(move |addr| {
            let algo = tower_resilience_adaptive::Aimd::builder()
                .initial_limit(cap)
                .min_limit(1)
                .max_limit(cap)
                .build()
                .expect("valid AIMD settings");
            peer_resilience(addr, algo)
        }),
    ));
    list.push((
        "tower-resilience-gradient2".into(),
        Box::new(move |addr| {
            let algo = tower_resilience_adaptive::Gradient2::builder()
                .initial_limit(cap)
                .min_limit(1)
                .max_limit(cap)
                .build()
                .expect("valid Gradient2 settings");
            peer_resilience(addr, algo)
        }),
    ));
    list.push((
        "tower-resilience-vegas".into(),
        Box::new(move |addr| {
            let algo = tower_resilience_adaptive::Vegas::builder()
                .initial_limit(cap)
                .min_limit(1)
                .max_limit(cap)
                .build()
                .expect("valid Vegas settings");
            peer_resilience(addr, algo)
        }),
    ));
    let mut out = Vec::new();
    for (name, make) in list {
        let addr = downstream(start).await;
        out.push(Arc::new(Contender {
            name,
            guard: make(addr),
            addr,
            in_flight: AtomicUsize::new(0),
            calls: Mutex::new(Vec::new()),
            trace: Mutex::new(Vec::new()),
            busy: Mutex::new(Vec::new()),
            workers: Arc::new(tokio::sync::Semaphore::new(WORKERS)),
            health: Mutex::new(Vec::new()),
        }));
    }
    out
}

fn peer_resilience<A>(addr: std::net::SocketAddr, algo: A) -> Guard
where
    A: tower_resilience_adaptive::ConcurrencyAlgorithm + Send + Sync + 'static,
{
    let svc = tower_resilience_adaptive::AdaptiveService::new(raw_client(addr), Arc::new(algo));
    let probe = svc.clone();
    let service = tower::util::BoxCloneSyncService::new(svc.map_err(|e| match e {
        tower_resilience_adaptive::AdaptiveError::Service(e) => e,
        _ => "limit reached",
    }));
    Guard::Tower(service, Some(Box::new(move || probe.limit())))
}

// ------------------------------------------------------------------------------------
// The run and the report

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> String {
    format!("{}", d.as_millis())
}

/// Seconds from `from` until the contender's admitted in-flight stays at or below
/// `target` for a whole second; None if it never does before `until`.
fn settle_time(
    trace: &[(Duration, Option<usize>, usize)],
    from: Duration,
    until: Duration,
    target: usize,
) -> Option<Duration> {
    let window = (Duration::from_secs(1).as_millis() / SAMPLE_EVERY.as_millis()) as usize;
    let points: Vec<_> = trace.iter().filter(|(t, _, _)| *t >= from && *t < until).collect();
    (0..points.len().saturating_sub(window))
        .find(|&i| points[i..i + window].iter().all(|(_, _, n)| *n <= target))
        .map(|i| points[i].0 - from)
}

/// Seconds from `from` until a whole second of calls started with at least 95 % succeeding.
fn recovery_time(
    calls: &[(Duration, Duration, Result3)],
    from: Duration,
    until: Duration,
) -> Option<Duration> {
    let mut t = from;
    while t + Duration::from_secs(1) <= until {
        let window: Vec<_> =
            calls.iter().filter(|(s, _, _)| *s >= t && *s < t + Duration::from_secs(1)).collect();
        let ok = window.iter().filter(|(_, _, r)| *r == Result3::Ok).count();
        if !window.is_empty() && ok * 100 >= window.len() * 95 {
            return Some(t - from);
        }
        t += SAMPLE_EVERY;
    }
    None
}

fn main() {
    let svg_path = std::env::args().nth(1).unwrap_or_else(|| "benches/results/adaptive.svg".into());
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let contenders = rt.block_on(async {
        let start = Instant::now() + Duration::from_millis(200);
        let contenders = contenders(start).await;
        tokio::time::sleep_until(start.into()).await;
        // The sampler.
        {
            let contenders = contenders.clone();
            tokio::spawn(async move {
                let mut tick = tokio::time::interval_at(start.into(), SAMPLE_EVERY);
                while start.elapsed() < RUN {
                    tick.tick().await;
                    let t = start.elapsed();
                    for c in &contenders {
                        c.trace.lock().unwrap().push((
                            t,
                            c.limit(),
                            c.in_flight.load(Ordering::Relaxed),
                        ));
                        let busy = WORKERS - c.workers.available_permits();
                        c.busy.lock().unwrap().push((t, busy));
                    }
                }
            });
        }
        // The /health probers: open loop, one probe per tick, whatever the previous ones do.
        for c in &contenders {
            let c = Arc::clone(c);
            tokio::spawn(async move {
                let mut tick = tokio::time::interval_at(start.into(), PROBE_EVERY);
                while start.elapsed() < RUN {
                    tick.tick().await;
                    let c = Arc::clone(&c);
                    tokio::spawn(async move {
                        let (t, began) = (start.elapsed(), Instant::now());
                        let worker = c.workers.acquire().await.expect("the pool is never closed");
                        drop(worker); // answering /health takes no time
                        c.health.lock().unwrap().push((t, began.elapsed()));
                    });
                }
            });
        }
        // The load: the same arrivals for everyone.
        let mut tick =
            tokio::time::interval_at(start.into(), Duration::from_micros(1_000_000 / RATE_PER_SEC));
        let mut tasks = Vec::new();
        while start.elapsed() < RUN {
            tick.tick().await;
            for c in &contenders {
                let c = Arc::clone(c);
                tasks.push(tokio::spawn(async move {
                    let t = start.elapsed();
                    let began = Instant::now();
                    let worker = c.workers.acquire().await.expect("the pool is never closed");
                    let result = c.call().await;
                    drop(worker);
                    c.calls.lock().unwrap().push((t, began.elapsed(), result));
                }));
            }
        }
        for task in tasks {
            task.await.unwrap();
        }
        contenders
    });

    println!("Load: {RATE_PER_SEC} calls/s per contender, open loop; client timeout {} ms; max wait {} ms; run {} s.",
        CLIENT_TIMEOUT.as_millis(), MAX_WAIT.as_millis(), RUN.as_secs());
    println!("Service per contender: {WORKERS} workers; /health probed every {} ms (its latency: the wait for a worker); busy workers sampled every {} ms.\n",
        PROBE_EVERY.as_millis(), SAMPLE_EVERY.as_millis());
    for (p, (from, latency, capacity)) in PHASES.iter().enumerate() {
        let until = PHASES.get(p + 1).map_or(RUN, |next| next.0);
        let secs = (until - *from).as_secs_f64();
        println!(
            "Phase {} ({}-{} s: latency {} ms, capacity {}): calls started in the phase\n",
            ["A", "B", "C"][p],
            from.as_secs(),
            until.as_secs(),
            latency.as_millis(),
            capacity
        );
        println!(
            "| contender | goodput (ok/s) | p50 ms | p99 ms | timeouts | rejected | mean limit \
             | /health p99 µs | peak busy workers |"
        );
        println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        for c in &contenders {
            let calls = c.calls.lock().unwrap();
            let in_phase: Vec<_> =
                calls.iter().filter(|(t, _, _)| *t >= *from && *t < until).collect();
            let ok = in_phase.iter().filter(|(_, _, r)| *r == Result3::Ok).count();
            let failed = in_phase.iter().filter(|(_, _, r)| *r == Result3::Failed).count();
            let rejected = in_phase.iter().filter(|(_, _, r)| *r == Result3::Rejected).count();
            let mut admitted: Vec<Duration> = in_phase
                .iter()
                .filter(|(_, _, r)| *r != Result3::Rejected)
                .map(|(_, d, _)| *d)
                .collect();
            admitted.sort();
            let trace = c.trace.lock().unwrap();
            let limits: Vec<usize> = trace
                .iter()
                .filter(|(t, _, _)| *t >= *from && *t < until)
                .filter_map(|(_, l, _)| *l)
                .collect();
            let mean_limit = if limits.is_empty() {
                "n/a".to_string()
            } else {
                format!("{:.1}", limits.iter().sum::<usize>() as f64 / limits.len() as f64)
            };
            let mut health: Vec<Duration> = c
                .health
                .lock()
                .unwrap()
                .iter()
                .filter(|(t, _)| *t >= *from && *t < until)
                .map(|(_, d)| *d)
                .collect();
            health.sort();
            let peak_busy = c
                .busy
                .lock()
                .unwrap()
                .iter()
                .filter(|(t, _)| *t >= *from && *t < until)
                .map(|(_, n)| *n)
                .max()
                .unwrap_or(0);
            println!(
                "| {} | {:.1} | {} | {} | {} | {} | {} | {} | {} |",
                c.name,
                ok as f64 / secs,
                ms(percentile(&admitted, 50.0)),
                ms(percentile(&admitted, 99.0)),
                failed,
                rejected,
                mean_limit,
                percentile(&health, 99.0).as_micros(),
                peak_busy
            );
        }
        println!();
    }
    println!(
        "Time to adapt: after the step to 2 s (B), until the calls admitted stay at or below the"
    );
    println!(
        "new capacity (8) for a whole second; after the step back (C), until the first second of"
    );
    println!("calls with at least 95 % successes. `never` = not within the phase.\n");
    println!("| contender | adapt after 50 ms -> 2 s | recover after 2 s -> 50 ms |");
    println!("|---|---:|---:|");
    let fmt = |d: Option<Duration>| {
        d.map_or("never".to_string(), |d| format!("{:.1} s", d.as_secs_f64()))
    };
    for c in &contenders {
        let trace = c.trace.lock().unwrap();
        let calls = c.calls.lock().unwrap();
        let adapt = settle_time(&trace, PHASES[1].0, PHASES[2].0, PHASES[1].2);
        let recover = recovery_time(&calls, PHASES[2].0, RUN);
        println!("| {} | {} | {} |", c.name, fmt(adapt), fmt(recover));
    }
    if let Err(err) = std::fs::write(&svg_path, svg(&contenders)) {
        eprintln!("could not write {svg_path}: {err}");
    } else {
        println!("\nSVG: {svg_path}");
    }
}

// ------------------------------------------------------------------------------------
// The SVG: limit (top) and median latency of admitted calls per 500 ms (bottom, log scale).

const COLORS: [&str; 10] = [
    "#000000", "#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
    "#17becf", "#bcbd22",
];

fn svg(contenders: &[Arc<Contender>]) -> String {
    let (w, h, left, top, panel, gap) = (900.0, 640.0, 60.0, 30.0, 240.0, 60.0);
    let plot_w = w - left - 230.0;
    let x = |t: f64| left + t / RUN.as_secs_f64() * plot_w;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    );
    // Axes and phase shading.
    for (i, base) in [top, top + panel + gap].iter().enumerate() {
        s += &format!(
            "<rect x=\"{}\" y=\"{base}\" width=\"{}\" height=\"{panel}\" fill=\"#f3f3f3\"/>\n",
            x(8.0),
            x(20.0) - x(8.0)
        );
        s += &format!("<rect x=\"{left}\" y=\"{base}\" width=\"{plot_w}\" height=\"{panel}\" fill=\"none\" stroke=\"#888\"/>\n");
        for t in (0..=30).step_by(5) {
            s += &format!(
                "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{t}s</text>\n",
                x(t as f64),
                base + panel + 14.0
            );
        }
        let title = if i == 0 {
            "concurrency limit (static: 16; tower-acc exposes none)"
        } else {
            "median latency of admitted calls per 0.5 s (ms, log scale)"
        };
        s += &format!(
            "<text x=\"{left}\" y=\"{}\" font-weight=\"bold\">{title}</text>\n",
            base - 8.0
        );
    }
    s += &format!(
        "<text x=\"{}\" y=\"{}\" fill=\"#666\">downstream 2 s, capacity 8</text>\n",
        x(8.5),
        top + 14.0
    );
    // Top: limits 0..=20.
    let y_limit = |l: f64| top + panel - l / 20.0 * panel;
    for l in [0, 4, 8, 12, 16, 20] {
        s += &format!(
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{l}</text>\n",
            left - 4.0,
            y_limit(l as f64) + 4.0
        );
    }
    // Bottom: latency 10 ms .. 10 s, log.
    let base2 = top + panel + gap;
    let y_lat = |ms: f64| base2 + panel - ((ms.max(10.0)).log10() - 1.0) / 3.0 * panel;
    for l in [10.0, 100.0, 1000.0, 10000.0] {
        s += &format!(
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{l}</text>\n",
            left - 4.0,
            y_lat(l) + 4.0
        );
    }
    for (i, c) in contenders.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let trace = c.trace.lock().unwrap();
        let points: Vec<String> = trace
            .iter()
            .filter_map(|(t, l, _)| {
                l.map(|l| {
                    format!("{:.1},{:.1}", x(t.as_secs_f64()), y_limit(l as f64 + i as f64 * 0.06))
                })
            })
            .collect();
        if !points.is_empty() {
            s += &format!(
                "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"1.5\" points=\"{}\"/>\n",
                points.join(" ")
            );
        }
        let calls = c.calls.lock().unwrap();
        let mut buckets: BTreeMap<u64, Vec<Duration>> = BTreeMap::new();
        for (t, d, r) in calls.iter() {
            if *r != Result3::Rejected {
                buckets.entry(t.as_millis() as u64 / 500).or_default().push(*d);
            }
        }
        let points: Vec<String> = buckets
            .into_iter()
            .map(|(b, mut ds)| {
                ds.sort();
                let med = percentile(&ds, 50.0).as_secs_f64() * 1000.0;
                format!("{:.1},{:.1}", x(b as f64 * 0.5 + 0.25), y_lat(med))
            })
            .collect();
        s += &format!(
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"1.5\" points=\"{}\"/>\n",
            points.join(" ")
        );
        s += &format!(
            "<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"3\" fill=\"{color}\"/><text x=\"{}\" y=\"{}\">{}</text>\n",
            left + plot_w + 15.0,
            top + 10.0 + i as f64 * 18.0,
            left + plot_w + 32.0,
            top + 14.0 + i as f64 * 18.0,
            c.name
        );
    }
    s += "</svg>\n";
    s
}

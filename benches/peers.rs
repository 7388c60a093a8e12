//! Our tower layer next to `tower-resilience-bulkhead`, the closest Rust bulkhead, through the
//! one API both have: a tower `Service` wrapped by each bulkhead layer, called as a client would
//! (`ready().await`, then `call(req).await`) inside a current-thread tokio runtime.
//!
//! `peers <op> <n>` runs one op `n` times and prints the totals of wall time, heap allocations
//! and bytes (counted by a global allocator). `benches/peers.sh` also runs each op under
//! callgrind at `n` and 0 for exact instructions per op. `peers list` prints the ops. Run as a
//! bench target by `cargo bench` (with `--bench` and no op), it does nothing.
//!
//! Both layers wrap the same inner service, which answers at once, except for the request
//! `Hold`, which never completes: one `Hold` call is started (and polled until it holds the
//! permit) before a `*_reject` op, so each bulkhead is full in the same way, with one call in
//! flight.

use std::convert::Infallible;
use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bulkhead::tower::BulkheadLayer;
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use tower::{Layer, Service, ServiceExt};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

/// The ops: name, what it does, and the default `n`.
const OPS: &[(&str, &str, u64)] = &[
    ("bare_call", "the inner service alone: ready + call, no bulkhead", 200_000),
    ("ours_call", "bulkhead::tower::BulkheadLayer, a free permit: ready + call", 200_000),
    ("peer_call", "tower-resilience-bulkhead, a free permit: ready + call", 200_000),
    ("ours_reject", "bulkhead::tower::BulkheadLayer, full, max wait 0: ready + call", 200_000),
    // The peer's `reject_when_full` is `timeout(ZERO, acquire_owned())`: its refusal waits for
    // the runtime timer's next 1 ms tick, so it gets fewer ops.
    ("peer_reject", "tower-resilience-bulkhead, full, reject_when_full: ready + call", 2_000),
];

/// A request: answer at once, or never (to hold the permit).
#[derive(Clone, Copy)]
enum Req {
    Now,
    Hold,
}

/// The inner service both layers wrap: ready at once; `Now` answers at once, `Hold` never.
#[derive(Clone, Copy)]
struct Inner;

impl Service<Req> for Inner {
    type Response = ();
    type Error = Infallible;
    type Future = Answer;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Req) -> Answer {
        Answer(matches!(req, Req::Now))
    }
}

/// `Inner`'s future: ready at once when it holds `true`, pending forever otherwise.
struct Answer(bool);

impl Future for Answer {
    type Output = Result<(), Infallible>;

    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
        if self.0 {
            Poll::Ready(Ok(()))
        } else {
            Poll::Pending
        }
    }
}

/// Our layer over `Inner`: limit 1, max wait 0.
fn ours() -> impl Service<Req, Response = (), Error = tower::BoxError> + Clone {
    let config = bulkhead::BulkheadConfig::builder()
        .max_concurrent_calls(1)
        .max_wait_duration(Duration::ZERO)
        .build()
        .expect("a valid bench configuration");
    BulkheadLayer::new(Arc::new(bulkhead::Bulkhead::new("bench", config))).layer(Inner)
}

/// The peer's layer over `Inner`: limit 1, `reject_when_full` (its max wait 0).
fn peer() -> impl Service<Req, Response = (), Error = impl std::fmt::Debug> + Clone {
    tower_resilience_bulkhead::BulkheadLayer::builder()
        .max_concurrent_calls(1)
        .reject_when_full()
        .build()
        .expect("a valid bench configuration")
        .layer(Inner)
}

/// Runs `n` calls of `req` through `svc`; returns how many were refused. With `hold`, one
/// call that never completes is started first and polled until it holds the permit.
fn calls<S>(rt: &tokio::runtime::Runtime, svc: S, n: u64, hold: bool) -> u64
where
    S: Service<Req, Response = ()> + Clone,
{
    rt.block_on(async move {
        let mut svc = svc;
        let mut holder = svc.clone();
        let mut held = std::pin::pin!(async move {
            if hold {
                let _ = holder.ready().await.ok().expect("ready").call(Req::Hold).await;
            }
        });
        // The held call takes the permit on its first poll, and stays in flight (pending,
        // never polled again) until the end.
        let _ = futures::poll!(held.as_mut());
        let mut refused = 0;
        for _ in 0..n {
            let ready = svc.ready().await.ok().expect("every layer here is ready at once");
            if black_box(ready.call(black_box(Req::Now)).await).is_err() {
                refused += 1;
            }
        }
        refused
    })
}

fn run(op: &str, n: u64) -> Result<u64, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread runtime");
    let refused = match op {
        "bare_call" => calls(&rt, tower::service_fn(|r| Inner.call(r)), n, false),
        "ours_call" => calls(&rt, ours(), n, false),
        "peer_call" => calls(&rt, peer(), n, false),
        "ours_reject" => calls(&rt, ours(), n, true),
        "peer_reject" => calls(&rt, peer(), n, true),
        _ => return Err(format!("unknown op {op:?} (`peers list` prints them)")),
    };
    let expected = if op.ends_with("_reject") { n } else { 0 };
    if refused != expected {
        return Err(format!("{op}: {refused} of {n} calls refused, expected {expected}"));
    }
    Ok(refused)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        // `cargo bench` runs every bench target with `--bench`: nothing to do here.
        None => {}
        Some(flag) if flag.starts_with("--") => {}
        Some("list") => {
            for (name, what, n) in OPS {
                println!("{name}\t{what}\t{n}");
            }
        }
        Some(op) => {
            let default = OPS.iter().find(|(name, ..)| *name == op).map_or(1, |o| o.2);
            let n = args.get(1).and_then(|n| n.parse().ok()).unwrap_or(default);
            let region = Region::new(GLOBAL);
            let start = Instant::now();
            let result = run(op, n);
            let elapsed = start.elapsed();
            let stats = region.change();
            match result {
                // Totals: `benches/peers.sh` runs each op at `n` and at 0 and divides the
                // difference by `n`, so the runtime's set-up cancels out.
                Ok(_) => println!(
                    "{op}\tn={n}\tns={}\tallocs={}\tbytes={}",
                    elapsed.as_nanos(),
                    stats.allocations,
                    stats.bytes_allocated
                ),
                Err(err) => {
                    eprintln!("{err}");
                    std::process::exit(2);
                }
            }
        }
    }
}

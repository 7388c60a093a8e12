//! The measuring part of `examples/sustained_overload.rs`, shared with
//! `tests/overload_smoke.rs`: a downstream of fixed capacity, an open-loop Poisson load, the
//! admission front-ends in one table, and what each call came to.
//!
//! Every arrival is its own tokio task that runs admission and then the downstream call to
//! the end, whatever its client does meanwhile (a server without deadline propagation); a
//! client's deadline only decides whether an answer was still wanted. So at the end
//! `served + refused == arrivals` exactly, and the goodput for any deadline is read off the
//! served calls' latencies afterwards ([`Tally::goodput_per_sec`]), from the same run.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bulkhead::{Bulkhead, BulkheadConfig, BulkheadConfigBuilder, QueueOrder};
use tokio::sync::Semaphore;
use tower::util::BoxCloneService;
use tower::{Layer, ServiceExt};
use tower_resilience_bulkhead::{BulkheadError, BulkheadServiceError};

/// What every contender runs against: the same downstream, limit, wait and load.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// The downstream's concurrent slots, and every front-end's limit.
    pub capacity: usize,
    /// The downstream's service time per call (a tokio sleep, so ~1 ms coarser in practice).
    pub service: Duration,
    /// How long a front-end lets a caller wait for a slot.
    pub max_wait: Duration,
    /// Mean arrivals per second (open loop, Poisson).
    pub rate: f64,
    /// How long arrivals keep coming.
    pub run_for: Duration,
    /// Seeds the arrival gaps: one schedule per seed, the same for every contender.
    pub seed: u64,
}

impl Scenario {
    /// A bulkhead configuration with this scenario's limit and max wait, then `order`'s
    /// settings (the queue order, for the contenders that differ in it).
    pub fn bulkhead_config(
        &self,
        order: fn(BulkheadConfigBuilder) -> BulkheadConfigBuilder,
    ) -> BulkheadConfig {
        order(
            BulkheadConfig::builder()
                .max_concurrent_calls(self.capacity)
                .max_wait_duration(self.max_wait),
        )
        .build()
        .expect("the scenario's limit and max wait are valid")
    }
}

/// How a contender admits a call to the downstream.
pub enum FrontEnd {
    /// `bulkhead::Bulkhead` with this configuration, through `acquire_owned_async` (its wait
    /// bounded by the configuration's max wait).
    Bulkhead(BulkheadConfig),
    /// `tokio::sync::Semaphore::acquire_owned` inside `tokio::time::timeout(max_wait)`.
    TokioTimeout,
    /// `tower-resilience-bulkhead`'s layer (its rejection mode, the permit taken in `call`)
    /// with `max_wait_duration(max_wait)`.
    TowerResilience,
}

/// One row of the comparison: a name and how to build its front-end for a scenario.
pub struct Contender {
    /// The row's name in the report and for `--only`.
    pub name: &'static str,
    /// Builds the front-end (same limit and max wait for all: the scenario's).
    pub front_end: fn(&Scenario) -> FrontEnd,
}

/// Adaptive LIFO's target: half the downstream's own latency, so a served call waits at
/// most about that long once the queue stands.
pub const ADAPTIVE_TARGET: Duration = Duration::from_millis(10);
/// Adaptive LIFO's interval: how long the oldest waiter must stay past the target before
/// the queue counts as standing (CoDel's usual 100 ms).
pub const ADAPTIVE_INTERVAL: Duration = Duration::from_millis(100);

/// The contenders, in report order. Refusals, `Evicted` included, are counted by
/// `RejectReason::label`.
pub const CONTENDERS: &[Contender] = &[
    Contender {
        name: "bulkhead-fifo",
        front_end: |s| FrontEnd::Bulkhead(s.bulkhead_config(|b| b)),
    },
    Contender {
        name: "bulkhead-lifo",
        front_end: |s| FrontEnd::Bulkhead(s.bulkhead_config(|b| b.queue_order(QueueOrder::Lifo))),
    },
    Contender {
        name: "bulkhead-adaptive-lifo",
        front_end: |s| {
            FrontEnd::Bulkhead(s.bulkhead_config(|b| {
                b.queue_order(QueueOrder::AdaptiveLifo {
                    target: ADAPTIVE_TARGET,
                    interval: ADAPTIVE_INTERVAL,
                })
            }))
        },
    },
    Contender { name: "tokio-semaphore+timeout", front_end: |_| FrontEnd::TokioTimeout },
    Contender { name: "tower-resilience-bulkhead", front_end: |_| FrontEnd::TowerResilience },
];

/// The simulated downstream: `capacity` slots, each call holds one for `service`. A call
/// that finds no free slot queues for one and is counted: with every front-end's limit equal
/// to the capacity that count stays zero (the front-end, not the downstream, does the
/// queueing).
pub struct Downstream {
    slots: Semaphore,
    service: Duration,
    queued: AtomicU64,
}

impl Downstream {
    /// A downstream with `capacity` slots and `service` per call.
    pub fn new(capacity: usize, service: Duration) -> Self {
        Downstream { slots: Semaphore::new(capacity), service, queued: AtomicU64::new(0) }
    }

    /// One call: takes a slot (queueing if none is free), works for the service time.
    pub async fn call(&self) {
        let _slot = match self.slots.try_acquire() {
            Ok(slot) => slot,
            Err(_) => {
                // Ordering: Relaxed — a counter, read after every call's task was joined
                // (the join orders it).
                self.queued.fetch_add(1, Ordering::Relaxed);
                self.slots.acquire().await.expect("the downstream's semaphore is never closed")
            }
        };
        tokio::time::sleep(self.service).await;
    }

    /// How many calls found every slot taken.
    pub fn queued(&self) -> u64 {
        // Ordering: Relaxed — read after every call's task was joined (the join orders it).
        self.queued.load(Ordering::Relaxed)
    }
}

/// What one arrival came to.
#[derive(Clone, Copy, Debug)]
pub enum Outcome {
    /// Admitted and answered, `latency` after its arrival (queueing included), at `done`.
    Served {
        /// From the scheduled arrival to the answer.
        latency: Duration,
        /// When the answer came.
        done: Instant,
    },
    /// Refused by the front-end, for this reason.
    Refused(&'static str),
}

/// A contender's admission path, shared by its calls' tasks.
#[derive(Clone)]
enum Gate {
    Ours(Arc<Bulkhead>),
    Tokio(Arc<Semaphore>, Duration),
    Tower(BoxCloneService<(), (), BulkheadServiceError<Infallible>>),
}

impl Gate {
    fn new(front_end: FrontEnd, scenario: &Scenario, downstream: &Arc<Downstream>) -> Gate {
        match front_end {
            FrontEnd::Bulkhead(config) => Gate::Ours(Arc::new(Bulkhead::new("downstream", config))),
            FrontEnd::TokioTimeout => {
                Gate::Tokio(Arc::new(Semaphore::new(scenario.capacity)), scenario.max_wait)
            }
            FrontEnd::TowerResilience => {
                let downstream = Arc::clone(downstream);
                let inner = tower::service_fn(move |()| {
                    let downstream = Arc::clone(&downstream);
                    async move {
                        downstream.call().await;
                        Ok::<(), Infallible>(())
                    }
                });
                let layer = tower_resilience_bulkhead::BulkheadLayer::builder()
                    .max_concurrent_calls(scenario.capacity)
                    .max_wait_duration(scenario.max_wait)
                    .build()
                    .expect("the scenario's limit and max wait are valid");
                Gate::Tower(BoxCloneService::new(layer.layer(inner)))
            }
        }
    }

    /// Admits one call and runs it on `downstream`; what it came to, timed from `arrived`.
    async fn call(self, downstream: Arc<Downstream>, arrived: Instant) -> Outcome {
        match self {
            Gate::Ours(bulkhead) => match bulkhead.acquire_owned_async().await {
                Ok(permit) => {
                    downstream.call().await;
                    drop(permit);
                }
                Err(refused) => return Outcome::Refused(refused.reason().label()),
            },
            Gate::Tokio(semaphore, max_wait) => {
                match tokio::time::timeout(max_wait, semaphore.acquire_owned()).await {
                    Ok(Ok(permit)) => {
                        downstream.call().await;
                        drop(permit);
                    }
                    Ok(Err(_closed)) => return Outcome::Refused("closed"),
                    Err(_elapsed) => return Outcome::Refused("timeout"),
                }
            }
            Gate::Tower(service) => match service.oneshot(()).await {
                Ok(()) => {}
                Err(BulkheadServiceError::Bulkhead(refused)) => {
                    return Outcome::Refused(match refused {
                        BulkheadError::Timeout => "timeout",
                        BulkheadError::BulkheadFull { .. } => "full",
                        BulkheadError::Closed => "closed",
                        BulkheadError::NotReady => "not_ready",
                    })
                }
                Err(BulkheadServiceError::Inner(never)) => match never {},
            },
        }
        let done = Instant::now();
        Outcome::Served { latency: done - arrived, done }
    }
}

/// splitmix64: a seeded, dependency-free source of the arrival gaps.
struct Gaps {
    state: u64,
    rate: f64,
}

impl Gaps {
    /// The next exponential gap (mean `1 / rate` seconds).
    fn next(&mut self) -> Duration {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        // Uniform in (0, 1]: the top 53 bits, shifted off zero.
        let uniform = ((z >> 11) + 1) as f64 / (1u64 << 53) as f64;
        Duration::from_secs_f64(-uniform.ln() / self.rate)
    }
}

/// What one contender's run came to.
#[derive(Debug)]
pub struct Tally {
    /// Calls that arrived during the run.
    pub arrivals: u64,
    /// Latency (arrival to answer) of every served call, sorted.
    pub served: Vec<Duration>,
    /// Latency of the served calls answered before arrivals stopped, sorted: goodput's
    /// numerator is taken from these (the run's length is its denominator, so the calls
    /// still draining after the last arrival do not inflate it).
    pub served_in_run: Vec<Duration>,
    /// How long arrivals kept coming.
    pub run_for: Duration,
    /// Refusals by reason (the front-end's own name for it).
    pub refused: BTreeMap<&'static str, u64>,
    /// Calls that found the downstream's every slot taken (0 when the front-end holds).
    pub downstream_queued: u64,
    /// How late each arrival was spawned after its scheduled time (the load generator's
    /// lag, which counts in that call's latency), sorted.
    pub spawn_lag: Vec<Duration>,
}

impl Tally {
    /// Served calls.
    pub fn served_count(&self) -> u64 {
        self.served.len() as u64
    }

    /// Refused calls, every reason.
    pub fn refused_count(&self) -> u64 {
        self.refused.values().sum()
    }

    /// Goodput for clients that give up after `deadline`: calls answered within it (and
    /// before arrivals stopped) per second of arrivals.
    pub fn goodput_per_sec(&self, deadline: Duration) -> f64 {
        let on_time = self.served_in_run.partition_point(|&latency| latency <= deadline);
        on_time as f64 / self.run_for.as_secs_f64()
    }

    /// Served calls answered after `deadline`: their clients had given up.
    pub fn late(&self, deadline: Duration) -> u64 {
        (self.served.len() - self.served.partition_point(|&latency| latency <= deadline)) as u64
    }

    /// The `q` quantile (0..=1) of served latency.
    pub fn quantile(&self, q: f64) -> Duration {
        quantile(&self.served, q)
    }
}

/// The `q` quantile (0..=1) of `sorted` by the nearest rank; zero if it is empty.
pub fn quantile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Runs `contender` through `scenario` on the current tokio runtime: arrivals for
/// `run_for`, then every call still waiting or in service is let finish.
pub async fn run(contender: &Contender, scenario: &Scenario) -> Tally {
    let downstream = Arc::new(Downstream::new(scenario.capacity, scenario.service));
    let gate = Gate::new((contender.front_end)(scenario), scenario, &downstream);
    let mut gaps = Gaps { state: scenario.seed, rate: scenario.rate };
    let start = tokio::time::Instant::now();
    let end = start + scenario.run_for;
    let mut at = start;
    let mut calls = Vec::new();
    let mut spawn_lag = Vec::new();
    loop {
        at += gaps.next();
        if at >= end {
            break;
        }
        tokio::time::sleep_until(at).await;
        spawn_lag.push(at.elapsed());
        let call = gate.clone().call(Arc::clone(&downstream), at.into_std());
        calls.push(tokio::spawn(call));
    }
    let mut tally = Tally {
        arrivals: calls.len() as u64,
        served: Vec::with_capacity(calls.len()),
        served_in_run: Vec::with_capacity(calls.len()),
        run_for: scenario.run_for,
        refused: BTreeMap::new(),
        downstream_queued: 0,
        spawn_lag,
    };
    let end = end.into_std();
    for call in calls {
        match call.await.expect("a call's task does not panic") {
            Outcome::Served { latency, done } => {
                tally.served.push(latency);
                if done <= end {
                    tally.served_in_run.push(latency);
                }
            }
            Outcome::Refused(reason) => *tally.refused.entry(reason).or_default() += 1,
        }
    }
    tally.served.sort_unstable();
    tally.served_in_run.sort_unstable();
    tally.spawn_lag.sort_unstable();
    tally.downstream_queued = downstream.queued();
    tally
}

/// The downstream's own latency: `calls` calls one after another, nothing else running,
/// each timed from its start to its answer; sorted.
pub async fn no_load_latency(scenario: &Scenario, calls: usize) -> Vec<Duration> {
    let downstream = Downstream::new(scenario.capacity, scenario.service);
    let mut latencies = Vec::with_capacity(calls);
    for _ in 0..calls {
        let start = Instant::now();
        downstream.call().await;
        latencies.push(start.elapsed());
    }
    latencies.sort_unstable();
    latencies
}

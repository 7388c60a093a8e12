//! Bulkhead metrics through the `metrics` crate's facade (feature `metrics`).
//!
//! [`register`] gives a bulkhead the metrics a service team puts on a dashboard, exported by
//! whatever recorder the application installed (Prometheus, StatsD, OpenTelemetry, ...).
//! Every metric carries the label `name` (the bulkhead's name):
//!
//! | metric | kind | meaning |
//! |--------|------|---------|
//! | `resilience4j_bulkhead_available_concurrent_calls` | gauge | free slots (Resilience4j's name, so existing dashboards work) |
//! | `resilience4j_bulkhead_max_allowed_concurrent_calls` | gauge | the current limit (Resilience4j's name) |
//! | `bulkhead_in_flight_calls` | gauge | calls holding a permit |
//! | `bulkhead_waiting_calls` | gauge | callers queued for a slot |
//! | `bulkhead_closed` | gauge | 1 once [`Bulkhead::close`] ran (the bulkhead refuses every call), else 0 |
//! | `bulkhead_calls_permitted_total` | counter | calls admitted |
//! | `bulkhead_calls_rejected_total` | counter | calls refused, label `reason`: [`RejectReason::label`] (`full`, `wait_timed_out`, `too_many_waiting`, `closed`, `too_many_keys`, `exceeds_limit`, `evicted`, `reserved`) |
//! | `bulkhead_calls_finished_total` | counter | permits released (call returned, unwound or was cancelled) |
//! | `bulkhead_adaptive_limit`, `_min_limit`, `_max_limit`, `_samples_total`, and the algorithm's estimates | gauges, counter | only for a bulkhead with an adaptive limit attached ([`Bulkhead::set_adaptive_limit`]): the controller's state |
//! | `bulkhead_wait_duration_seconds` | histogram | time spent getting a permit, label `outcome`: `permitted` or `rejected`; zero for a permit taken at once or an immediate refusal (also counted as zero: a queued caller refused by `close`, and an unbounded async wait that began before the bulkhead was observed, which never read the clock) |
//!
//! # Everything is read when you scrape: call [`collect`]
//!
//! The `metrics` facade has no pull callbacks, so the values are handed over at scrape
//! time: your `/metrics` handler calls [`collect`] (every registered bulkhead) or
//! [`InstrumentedBulkhead::collect`] (one) right before it renders. That reads each
//! bulkhead once, lock-free, and hands the recorder:
//!
//! - the gauges, `set` from one [`Bulkhead::metrics`] snapshot;
//! - the counters, as `absolute` values: the bulkhead counts calls itself (see
//!   [`Bulkhead::enable_counters`]), each thread in its own cells, so Prometheus shows
//!   exactly what callers saw, and a call costs no recorder lookup, no lock and no shared
//!   cache-line write;
//! - the wait histogram, as the samples that arrived since the previous collection: zero
//!   waits (permits taken at once, immediate refusals) as 0, and each slow-path bucket's
//!   new samples as their mean wait, so the exported count and sum are exact and so are
//!   the exporter's buckets at the bounds of [`WAIT_BUCKETS`].
//!
//! Nothing on the call path touches the recorder. Pushing gauges from the call path would
//! be wrong, not only slower: no event fires when a caller starts waiting or on
//! [`Bulkhead::change_config`], and two threads finishing at once could `set` their
//! snapshots in the wrong order, leaving an idle bulkhead showing a call in flight.
//!
//! If the exporter renders on its own (the Prometheus exporter's built-in HTTP listener),
//! there is no scrape hook: call [`collect`] from a timer instead (the values are then as
//! old as the timer's period).
//!
//! # Examples
//!
//! ```
//! use std::sync::Arc;
//! use bulkhead::metrics_export::{WAIT_BUCKETS, WAIT_DURATION};
//! use bulkhead::{Bulkhead, BulkheadConfig};
//! use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
//!
//! // Buckets for the wait histogram (see WAIT_BUCKETS); without them it renders as a summary.
//! let mut buckets = vec![0.0];
//! buckets.extend_from_slice(WAIT_BUCKETS);
//! let recorder = PrometheusBuilder::new()
//!     .set_buckets_for_metric(Matcher::Full(WAIT_DURATION.to_owned()), &buckets)?
//!     .build_recorder();
//! let handle = recorder.handle();
//! // An application installs the recorder globally (`metrics::set_global_recorder`);
//! // a local one keeps this example self-contained.
//! let bank = metrics::with_local_recorder(&recorder, || {
//!     let bank = Arc::new(Bulkhead::new("bank", BulkheadConfig::for_pool(20)));
//!     bulkhead::metrics_export::register(&bank)
//! });
//!
//! let balance = bank.bulkhead().call(|| "42.00 EUR")?;
//! assert_eq!(balance, "42.00 EUR");
//!
//! // The /metrics handler: collect, then render.
//! bulkhead::metrics_export::collect();
//! let text = handle.render();
//! assert!(text.contains(r#"resilience4j_bulkhead_available_concurrent_calls{name="bank"} 16"#));
//! assert!(text.contains(r#"bulkhead_calls_permitted_total{name="bank"} 1"#));
//! assert!(text.contains(
//!     r#"bulkhead_wait_duration_seconds_bucket{name="bank",outcome="permitted",le="0"} 1"#
//! ));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use core::future::Future;
use std::fmt;
use std::sync::{Arc, Mutex, Weak};

use metrics::{
    counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram, Counter,
    Gauge, Histogram, Unit,
};

use crate::bulkhead::error::BulkheadFull;
use crate::bulkhead::permit::OwnedPermit;
use crate::bulkhead::permit::Permit;
use crate::bulkhead::Bulkhead;
use crate::observe::metrics::BulkheadMetrics;
use crate::observe::reason::RejectReason;
use crate::observe::{CallCounts, Outcome, WaitSnapshot, REASONS, WAIT_BUCKETS as BUCKETS};

/// Gauge: free slots. Resilience4j's Prometheus name.
pub const AVAILABLE_CONCURRENT_CALLS: &str = "resilience4j_bulkhead_available_concurrent_calls";
/// Gauge: the current limit. Resilience4j's Prometheus name.
pub const MAX_ALLOWED_CONCURRENT_CALLS: &str = "resilience4j_bulkhead_max_allowed_concurrent_calls";
/// Gauge: calls holding a permit.
pub const IN_FLIGHT_CALLS: &str = "bulkhead_in_flight_calls";
/// Gauge: callers queued for a slot.
pub const WAITING_CALLS: &str = "bulkhead_waiting_calls";
/// Gauge: 1 once the bulkhead is closed ([`Bulkhead::close`]), else 0.
pub const CLOSED: &str = "bulkhead_closed";
/// Counter: calls admitted.
pub const CALLS_PERMITTED: &str = "bulkhead_calls_permitted_total";
/// Counter: calls refused, labelled `reason` ([`RejectReason::label`]: `full`,
/// `wait_timed_out`, `too_many_waiting`, `closed`, `too_many_keys`, `exceeds_limit`,
/// `evicted`, `reserved`).
pub const CALLS_REJECTED: &str = "bulkhead_calls_rejected_total";
/// Counter: permits released.
pub const CALLS_FINISHED: &str = "bulkhead_calls_finished_total";
/// Histogram (seconds): time spent getting a permit, labelled `outcome` (`permitted`,
/// `rejected`).
pub const WAIT_DURATION: &str = "bulkhead_wait_duration_seconds";

/// The bucket bounds (seconds) the bulkhead sorts slow-path waits into, besides zero. Give
/// them (with `0.0`) to your exporter's histogram buckets for [`WAIT_DURATION`] and its
/// bucket counts are exact:
///
/// ```
/// use bulkhead::metrics_export::{WAIT_BUCKETS, WAIT_DURATION};
/// use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
///
/// let mut buckets = vec![0.0];
/// buckets.extend_from_slice(WAIT_BUCKETS);
/// let builder = PrometheusBuilder::new()
///     .set_buckets_for_metric(Matcher::Full(WAIT_DURATION.to_owned()), &buckets)?;
/// # drop(builder);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub const WAIT_BUCKETS: &[f64] = &[0.0001, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0];

fn describe() {
    describe_gauge!(AVAILABLE_CONCURRENT_CALLS, Unit::Count, "Free slots in the bulkhead");
    describe_gauge!(MAX_ALLOWED_CONCURRENT_CALLS, Unit::Count, "The bulkhead's current limit");
    describe_gauge!(IN_FLIGHT_CALLS, Unit::Count, "Calls holding a bulkhead permit");
    describe_gauge!(WAITING_CALLS, Unit::Count, "Callers queued for a bulkhead slot");
    describe_gauge!(CLOSED, Unit::Count, "1 once the bulkhead is closed, else 0");
    describe_counter!(CALLS_PERMITTED, Unit::Count, "Calls the bulkhead admitted");
    describe_counter!(CALLS_REJECTED, Unit::Count, "Calls the bulkhead refused, by reason");
    describe_counter!(CALLS_FINISHED, Unit::Count, "Bulkhead permits released");
    describe_histogram!(WAIT_DURATION, Unit::Seconds, "Time spent getting a bulkhead permit");
}

/// The counter handles, resolved once.
struct Counters {
    permitted: Counter,
    rejected: [Counter; REASONS],
    finished: Counter,
}

impl Counters {
    fn new(name: &str) -> Self {
        Counters {
            permitted: counter!(CALLS_PERMITTED, "name" => name.to_owned()),
            rejected: RejectReason::ALL.map(|reason| {
                counter!(CALLS_REJECTED, "name" => name.to_owned(), "reason" => reason.label())
            }),
            finished: counter!(CALLS_FINISHED, "name" => name.to_owned()),
        }
    }

    fn set(&self, counts: &CallCounts) {
        self.permitted.absolute(counts.permitted);
        for (counter, &count) in self.rejected.iter().zip(&counts.rejected) {
            counter.absolute(count);
        }
        self.finished.absolute(counts.finished);
    }
}

struct Gauges {
    available: Gauge,
    max_allowed: Gauge,
    in_flight: Gauge,
    waiting: Gauge,
    closed: Gauge,
}

impl Gauges {
    fn new(name: &str) -> Self {
        Gauges {
            available: gauge!(AVAILABLE_CONCURRENT_CALLS, "name" => name.to_owned()),
            max_allowed: gauge!(MAX_ALLOWED_CONCURRENT_CALLS, "name" => name.to_owned()),
            in_flight: gauge!(IN_FLIGHT_CALLS, "name" => name.to_owned()),
            waiting: gauge!(WAITING_CALLS, "name" => name.to_owned()),
            closed: gauge!(CLOSED, "name" => name.to_owned()),
        }
    }

    fn set(&self, m: &BulkheadMetrics) {
        // Values are at most 2^30 - 1 (the engine's limit), exact in an f64.
        self.available.set(m.available_concurrent_calls() as f64);
        self.max_allowed.set(m.max_allowed_concurrent_calls() as f64);
        self.in_flight.set(m.in_flight_calls() as f64);
        self.waiting.set(m.waiting_calls() as f64);
        self.closed.set(if m.is_closed() { 1.0 } else { 0.0 });
    }
}

/// One outcome's wait histogram, and what it was fed so far.
struct Waits {
    histogram: Histogram,
    /// Zero waits fed so far.
    zero: u64,
    /// Slow-path samples fed so far.
    fed: WaitSnapshot,
}

impl Waits {
    fn new(name: &str, outcome: &'static str) -> Self {
        Waits {
            histogram: histogram!(WAIT_DURATION, "name" => name.to_owned(), "outcome" => outcome),
            zero: 0,
            fed: WaitSnapshot::default(),
        }
    }

    /// Takes the samples that arrived since the last call, to feed to the recorder after the
    /// lock (see [`Fed::record`]). `total` counts every wait with this outcome, zero or not;
    /// `now` holds the slow-path (non-zero) ones.
    fn feed(&mut self, total: u64, now: &WaitSnapshot) -> Fed {
        let mut fed = Fed { histogram: self.histogram.clone(), samples: Vec::new() };
        for bucket in 0..BUCKETS {
            let count = now.count[bucket].wrapping_sub(self.fed.count[bucket]);
            if count == 0 {
                continue;
            }
            let nanos = now.nanos[bucket].wrapping_sub(self.fed.nanos[bucket]);
            // The samples' mean: their sum stays exact, and a mean of waits within a
            // bucket's bounds is within them too.
            let mean = nanos as f64 / count as f64 / 1e9;
            fed.samples.push((mean, usize::try_from(count).unwrap_or(usize::MAX)));
        }
        self.fed = *now;
        // The counters and the slow-path samples are read one after the other: a wait that
        // is in the samples but not yet in `total` makes `zero` look smaller for one
        // collection. Feed only growth; the next collection catches up.
        let slow = now.count.iter().fold(0u64, |sum, n| sum.wrapping_add(*n));
        let zero = total.saturating_sub(slow);
        if zero > self.zero {
            let new = usize::try_from(zero - self.zero).unwrap_or(usize::MAX);
            fed.samples.push((0.0, new));
            self.zero = zero;
        }
        fed
    }
}

/// Samples taken from a [`Waits`] under its lock, recorded after it: the recorder is user
/// code (it may scrape, or register, from inside), which never runs under a lock of ours.
struct Fed {
    histogram: Histogram,
    /// (wait in seconds, how many), for `record_many`.
    samples: Vec<(f64, usize)>,
}

impl Fed {
    fn record(self) {
        for (value, count) in self.samples {
            self.histogram.record_many(value, count);
        }
    }
}

struct Inner {
    bulkhead: Arc<Bulkhead>,
    gauges: Gauges,
    counters: Counters,
    /// Permitted, rejected. A lock on the scrape path only: two concurrent collections
    /// must not feed the same samples twice.
    waits: Mutex<[Waits; 2]>,
}

impl Inner {
    fn collect(&self) {
        let m = self.bulkhead.metrics();
        self.gauges.set(&m);
        record_adaptive(&self.bulkhead);
        let Some(counters) = self.bulkhead.counters() else {
            return;
        };
        // Read the counts after the snapshot above: never older than the gauges.
        let counts = counters.counts();
        self.counters.set(&counts);
        let mut waits = self.waits.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let rejected = counts.rejected.iter().fold(0u64, |sum, n| sum.wrapping_add(*n));
        let [permitted_waits, rejected_waits] = &mut *waits;
        // Each sample is taken once under the lock (two concurrent collections never feed it
        // twice), and handed to the recorder after it.
        let permitted = permitted_waits.feed(counts.permitted, &counters.waits(Outcome::Permitted));
        let rejected = rejected_waits.feed(rejected, &counters.waits(Outcome::Rejected));
        drop(waits);
        permitted.record();
        rejected.record();
    }
}

/// Every [`register`]ed bulkhead still alive, for [`collect`].
static REGISTERED: Mutex<Vec<Weak<dyn Collect>>> = Mutex::new(Vec::new());

/// A registration [`collect`] reads: a plain bulkhead's, or a keyed one's.
trait Collect: Send + Sync {
    fn collect(&self);
}

impl Collect for Inner {
    fn collect(&self) {
        Inner::collect(self);
    }
}

/// Adds a registration to those [`collect`] reads (forgetting the dropped ones).
fn remember(registration: Weak<dyn Collect>) {
    let mut registered = REGISTERED.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    registered.retain(|weak| weak.strong_count() > 0);
    registered.push(registration);
}

/// What [`register`] takes: any bulkhead of the family, shared in an `Arc` (a plain or
/// adaptive [`Bulkhead`], a [`KeyedBulkhead`](crate::keyed::KeyedBulkhead)). Sealed.
pub trait Register: register_sealed::Sealed {
    /// The handle `register` returns: keep it (or a clone) to keep exporting.
    type Registered;

    /// Registers `self`: see [`register`].
    #[doc(hidden)]
    fn register(&self) -> Self::Registered;
}

mod register_sealed {
    pub trait Sealed {}
    impl Sealed for std::sync::Arc<crate::bulkhead::Bulkhead> {}
    impl<K, S> Sealed for std::sync::Arc<crate::keyed::KeyedBulkhead<K, S>> {}
}

/// Starts exporting `bulkhead`'s metrics to the recorder that is current now (the global
/// one, or a local one set with `metrics::with_local_recorder`). The one export path of
/// the family: a plain `Arc<Bulkhead>`, one with an adaptive limit attached (its
/// `bulkhead_adaptive_*` gauges come with it), or an `Arc<KeyedBulkhead>` (its capped
/// per-key series and its total: [`InstrumentedKeyed`]).
///
/// It describes the metrics, resolves their handles once, turns on the bulkhead's own call
/// counters ([`Bulkhead::enable_counters`]), and adds the bulkhead to those [`collect`]
/// reads. Keep the returned handle ([`InstrumentedBulkhead`], [`InstrumentedKeyed`]; cheap
/// to clone): the bulkhead is exported while any clone of it is alive. Registering a
/// bulkhead again is harmless (counters are exported as absolute values), but keeps two
/// handles on the same series.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use bulkhead::{Bulkhead, BulkheadConfig};
///
/// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
/// let handle = recorder.handle();
/// let bank = Arc::new(Bulkhead::new("bank", BulkheadConfig::builder().max_concurrent_calls(0).build()?));
/// let instrumented =
///     metrics::with_local_recorder(&recorder, || bulkhead::metrics_export::register(&bank));
/// assert!(bank.try_acquire().is_err()); // counted by the bulkhead, whoever calls
/// assert!(Arc::ptr_eq(instrumented.bulkhead(), &bank));
/// instrumented.collect();
/// assert!(handle
///     .render()
///     .contains(r#"bulkhead_calls_rejected_total{name="bank",reason="full"} 1"#));
/// # Ok::<(), bulkhead::ConfigError>(())
/// ```
pub fn register<B: Register>(bulkhead: &B) -> B::Registered {
    bulkhead.register()
}

impl Register for Arc<Bulkhead> {
    type Registered = InstrumentedBulkhead;

    fn register(&self) -> InstrumentedBulkhead {
        register_plain(self)
    }
}

fn register_plain(bulkhead: &Arc<Bulkhead>) -> InstrumentedBulkhead {
    describe();
    bulkhead.enable_counters();
    let name = bulkhead.name();
    let inner = Arc::new(Inner {
        bulkhead: Arc::clone(bulkhead),
        gauges: Gauges::new(name),
        counters: Counters::new(name),
        waits: Mutex::new([Waits::new(name, "permitted"), Waits::new(name, "rejected")]),
    });
    remember(Arc::downgrade(&inner) as Weak<dyn Collect>);
    let instrumented = InstrumentedBulkhead { inner };
    instrumented.collect();
    instrumented
}

/// Hands the recorder the current values of every registered bulkhead: call it from your
/// `/metrics` handler right before rendering (see the [module docs](self)).
///
/// Reads each bulkhead lock-free (one load of its state word, a sum of its counter cells)
/// and never blocks a call. Bulkheads whose [`InstrumentedBulkhead`] clones are all dropped
/// are skipped and forgotten.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use bulkhead::{Bulkhead, BulkheadConfig};
///
/// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
/// let (bank, payments) = metrics::with_local_recorder(&recorder, || {
///     let register = |name| {
///         bulkhead::metrics_export::register(&Arc::new(Bulkhead::new(name, BulkheadConfig::for_pool(10))))
///     };
///     (register("bank"), register("payments"))
/// });
/// let _held = payments.bulkhead().try_acquire()?;
///
/// // In the scrape handler:
/// bulkhead::metrics_export::collect();
/// let text = recorder.handle().render();
/// assert!(text.contains(r#"bulkhead_in_flight_calls{name="bank"} 0"#));
/// assert!(text.contains(r#"bulkhead_in_flight_calls{name="payments"} 1"#));
/// # drop(bank);
/// # Ok::<(), bulkhead::BulkheadFull>(())
/// ```
pub fn collect() {
    let live: Vec<Arc<dyn Collect>> = {
        let mut registered = REGISTERED.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        registered.retain(|weak| weak.strong_count() > 0);
        registered.iter().filter_map(Weak::upgrade).collect()
    };
    for inner in live {
        inner.collect();
    }
}

/// Sets `bulkhead`'s gauges, and its counters if it counts calls, from a fresh snapshot,
/// looking them up in the current recorder.
///
/// For exporters that iterate over many bulkheads (a registry, say) without registering
/// each. The wait histogram needs [`register`] (it remembers what it already exported).
///
/// # Examples
///
/// ```
/// use bulkhead::{Bulkhead, BulkheadConfig};
///
/// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
/// let bulkheads = [
///     Bulkhead::new("bank", BulkheadConfig::for_pool(20)),
///     Bulkhead::new("payments", BulkheadConfig::for_pool(10)),
/// ];
/// let _held = bulkheads[1].try_acquire()?;
/// metrics::with_local_recorder(&recorder, || {
///     for bulkhead in &bulkheads {
///         bulkhead::metrics_export::record(bulkhead);
///     }
/// });
/// let text = recorder.handle().render();
/// assert!(text.contains(r#"resilience4j_bulkhead_max_allowed_concurrent_calls{name="bank"} 16"#));
/// assert!(text.contains(r#"bulkhead_in_flight_calls{name="payments"} 1"#));
/// # Ok::<(), bulkhead::BulkheadFull>(())
/// ```
pub fn record(bulkhead: &Bulkhead) {
    let m = bulkhead.metrics();
    Gauges::new(bulkhead.name()).set(&m);
    if let Some(counters) = bulkhead.counters() {
        Counters::new(bulkhead.name()).set(&counters.counts());
    }
    record_adaptive(bulkhead);
}

/// An adaptive limit's gauges, if one is attached (`bulkhead_adaptive_*`: see the module
/// docs).
fn record_adaptive(bulkhead: &Bulkhead) {
    if let Some(control) = bulkhead.adaptive_limit() {
        crate::adaptive::metrics::record(&control, bulkhead.name());
    }
}

/// A bulkhead whose metrics are exported: created by [`register`].
///
/// The bulkhead is exported while any clone is alive. Its acquire and call methods are
/// [`Bulkhead`]'s (the bulkhead itself counts and times every call, however it is made);
/// they are kept so code written against earlier versions still compiles. Clones share
/// everything.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use bulkhead::{Bulkhead, BulkheadConfig};
///
/// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
/// let bank = metrics::with_local_recorder(&recorder, || {
///     bulkhead::metrics_export::register(&Arc::new(Bulkhead::new("bank", BulkheadConfig::default())))
/// });
/// let permit = bank.acquire()?;
/// bank.record();
/// assert!(recorder.handle().render().contains(r#"bulkhead_in_flight_calls{name="bank"} 1"#));
/// drop(permit);
/// # Ok::<(), bulkhead::BulkheadFull>(())
/// ```
#[derive(Clone)]
pub struct InstrumentedBulkhead {
    inner: Arc<Inner>,
}

impl InstrumentedBulkhead {
    /// The bulkhead.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bank = Arc::new(Bulkhead::new("bank", BulkheadConfig::default()));
    /// let instrumented = bulkhead::metrics_export::register(&bank);
    /// assert_eq!(instrumented.bulkhead().name(), "bank");
    /// ```
    pub fn bulkhead(&self) -> &Arc<Bulkhead> {
        &self.inner.bulkhead
    }

    /// Hands the recorder this bulkhead's current values (gauges, counters, new wait
    /// samples): [`collect`] for one bulkhead. Call it right before the exporter renders.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use bulkhead::{Bulkhead, BulkheadConfig};
    ///
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let bank = Arc::new(Bulkhead::new("bank", BulkheadConfig::for_pool(20)));
    /// let instrumented = metrics::with_local_recorder(&recorder, || bulkhead::metrics_export::register(&bank));
    /// bank.change_config(BulkheadConfig::for_pool(10)); // no event fires for this
    /// instrumented.collect();
    /// assert!(recorder
    ///     .handle()
    ///     .render()
    ///     .contains(r#"resilience4j_bulkhead_max_allowed_concurrent_calls{name="bank"} 8"#));
    /// ```
    pub fn collect(&self) {
        self.inner.collect();
    }

    /// The same as [`collect`](Self::collect), under its earlier name (it used to set only
    /// the gauges; it now also hands over the counters and the wait histogram).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use bulkhead::{Bulkhead, BulkheadConfig};
    /// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    /// let bank = metrics::with_local_recorder(&recorder, || {
    ///     bulkhead::metrics_export::register(&Arc::new(Bulkhead::new("bank", BulkheadConfig::default())))
    /// });
    /// let _permit = bank.bulkhead().try_acquire()?;
    /// bank.record();
    /// assert!(recorder.handle().render().contains(r#"bulkhead_in_flight_calls{name="bank"} 1"#));
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    pub fn record(&self) {
        self.collect();
    }

    /// [`Bulkhead::acquire`].
    ///
    /// # Blocking
    ///
    /// As [`Bulkhead::acquire`]: up to the configured max wait.
    ///
    /// # Errors
    ///
    /// As [`Bulkhead::acquire`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bank = bulkhead::metrics_export::register(&Arc::new(Bulkhead::new("bank", BulkheadConfig::default())));
    /// let permit = bank.acquire()?;
    /// assert_eq!(permit.bulkhead().metrics().in_flight_calls(), 1);
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    pub fn acquire(&self) -> Result<Permit<'_>, BulkheadFull> {
        self.inner.bulkhead.acquire()
    }

    /// [`Bulkhead::acquire_async`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`Bulkhead::acquire_async`].
    ///
    /// # Errors
    ///
    /// As [`Bulkhead::acquire`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use bulkhead::{Bulkhead, BulkheadConfig};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), bulkhead::BulkheadFull> {
    /// let bank = bulkhead::metrics_export::register(&Arc::new(Bulkhead::new("bank", BulkheadConfig::default())));
    /// let permit = bank.acquire_async().await?;
    /// drop(permit);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn acquire_async(&self) -> Result<Permit<'_>, BulkheadFull> {
        self.inner.bulkhead.acquire_async().await
    }

    /// [`Bulkhead::acquire_owned_async`]. The future is `Send + 'static`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`Bulkhead::acquire_async`].
    ///
    /// # Errors
    ///
    /// As [`Bulkhead::acquire`].
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use bulkhead::{Bulkhead, BulkheadConfig};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let bank = bulkhead::metrics_export::register(&Arc::new(Bulkhead::new("bank", BulkheadConfig::default())));
    /// let permit = tokio::spawn(bank.acquire_owned_async()).await.unwrap().unwrap();
    /// assert_eq!(permit.bulkhead().name(), "bank");
    /// # }
    /// ```
    pub fn acquire_owned_async(
        &self,
    ) -> impl Future<Output = Result<OwnedPermit, BulkheadFull>> + Send + 'static {
        self.inner.bulkhead.acquire_owned_async()
    }

    /// [`Bulkhead::call`].
    ///
    /// # Blocking
    ///
    /// As [`Bulkhead::call`].
    ///
    /// # Errors
    ///
    /// As [`Bulkhead::acquire`]; `f` is not run.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use bulkhead::{Bulkhead, BulkheadConfig};
    /// let bank = bulkhead::metrics_export::register(&Arc::new(Bulkhead::new("bank", BulkheadConfig::default())));
    /// assert_eq!(bank.call(|| 6 * 7)?, 42);
    /// # Ok::<(), bulkhead::BulkheadFull>(())
    /// ```
    pub fn call<T>(&self, f: impl FnOnce() -> T) -> Result<T, BulkheadFull> {
        let _permit = self.acquire()?;
        Ok(f())
    }

    /// [`Bulkhead::call_async`].
    ///
    /// # Cancel safety
    ///
    /// As [`Bulkhead::call_async`].
    ///
    /// # Errors
    ///
    /// As [`Bulkhead::acquire`]; `fut` is dropped without being polled.
    ///
    /// # Examples
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use bulkhead::{Bulkhead, BulkheadConfig};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), bulkhead::BulkheadFull> {
    /// let bank = bulkhead::metrics_export::register(&Arc::new(Bulkhead::new("bank", BulkheadConfig::default())));
    /// assert_eq!(bank.call_async(async { 6 * 7 }).await?, 42);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn call_async<F: Future>(&self, fut: F) -> Result<F::Output, BulkheadFull> {
        let _permit = self.acquire_async().await?;
        Ok(fut.await)
    }
}

impl fmt::Debug for InstrumentedBulkhead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InstrumentedBulkhead").field("bulkhead", &self.inner.bulkhead).finish()
    }
}

/// The `key` label of the series that sums every key outside the busiest `cap`
/// ([`KeyedSeries`]).
pub const OTHER_KEYS: &str = "other";
/// Gauge: how many live keys the `key="other"` series sums ([`KeyedSeries`]).
pub const KEYED_OTHER_KEYS: &str = "bulkhead_keyed_other_keys";

/// Exports a [`KeyedBulkhead`](crate::keyed::KeyedBulkhead)'s per-key gauges with bounded
/// label cardinality (what [`register`] of an `Arc<KeyedBulkhead>` runs at each
/// [`collect`]; use it directly to record by hand, without registering): at each [`record`](Self::record), the `cap` busiest live keys (most
/// calls in flight, then waiting: [`KeyedBulkhead::metrics`](crate::keyed::KeyedBulkhead::metrics))
/// each get a series labelled `name` (the keyed bulkhead's) and `key` (the key's
/// `Display`), and every other live key is summed into one series labelled
/// `key="other"` ([`OTHER_KEYS`]). So at most `cap + 1` series per gauge are updated, however
/// many tenants there are.
///
/// The gauges are [`AVAILABLE_CONCURRENT_CALLS`], [`MAX_ALLOWED_CONCURRENT_CALLS`],
/// [`IN_FLIGHT_CALLS`] and [`WAITING_CALLS`]; [`KEYED_OTHER_KEYS`] (label `name`) says how
/// many keys `other` sums. The shared total, if any, is exported as a plain bulkhead
/// ([`record`], label `name` only, its counters too if enabled on it).
///
/// **A key that leaves the top `cap`** (it got quieter, or was evicted): the `metrics`
/// facade cannot delete a series, so the next `record` sets that key's gauges to **zero
/// once** (its calls now count in `other`, or it has none) and then stops updating them.
/// Every key that was ever among the top `cap` thus keeps a series in the recorder, at
/// zero, until the exporter drops it: with the Prometheus exporter, set
/// `PrometheusBuilder::idle_timeout` (for gauges) to have series that stopped updating
/// removed, which is what keeps the number of series bounded over time. Per-key counters
/// are not exported: a key's bulkhead is recreated after an eviction, so its counts would
/// restart; count calls on the total, or with a listener on
/// [`KeyedBulkhead::key_bulkhead`](crate::keyed::KeyedBulkhead::key_bulkhead).
///
/// A key whose `Display` is `"other"` shares the aggregate's label: pick keys that cannot
/// print so (or prefix them).
///
/// # Examples
///
/// ```
/// use bulkhead::keyed::KeyedBulkhead;
/// use bulkhead::metrics_export::KeyedSeries;
///
/// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
/// let tenants = KeyedBulkhead::<u32>::builder("api").build()?;
/// let series = KeyedSeries::new(2);
///
/// let busy: Vec<_> = (0..3).map(|_| tenants.try_acquire(&7).unwrap()).collect();
/// let _one = tenants.try_acquire(&1)?;
/// let quiet: Vec<_> = (10..15).map(|t| tenants.try_acquire(&t).unwrap()).collect();
/// // In the scrape handler:
/// metrics::with_local_recorder(&recorder, || series.record(&tenants));
/// let text = recorder.handle().render();
/// assert!(text.contains(r#"bulkhead_in_flight_calls{name="api",key="7"} 3"#));
/// // 7 keys live: 7, then one of the six keys with one call; the other five summed.
/// assert!(text.contains(r#"bulkhead_in_flight_calls{name="api",key="other"} 5"#));
/// assert!(text.contains(r#"bulkhead_keyed_other_keys{name="api"} 5"#));
///
/// // Tenant 7 goes quiet, 12 gets busy: 7's series drops to zero, 12 gets its own.
/// drop(busy);
/// let _busy12: Vec<_> = (0..2).map(|_| tenants.try_acquire(&12).unwrap()).collect();
/// metrics::with_local_recorder(&recorder, || series.record(&tenants));
/// let text = recorder.handle().render();
/// assert!(text.contains(r#"bulkhead_in_flight_calls{name="api",key="7"} 0"#));
/// assert!(text.contains(r#"bulkhead_in_flight_calls{name="api",key="12"} 3"#));
/// # drop(quiet);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct KeyedSeries {
    cap: usize,
    /// The `key` labels given their own series at the previous `record` (at most `cap`).
    exported: Mutex<Vec<String>>,
}

impl KeyedSeries {
    /// Series for at most `cap` keys of their own (plus `other`) per gauge.
    pub fn new(cap: usize) -> Self {
        KeyedSeries { cap, exported: Mutex::new(Vec::new()) }
    }

    /// The cap given to [`new`](Self::new).
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Sets the gauges of `keyed`'s `cap` busiest keys, of `other`, of the total (if any),
    /// and zero once for every key exported last time that is no longer among them, in the
    /// current recorder. Call it right before rendering, as [`collect`]. Use one
    /// `KeyedSeries` per keyed bulkhead: it remembers which keys it exported.
    pub fn record<K, S>(&self, keyed: &crate::keyed::KeyedBulkhead<K, S>)
    where
        K: Eq + core::hash::Hash + Clone + fmt::Display,
        S: core::hash::BuildHasher,
    {
        self.record_capped(keyed, self.cap);
    }

    fn record_capped<K, S>(&self, keyed: &crate::keyed::KeyedBulkhead<K, S>, cap: usize)
    where
        K: Eq + core::hash::Hash + Clone + fmt::Display,
        S: core::hash::BuildHasher,
    {
        let name = keyed.name();
        let snapshot = keyed.metrics(cap);
        let now: Vec<String> = snapshot.keys.iter().map(|(key, _)| key.to_string()).collect();
        for (label, (_, m)) in now.iter().zip(&snapshot.keys) {
            keyed_gauges(name, label, m.available, m.max_allowed, m.in_flight, m.waiting);
        }
        let o = &snapshot.others;
        keyed_gauges(name, OTHER_KEYS, o.available, o.max_allowed, o.in_flight, o.waiting);
        gauge!(KEYED_OTHER_KEYS, "name" => name.to_owned()).set(snapshot.other_keys as f64);
        // The labels that left the top `cap` are taken under the lock and zeroed after it:
        // the recorder is user code, which never runs under a lock of ours.
        let mut exported = self.exported.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut gone = core::mem::replace(&mut *exported, now.clone());
        drop(exported);
        gone.retain(|label| !now.contains(label));
        for gone in &gone {
            keyed_gauges(name, gone, 0, 0, 0, 0);
        }
        if let Some(total) = keyed.total() {
            record(total);
        }
    }
}

/// Sets one keyed series' gauges. Values are at most 2^30 - 1 per key, summed over at most
/// `max_keys` keys: exact in an f64 below 2^53.
fn keyed_gauges(
    name: &str,
    key: &str,
    available: usize,
    max_allowed: usize,
    in_flight: usize,
    waiting: usize,
) {
    let labels = [("name", name.to_owned()), ("key", key.to_owned())];
    gauge!(AVAILABLE_CONCURRENT_CALLS, &labels).set(available as f64);
    gauge!(MAX_ALLOWED_CONCURRENT_CALLS, &labels).set(max_allowed as f64);
    gauge!(IN_FLIGHT_CALLS, &labels).set(in_flight as f64);
    gauge!(WAITING_CALLS, &labels).set(waiting as f64);
}

/// How many keys [`register`] gives a series of their own by default (the busiest), before
/// [`InstrumentedKeyed::key_series`] changes it.
pub const DEFAULT_KEY_SERIES: usize = 10;

/// A keyed bulkhead whose metrics are exported: created by [`register`]. At each
/// [`collect`], the busiest keys get a series each (at most
/// [`key_series`](Self::key_series), [`DEFAULT_KEY_SERIES`] unless changed), every other
/// live key is summed into `key="other"`, and the shared total, if any, is exported as a
/// plain bulkhead (gauges and counters): the rules of [`KeyedSeries`], which this uses.
/// Per-key counters are not exported: a key's bulkhead is recreated after an eviction, so
/// its counts would restart; the total counts every call.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use bulkhead::keyed::KeyedBulkhead;
///
/// let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
/// let tenants = Arc::new(KeyedBulkhead::<u32>::builder("api").build()?);
/// let exported = metrics::with_local_recorder(&recorder, || {
///     bulkhead::metrics_export::register(&tenants).key_series(1)
/// });
/// let _busy: Vec<_> = (0..3).map(|_| tenants.try_acquire(&7).unwrap()).collect();
/// let _quiet = tenants.try_acquire(&1)?;
/// metrics::with_local_recorder(&recorder, || bulkhead::metrics_export::collect());
/// let text = recorder.handle().render();
/// assert!(text.contains(r#"bulkhead_in_flight_calls{name="api",key="7"} 3"#), "{text}");
/// assert!(text.contains(r#"bulkhead_in_flight_calls{name="api",key="other"} 1"#));
/// # drop(exported);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct InstrumentedKeyed<K, S = std::collections::hash_map::RandomState> {
    inner: Arc<KeyedInner<K, S>>,
}

impl<K, S> Clone for InstrumentedKeyed<K, S> {
    fn clone(&self) -> Self {
        InstrumentedKeyed { inner: Arc::clone(&self.inner) }
    }
}

struct KeyedInner<K, S> {
    keyed: Arc<crate::keyed::KeyedBulkhead<K, S>>,
    series: KeyedSeries,
    /// The cap of own series, set by `key_series`.
    cap: std::sync::atomic::AtomicUsize,
}

impl<K, S> Collect for KeyedInner<K, S>
where
    K: Eq + core::hash::Hash + Clone + fmt::Display + Send + Sync,
    S: core::hash::BuildHasher + Send + Sync,
{
    fn collect(&self) {
        // Ordering: Relaxed — an independent setting; a collection concurrent with a change
        // may use either cap.
        let cap = self.cap.load(std::sync::atomic::Ordering::Relaxed);
        self.series.record_capped(&self.keyed, cap);
    }
}

impl<K, S> InstrumentedKeyed<K, S>
where
    K: Eq + core::hash::Hash + Clone + fmt::Display + Send + Sync + 'static,
    S: core::hash::BuildHasher + Send + Sync + 'static,
{
    /// The keyed bulkhead.
    pub fn keyed(&self) -> &Arc<crate::keyed::KeyedBulkhead<K, S>> {
        &self.inner.keyed
    }

    /// Gives at most `cap` keys a series of their own (the busiest; the others are summed
    /// into `key="other"`) from the next collection on.
    pub fn key_series(self, cap: usize) -> Self {
        // Ordering: Relaxed — see `collect`.
        self.inner.cap.store(cap, std::sync::atomic::Ordering::Relaxed);
        self
    }

    /// Hands the recorder this keyed bulkhead's current values: [`collect`] for one.
    pub fn collect(&self) {
        Collect::collect(&*self.inner);
    }
}

impl<K, S> fmt::Debug for InstrumentedKeyed<K, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InstrumentedKeyed").field("keyed", &self.inner.keyed.name()).finish()
    }
}

impl<K, S> Register for Arc<crate::keyed::KeyedBulkhead<K, S>>
where
    K: Eq + core::hash::Hash + Clone + fmt::Display + Send + Sync + 'static,
    S: core::hash::BuildHasher + Send + Sync + 'static,
{
    type Registered = InstrumentedKeyed<K, S>;

    fn register(&self) -> InstrumentedKeyed<K, S> {
        describe();
        self.enable_counters();
        let inner = Arc::new(KeyedInner {
            keyed: Arc::clone(self),
            series: KeyedSeries::new(DEFAULT_KEY_SERIES),
            cap: std::sync::atomic::AtomicUsize::new(DEFAULT_KEY_SERIES),
        });
        remember(Arc::downgrade(&inner) as Weak<dyn Collect>);
        InstrumentedKeyed { inner }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn wait_buckets_are_the_engines_bounds() {
        let engine: Vec<f64> =
            crate::observe::WAIT_BOUNDS.iter().map(|bound| bound.as_secs_f64()).collect();
        assert_eq!(super::WAIT_BUCKETS, &engine[..]);
    }
}

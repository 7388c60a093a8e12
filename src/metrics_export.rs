//! Bulkhead metrics through the [`metrics`] facade (feature `metrics`).
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
//! | `bulkhead_calls_permitted_total` | counter | calls admitted |
//! | `bulkhead_calls_rejected_total` | counter | calls refused, label `reason`: `full`, `wait_timed_out`, `too_many_waiting` |
//! | `bulkhead_calls_finished_total` | counter | permits released (call returned, unwound or was cancelled) |
//! | `bulkhead_wait_duration_seconds` | histogram | time spent getting a permit, label `outcome`: `permitted` or `rejected` (only for acquires made through [`InstrumentedBulkhead`] or the instrumented tower layer) |
//!
//! # Gauges are read when you scrape: call [`InstrumentedBulkhead::record`]
//!
//! The counters are exact: a listener registered with [`Bulkhead::on_event`] adds one per
//! event, on the thread where it happens, through handles resolved once at registration.
//!
//! The gauges are different. They are *set* from a [`Bulkhead::metrics`] snapshot by
//! [`InstrumentedBulkhead::record`] (or the free function [`record`]), which your exporter
//! should call right before it renders (or a timer calls every few seconds). Setting them
//! from the event listener instead would be wrong, not just slower to update:
//!
//! - No event fires when a caller starts waiting, nor on [`Bulkhead::change_config`], so
//!   `waiting_calls` and `max_allowed_concurrent_calls` would go stale until the next call.
//! - Two threads finishing at once each take a snapshot and `set` it; the older snapshot can
//!   land last. Nothing fires after the final release of a burst, so an idle bulkhead could
//!   show a call in flight (and a slot missing) forever.
//!
//! A snapshot taken at scrape time has neither problem, costs one atomic load and one lock,
//! and costs the call path nothing.
//!
//! # Examples
//!
//! ```
//! use std::sync::Arc;
//! use bulkhead::{Bulkhead, BulkheadConfig};
//! use metrics_exporter_prometheus::PrometheusBuilder;
//!
//! let recorder = PrometheusBuilder::new().build_recorder();
//! let handle = recorder.handle();
//! // An application installs the recorder globally (`metrics::set_global_recorder`);
//! // a local one keeps this example self-contained.
//! let bank = metrics::with_local_recorder(&recorder, || {
//!     let bank = Arc::new(Bulkhead::new("bank", BulkheadConfig::for_pool(20)));
//!     bulkhead::metrics_export::register(&bank)
//! });
//!
//! let balance = bank.call(|| "42.00 EUR")?;
//! assert_eq!(balance, "42.00 EUR");
//!
//! // At scrape time: refresh the gauges, then render.
//! bank.record();
//! let text = handle.render();
//! assert!(text.contains(r#"resilience4j_bulkhead_available_concurrent_calls{name="bank"} 16"#));
//! assert!(text.contains(r#"bulkhead_calls_permitted_total{name="bank"} 1"#));
//! # Ok::<(), bulkhead::BulkheadFull>(())
//! ```

use core::future::Future;
use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use metrics::{
    counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram, Counter,
    Gauge, Histogram, Unit,
};

use crate::{
    Bulkhead, BulkheadEvent, BulkheadEventKind, BulkheadFull, OwnedPermit, Permit, RejectReason,
};

/// Gauge: free slots. Resilience4j's Prometheus name.
pub const AVAILABLE_CONCURRENT_CALLS: &str = "resilience4j_bulkhead_available_concurrent_calls";
/// Gauge: the current limit. Resilience4j's Prometheus name.
pub const MAX_ALLOWED_CONCURRENT_CALLS: &str = "resilience4j_bulkhead_max_allowed_concurrent_calls";
/// Gauge: calls holding a permit.
pub const IN_FLIGHT_CALLS: &str = "bulkhead_in_flight_calls";
/// Gauge: callers queued for a slot.
pub const WAITING_CALLS: &str = "bulkhead_waiting_calls";
/// Counter: calls admitted.
pub const CALLS_PERMITTED: &str = "bulkhead_calls_permitted_total";
/// Counter: calls refused, labelled `reason` (`full`, `wait_timed_out`, `too_many_waiting`).
pub const CALLS_REJECTED: &str = "bulkhead_calls_rejected_total";
/// Counter: permits released.
pub const CALLS_FINISHED: &str = "bulkhead_calls_finished_total";
/// Histogram (seconds): time spent getting a permit, labelled `outcome` (`permitted`,
/// `rejected`).
pub const WAIT_DURATION: &str = "bulkhead_wait_duration_seconds";

/// The label value of [`CALLS_REJECTED`]'s `reason` for `reason`.
fn reason_label(reason: RejectReason) -> &'static str {
    match reason {
        RejectReason::Full => "full",
        RejectReason::WaitTimedOut => "wait_timed_out",
        RejectReason::TooManyWaiting => "too_many_waiting",
        RejectReason::Closed => "closed",
    }
}

fn describe() {
    describe_gauge!(AVAILABLE_CONCURRENT_CALLS, Unit::Count, "Free slots in the bulkhead");
    describe_gauge!(MAX_ALLOWED_CONCURRENT_CALLS, Unit::Count, "The bulkhead's current limit");
    describe_gauge!(IN_FLIGHT_CALLS, Unit::Count, "Calls holding a bulkhead permit");
    describe_gauge!(WAITING_CALLS, Unit::Count, "Callers queued for a bulkhead slot");
    describe_counter!(CALLS_PERMITTED, Unit::Count, "Calls the bulkhead admitted");
    describe_counter!(CALLS_REJECTED, Unit::Count, "Calls the bulkhead refused, by reason");
    describe_counter!(CALLS_FINISHED, Unit::Count, "Bulkhead permits released");
    describe_histogram!(WAIT_DURATION, Unit::Seconds, "Time spent getting a bulkhead permit");
}

/// The counter handles the event listener adds to.
struct Counters {
    permitted: Counter,
    rejected_full: Counter,
    rejected_wait_timed_out: Counter,
    rejected_too_many_waiting: Counter,
    rejected_closed: Counter,
    finished: Counter,
}

impl Counters {
    fn new(name: &str) -> Self {
        let rejected = |reason: RejectReason| counter!(CALLS_REJECTED, "name" => name.to_owned(), "reason" => reason_label(reason));
        Counters {
            permitted: counter!(CALLS_PERMITTED, "name" => name.to_owned()),
            rejected_full: rejected(RejectReason::Full),
            rejected_wait_timed_out: rejected(RejectReason::WaitTimedOut),
            rejected_too_many_waiting: rejected(RejectReason::TooManyWaiting),
            rejected_closed: rejected(RejectReason::Closed),
            finished: counter!(CALLS_FINISHED, "name" => name.to_owned()),
        }
    }

    fn on_event(&self, event: &BulkheadEvent) {
        let counter = match event.kind() {
            BulkheadEventKind::CallPermitted => &self.permitted,
            BulkheadEventKind::CallRejected(RejectReason::Full) => &self.rejected_full,
            BulkheadEventKind::CallRejected(RejectReason::WaitTimedOut) => {
                &self.rejected_wait_timed_out
            }
            BulkheadEventKind::CallRejected(RejectReason::TooManyWaiting) => {
                &self.rejected_too_many_waiting
            }
            BulkheadEventKind::CallRejected(RejectReason::Closed) => &self.rejected_closed,
            BulkheadEventKind::CallFinished => &self.finished,
            // Not a call; the closed state is read at scrape time.
            _ => return,
        };
        counter.increment(1);
    }
}

struct Gauges {
    available: Gauge,
    max_allowed: Gauge,
    in_flight: Gauge,
    waiting: Gauge,
}

impl Gauges {
    fn new(name: &str) -> Self {
        Gauges {
            available: gauge!(AVAILABLE_CONCURRENT_CALLS, "name" => name.to_owned()),
            max_allowed: gauge!(MAX_ALLOWED_CONCURRENT_CALLS, "name" => name.to_owned()),
            in_flight: gauge!(IN_FLIGHT_CALLS, "name" => name.to_owned()),
            waiting: gauge!(WAITING_CALLS, "name" => name.to_owned()),
        }
    }

    fn set(&self, bulkhead: &Bulkhead) {
        let m = bulkhead.metrics();
        // Values are at most 2^30 - 1 (the engine's limit), exact in an f64.
        self.available.set(m.available_concurrent_calls() as f64);
        self.max_allowed.set(m.max_allowed_concurrent_calls() as f64);
        self.in_flight.set(m.in_flight_calls() as f64);
        self.waiting.set(m.waiting_calls() as f64);
    }
}

struct Inner {
    bulkhead: Arc<Bulkhead>,
    gauges: Gauges,
    wait_permitted: Histogram,
    wait_rejected: Histogram,
}

/// Starts exporting `bulkhead`'s metrics to the recorder that is current now (the global
/// one, or a local one set with [`metrics::with_local_recorder`]).
///
/// It describes the metrics, resolves their handles once, and registers a listener
/// ([`Bulkhead::on_event`]) that counts permitted, rejected and finished calls. Call it
/// **once per bulkhead**: listeners cannot be removed, so a second registration would count
/// every event twice. Keep the returned [`InstrumentedBulkhead`] (it is cheap to clone) and
/// call its [`record`](InstrumentedBulkhead::record) before each scrape.
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
/// assert!(bank.try_acquire().is_err()); // counted by the listener, whoever calls
/// assert!(Arc::ptr_eq(instrumented.bulkhead(), &bank));
/// assert!(handle
///     .render()
///     .contains(r#"bulkhead_calls_rejected_total{name="bank",reason="full"} 1"#));
/// # Ok::<(), bulkhead::ConfigError>(())
/// ```
pub fn register(bulkhead: &Arc<Bulkhead>) -> InstrumentedBulkhead {
    describe();
    let name = bulkhead.name();
    let counters = Counters::new(name);
    bulkhead.on_event(move |event| counters.on_event(event));
    let wait = |outcome: &'static str| histogram!(WAIT_DURATION, "name" => name.to_owned(), "outcome" => outcome);
    let instrumented = InstrumentedBulkhead {
        inner: Arc::new(Inner {
            bulkhead: Arc::clone(bulkhead),
            gauges: Gauges::new(name),
            wait_permitted: wait("permitted"),
            wait_rejected: wait("rejected"),
        }),
    };
    instrumented.record();
    instrumented
}

/// Sets `bulkhead`'s gauges from a fresh snapshot, looking them up in the current recorder.
///
/// For exporters that iterate over many bulkheads (a registry, say) without keeping an
/// [`InstrumentedBulkhead`] for each. Counters and the wait histogram still need
/// [`register`].
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
    Gauges::new(bulkhead.name()).set(bulkhead);
}

/// A bulkhead whose metrics are exported: created by [`register`].
///
/// Its acquire and call methods mirror [`Bulkhead`]'s and also record how long getting the
/// permit took ([`WAIT_DURATION`]). Calls made on the [`Bulkhead`] directly are still
/// counted; they are only missing from the wait histogram. Clones share everything.
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

    /// Sets the gauges (available, max allowed, in flight, waiting) from a fresh snapshot.
    /// Call it right before the exporter renders, or from a timer: see the
    /// [module docs](self) for why the gauges are not set by the event listener.
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
    /// instrumented.record();
    /// assert!(recorder
    ///     .handle()
    ///     .render()
    ///     .contains(r#"resilience4j_bulkhead_max_allowed_concurrent_calls{name="bank"} 8"#));
    /// ```
    pub fn record(&self) {
        self.inner.gauges.set(&self.inner.bulkhead);
    }

    /// Records one acquire in the wait histogram.
    pub(crate) fn observe_wait(&self, start: Instant, result: Result<(), &BulkheadFull>) {
        match result {
            Ok(()) => self.inner.wait_permitted.record(start.elapsed()),
            // The engine's own measure: zero for an immediate refusal.
            Err(full) => self.inner.wait_rejected.record(full.waited()),
        }
    }

    fn timed<T>(&self, start: Instant, result: Result<T, BulkheadFull>) -> Result<T, BulkheadFull> {
        self.observe_wait(start, result.as_ref().map(|_| ()));
        result
    }

    /// [`Bulkhead::acquire`], timed.
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
        let start = Instant::now();
        self.timed(start, self.inner.bulkhead.acquire())
    }

    /// [`Bulkhead::acquire_async`], timed.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`Bulkhead::acquire_async`]; a cancelled wait is not recorded.
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
        let start = Instant::now();
        self.timed(start, self.inner.bulkhead.acquire_async().await)
    }

    /// [`Bulkhead::acquire_owned_async`], timed. The future is `Send + 'static`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`Bulkhead::acquire_async`]; a cancelled wait is not recorded.
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
        let this = self.clone();
        async move {
            let start = Instant::now();
            let acquired = this.inner.bulkhead.acquire_owned_async().await;
            this.timed(start, acquired)
        }
    }

    /// [`Bulkhead::call`], with the wait for the permit timed.
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

    /// [`Bulkhead::call_async`], with the wait for the permit timed.
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

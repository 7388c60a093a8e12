//! Shared set-up for the benchmark targets: every competitor built the same way, in the same
//! state, so a group compares like with like.

// Each bench target uses a different subset of these helpers.
#![allow(dead_code)]

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::task::Context;
use std::time::Duration;

use bulkhead::{Bulkhead, BulkheadConfig};

/// One permit, in the top half of the floor's word, as in the bulkhead's state word.
pub const ONE: u64 = 1 << 32;

/// A bulkhead with `limit` permits, all free, and a max wait of `max_wait`.
pub fn bulkhead(limit: usize, max_wait: Duration) -> Bulkhead {
    let config = BulkheadConfig::builder()
        .max_concurrent_calls(limit)
        .max_wait_duration(max_wait)
        .build()
        .expect("a valid bench configuration");
    Bulkhead::new("bench", config)
}

/// A bulkhead with no free permit and a max wait of zero: every call is rejected at once.
///
/// The limit is 1 and the only permit is leaked (`mem::forget`), so the bulkhead stays full
/// for the rest of the process; tokio's and async-lock's full semaphores below are built the
/// same way (one permit, taken and never returned).
pub fn full_bulkhead() -> Arc<Bulkhead> {
    let bulkhead = Arc::new(bulkhead(1, Duration::ZERO));
    std::mem::forget(bulkhead.try_acquire_owned().expect("one free permit"));
    bulkhead
}

/// A tokio semaphore with one permit, taken and never returned.
pub fn full_tokio() -> Arc<tokio::sync::Semaphore> {
    let sem = Arc::new(tokio::sync::Semaphore::new(1));
    std::mem::forget(Arc::clone(&sem).try_acquire_owned().expect("one free permit"));
    sem
}

/// An async-lock semaphore with one permit, taken and never returned.
pub fn full_async_lock() -> Arc<async_lock::Semaphore> {
    let sem = Arc::new(async_lock::Semaphore::new(1));
    std::mem::forget(sem.try_acquire_arc().expect("one free permit"));
    sem
}

/// The floor's word for a full semaphore: zero available, as our state word would hold.
pub fn floor_word() -> Arc<AtomicU64> {
    Arc::new(AtomicU64::new(0))
}

/// A `Context` whose waker does nothing, for polling a future by hand.
pub fn noop_context() -> Context<'static> {
    Context::from_waker(futures::task::noop_waker_ref())
}

/// The `parking_lot::Mutex<usize>` counter semaphore: what a bulkhead written in a hurry
/// looks like. Returns whether a slot was taken.
pub fn mutex_try_acquire(counter: &parking_lot::Mutex<usize>, limit: usize) -> bool {
    let mut in_flight = counter.lock();
    if *in_flight < limit {
        *in_flight += 1;
        true
    } else {
        false
    }
}

/// Releases a slot taken by [`mutex_try_acquire`].
pub fn mutex_release(counter: &parking_lot::Mutex<usize>) {
    *counter.lock() -= 1;
}

/// A tokio runtime on the current thread with the timer enabled.
pub fn current_thread_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_time().build().expect("a tokio runtime")
}

/// A tokio runtime with two worker threads (the machine's cores) and the timer enabled.
pub fn two_worker_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .expect("a tokio runtime")
}

/// A `metrics` recorder whose counters and gauges are plain atomics (and whose histograms
/// sum into an atomic): what the metrics facade costs at its cheapest, so a bench measures
/// our instrumentation rather than an exporter.
#[cfg(feature = "metrics")]
pub struct AtomicRecorder;

#[cfg(feature = "metrics")]
struct AtomicHistogram(std::sync::atomic::AtomicU64);

#[cfg(feature = "metrics")]
impl metrics::HistogramFn for AtomicHistogram {
    fn record(&self, value: f64) {
        self.0.fetch_add(value.to_bits() & 1, std::sync::atomic::Ordering::Relaxed);
    }
}

#[cfg(feature = "metrics")]
impl metrics::Recorder for AtomicRecorder {
    fn describe_counter(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_gauge(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_histogram(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn register_counter(&self, _: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Counter {
        metrics::Counter::from_arc(Arc::new(AtomicU64::new(0)))
    }
    fn register_gauge(&self, _: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Gauge {
        metrics::Gauge::from_arc(Arc::new(AtomicU64::new(0)))
    }
    fn register_histogram(
        &self,
        _: &metrics::Key,
        _: &metrics::Metadata<'_>,
    ) -> metrics::Histogram {
        metrics::Histogram::from_arc(Arc::new(AtomicHistogram(AtomicU64::new(0))))
    }
}

/// Registers a listener that counts every event into `heard`.
pub fn count_events(bulkhead: &Bulkhead, heard: &Arc<AtomicU64>) {
    let heard = Arc::clone(heard);
    bulkhead.on_event(move |_| {
        heard.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    });
}

/// Instruments `bulkhead` as a service would: with the `metrics` feature, registered with
/// `metrics_export::register` on an [`AtomicRecorder`] (which turns its counters on); without
/// it, its counters turned on directly. The registration is kept for the process's life.
pub fn instrument(bulkhead: &Arc<Bulkhead>) {
    #[cfg(feature = "metrics")]
    {
        let registered = metrics::with_local_recorder(&AtomicRecorder, || {
            bulkhead::metrics_export::register(bulkhead)
        });
        bulkhead::metrics_export::collect();
        std::mem::forget(registered);
    }
    #[cfg(not(feature = "metrics"))]
    bulkhead.enable_counters();
}

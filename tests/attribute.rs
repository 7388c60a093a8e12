//! `#[bulkhead(name = ..)]` (feature `macros`): the body runs under the named bulkhead of
//! the global registry or of the one the attribute names; a refusal becomes `Err(E::from)`
//! or a call of the fallback with the same arguments; the bulkhead is resolved once per
//! call site.
#![cfg(feature = "macros")]

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bulkhead::{bulkhead, Bulkhead, BulkheadFull, BulkheadRegistry, RejectReason};
use common::*;

#[derive(Debug, PartialEq)]
enum PortError {
    TemporarilyUnavailable(String, RejectReason),
    Declined(u32),
}

impl From<BulkheadFull> for PortError {
    fn from(full: BulkheadFull) -> Self {
        PortError::TemporarilyUnavailable(full.bulkhead_name().to_owned(), full.reason())
    }
}

fn global(name: &str, max: usize) -> Arc<Bulkhead> {
    BulkheadRegistry::global().bulkhead_with(name, limit(max)).unwrap()
}

static RUNS: AtomicUsize = AtomicUsize::new(0);

/// In flight inside the body, and the body's own error passed through by `?` and `return`.
#[bulkhead(name = "attr-sync")]
fn sync_port(account: u32) -> Result<usize, PortError> {
    RUNS.fetch_add(1, Ordering::SeqCst);
    if account == 0 {
        return Err(PortError::Declined(0));
    }
    let checked: Result<u32, PortError> =
        if account == 1 { Err(PortError::Declined(1)) } else { Ok(account) };
    checked?;
    Ok(BulkheadRegistry::global().bulkhead("attr-sync").metrics().in_flight_calls())
}

#[test]
fn attribute_sync_runs_under_the_named_bulkhead_and_maps_refusal() {
    let bulkhead = global("attr-sync", 1);
    assert_eq!(sync_port(7), Ok(1), "the body runs holding a permit of 'attr-sync'");
    assert_eq!(sync_port(0), Err(PortError::Declined(0)));
    assert_eq!(sync_port(1), Err(PortError::Declined(1)));
    assert_quiescent(&bulkhead, 1);

    let runs = RUNS.load(Ordering::SeqCst);
    let held = bulkhead.try_acquire().unwrap();
    assert_eq!(
        sync_port(7),
        Err(PortError::TemporarilyUnavailable("attr-sync".into(), RejectReason::Full))
    );
    assert_eq!(RUNS.load(Ordering::SeqCst), runs, "a refused body does not run");
    drop(held);
    assert_quiescent(&bulkhead, 1);
}

#[bulkhead(name = "attr-unwind")]
fn panicking_port() -> Result<(), PortError> {
    panic!("the port panicked")
}

#[test]
fn attribute_unwind_releases() {
    let bulkhead = global("attr-unwind", 1);
    assert!(catch_unwind(AssertUnwindSafe(panicking_port)).is_err());
    assert_quiescent(&bulkhead, 1);
}

#[bulkhead(name = "attr-async")]
async fn async_port() -> Result<usize, PortError> {
    tokio::task::yield_now().await;
    Ok(BulkheadRegistry::global().bulkhead("attr-async").metrics().in_flight_calls())
}

#[bulkhead(name = "attr-async-drop")]
async fn gated_port(gate: &tokio::sync::Notify) -> Result<(), PortError> {
    gate.notified().await;
    Ok(())
}

#[tokio::test]
async fn attribute_async_runs_under_the_named_bulkhead_and_maps_refusal() {
    let bulkhead = global("attr-async", 1);
    assert_eq!(async_port().await, Ok(1));
    let held = bulkhead.try_acquire().unwrap();
    assert_eq!(
        async_port().await,
        Err(PortError::TemporarilyUnavailable("attr-async".into(), RejectReason::Full))
    );
    drop(held);
    assert_quiescent(&bulkhead, 1);
}

#[test]
fn attribute_async_dropped_while_running_releases() {
    let bulkhead = global("attr-async-drop", 1);
    let gate = tokio::sync::Notify::new();
    let (_, waker) = CountingWaker::new();
    {
        let mut call = pin!(gated_port(&gate));
        assert!(poll_once(&mut call, &waker).is_pending());
        assert_eq!(bulkhead.metrics().in_flight_calls(), 1);
    }
    assert_quiescent(&bulkhead, 1);
}

#[bulkhead(name = "attr-queue")]
async fn queued_port() -> Result<(), PortError> {
    Ok(())
}

#[test]
fn attribute_async_dropped_while_queued_leaves_the_queue() {
    let bulkhead =
        BulkheadRegistry::global().bulkhead_with("attr-queue", limit_wait(1, LONG_WAIT)).unwrap();
    let held = bulkhead.try_acquire().unwrap();
    let (_, waker) = CountingWaker::new();
    {
        let mut call = pin!(queued_port());
        assert!(poll_once(&mut call, &waker).is_pending());
        assert_eq!(bulkhead.metrics().waiting_calls(), 1);
    }
    assert_eq!(bulkhead.metrics().waiting_calls(), 0);
    drop(held);
    assert_quiescent(&bulkhead, 1);
}

/// A port with every receiver kind, a generic method and method fallbacks.
struct Port {
    cache: f64,
    calls: usize,
}

impl Port {
    #[bulkhead(name = "attr-method")]
    fn by_ref(&self) -> Result<f64, PortError> {
        Ok(self.cache)
    }

    #[bulkhead(name = "attr-method")]
    fn by_mut(&mut self) -> Result<usize, PortError> {
        self.calls += 1;
        Ok(self.calls)
    }

    #[bulkhead(name = "attr-method")]
    fn by_value(self) -> Result<f64, PortError> {
        Ok(self.cache)
    }

    #[bulkhead(name = "attr-method")]
    fn generic<T: Into<f64>>(&self, x: T) -> Result<f64, PortError> {
        Ok(self.cache + x.into())
    }

    #[bulkhead(name = "attr-method", fallback = cached)]
    fn rate(&self, currency: &str) -> f64 {
        if currency == "EUR" {
            101.5
        } else {
            92.0
        }
    }

    fn cached(&self, currency: &str, full: BulkheadFull) -> f64 {
        assert_eq!(currency, "EUR", "the fallback gets the same arguments");
        assert_eq!(full.bulkhead_name(), "attr-method");
        self.cache
    }

    #[bulkhead(name = "attr-method", fallback = cached_async)]
    async fn rate_async(&self, currency: String) -> f64 {
        if currency == "EUR" {
            101.5
        } else {
            92.0
        }
    }

    async fn cached_async(&self, currency: String, full: BulkheadFull) -> f64 {
        assert_eq!(currency, "EUR");
        assert_eq!(full.reason(), RejectReason::Full);
        self.cache
    }
}

#[tokio::test]
async fn attribute_on_methods_and_method_fallbacks() {
    let bulkhead = global("attr-method", 1);
    let mut port = Port { cache: 100.0, calls: 0 };
    assert_eq!(port.by_ref(), Ok(100.0));
    assert_eq!(port.by_mut(), Ok(1));
    assert_eq!(port.generic(2u8), Ok(102.0));
    assert_eq!(port.rate("EUR"), 101.5);
    assert_eq!(port.rate_async("EUR".into()).await, 101.5);

    let held = bulkhead.try_acquire().unwrap();
    let refused = |reason| Err(PortError::TemporarilyUnavailable("attr-method".into(), reason));
    assert_eq!(port.by_ref(), refused(RejectReason::Full));
    assert_eq!(port.by_mut(), refused(RejectReason::Full).map(|_: f64| 0));
    assert_eq!(port.calls, 1, "a refused body does not run");
    assert_eq!(port.rate("EUR"), 100.0, "refused: the fallback's answer");
    assert_eq!(port.rate_async("EUR".into()).await, 100.0);
    drop(held);
    assert_eq!(Port { cache: 5.0, calls: 0 }.by_value(), Ok(5.0));
    assert_quiescent(&bulkhead, 1);
}

/// A free function with a free fallback, bulkheads of a registry the attribute names.
fn app_registry() -> &'static BulkheadRegistry {
    static REGISTRY: OnceLock<BulkheadRegistry> = OnceLock::new();
    REGISTRY.get_or_init(|| BulkheadRegistry::new(limit(1)))
}

#[bulkhead(name = "attr-registry", registry = app_registry(), fallback = cached_rate)]
fn rate(from: &str, to: &str) -> String {
    format!("{from}/{to}: live")
}

fn cached_rate(from: &str, to: &str, full: BulkheadFull) -> String {
    format!("{from}/{to}: cached ({})", full.reason())
}

/// A `Result` alias: any type named `...Result` is taken for a `Result`.
type PortResult<T> = Result<T, PortError>;

#[bulkhead(name = "attr-registry", registry = app_registry)]
fn alias_port() -> PortResult<u8> {
    Ok(1)
}

/// A registry in a static that dereferences to it (as a `LazyLock` does; this crate's
/// MSRV predates `LazyLock`), and one behind an `Arc` a function gives.
struct Lazy(OnceLock<BulkheadRegistry>);

impl std::ops::Deref for Lazy {
    type Target = BulkheadRegistry;
    fn deref(&self) -> &BulkheadRegistry {
        self.0.get_or_init(|| BulkheadRegistry::new(limit(1)))
    }
}

static LAZY_REGISTRY: Lazy = Lazy(OnceLock::new());

fn arc_registry() -> Arc<BulkheadRegistry> {
    static REGISTRY: OnceLock<Arc<BulkheadRegistry>> = OnceLock::new();
    Arc::clone(REGISTRY.get_or_init(|| Arc::new(BulkheadRegistry::new(limit(1)))))
}

#[bulkhead(name = "attr-static", registry = LAZY_REGISTRY)]
fn static_port() -> Result<usize, PortError> {
    Ok(LAZY_REGISTRY.bulkhead("attr-static").metrics().in_flight_calls())
}

#[bulkhead(name = "attr-arc", registry = arc_registry)]
fn arc_fn_port() -> Result<usize, PortError> {
    Ok(arc_registry().bulkhead("attr-arc").metrics().in_flight_calls())
}

#[bulkhead(name = "attr-arc-call", registry = arc_registry())]
fn arc_call_port() -> Result<usize, PortError> {
    Ok(arc_registry().bulkhead("attr-arc-call").metrics().in_flight_calls())
}

#[test]
fn attribute_registry_may_be_a_fn_a_call_or_a_static() {
    assert_eq!(static_port(), Ok(1));
    assert_eq!(arc_fn_port(), Ok(1));
    assert_eq!(arc_call_port(), Ok(1));
    let global = BulkheadRegistry::global();
    for name in ["attr-static", "attr-arc", "attr-arc-call"] {
        assert!(global.find(name).is_none(), "'{name}' is not in the global registry");
    }
    let _held = LAZY_REGISTRY.bulkhead("attr-static").try_acquire_owned().unwrap();
    assert!(static_port().is_err());
}

#[test]
fn attribute_with_a_named_registry_and_a_free_fallback() {
    let bulkhead = app_registry().bulkhead("attr-registry");
    assert_eq!(rate("EUR", "RUB"), "EUR/RUB: live");
    assert_eq!(alias_port(), Ok(1));
    let held = bulkhead.try_acquire().unwrap();
    assert_eq!(rate("EUR", "RUB"), "EUR/RUB: cached (full)");
    assert_eq!(
        alias_port(),
        Err(PortError::TemporarilyUnavailable("attr-registry".into(), RejectReason::Full))
    );
    assert!(
        BulkheadRegistry::global().find("attr-registry").is_none(),
        "the global registry is not touched"
    );
    drop(held);
    assert_quiescent(&bulkhead, 1);
}

static RESOLVES: AtomicUsize = AtomicUsize::new(0);

fn counting_registry() -> &'static BulkheadRegistry {
    RESOLVES.fetch_add(1, Ordering::SeqCst);
    static REGISTRY: OnceLock<BulkheadRegistry> = OnceLock::new();
    REGISTRY.get_or_init(|| BulkheadRegistry::new(limit(2)))
}

#[bulkhead(name = "attr-once", registry = counting_registry())]
fn once_port() -> Result<usize, PortError> {
    Ok(counting_registry_untracked().bulkhead("attr-once").metrics().in_flight_calls())
}

#[bulkhead(name = "attr-once", registry = counting_registry())]
fn other_site() -> Result<(), PortError> {
    Ok(())
}

fn counting_registry_untracked() -> &'static BulkheadRegistry {
    let registry = counting_registry();
    RESOLVES.fetch_sub(1, Ordering::SeqCst);
    registry
}

#[test]
fn attribute_resolves_once_per_call_site() {
    let before = RESOLVES.load(Ordering::SeqCst);
    for _ in 0..100 {
        assert_eq!(once_port(), Ok(1));
    }
    assert_eq!(RESOLVES.load(Ordering::SeqCst) - before, 1, "one look-up for 100 calls");
    // A second site with the same name: its own look-up, the same bulkhead.
    let held = counting_registry_untracked().bulkhead("attr-once").try_acquire_owned().unwrap();
    assert_eq!(other_site(), Ok(()));
    assert_eq!(RESOLVES.load(Ordering::SeqCst) - before, 2);
    // A resolved site keeps its bulkhead even when the registry forgets it.
    let old = counting_registry_untracked().remove("attr-once").unwrap();
    let _second = old.try_acquire().unwrap();
    assert_eq!(
        once_port(),
        Err(PortError::TemporarilyUnavailable("attr-once".into(), RejectReason::Full))
    );
    drop(held);
}

#[bulkhead(name = "attr-threads")]
fn slow_port(in_flight: &AtomicUsize, peak: &AtomicUsize) -> Result<(), PortError> {
    let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    peak.fetch_max(now, Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(2));
    in_flight.fetch_sub(1, Ordering::SeqCst);
    Ok(())
}

#[test]
fn attribute_caps_concurrent_callers() {
    let bulkhead =
        BulkheadRegistry::global().bulkhead_with("attr-threads", limit_wait(2, LONG_WAIT)).unwrap();
    let (in_flight, peak) = (AtomicUsize::new(0), AtomicUsize::new(0));
    with_hang_guard(move || {
        std::thread::scope(|s| {
            for _ in 0..6 {
                s.spawn(|| {
                    for _ in 0..20 {
                        slow_port(&in_flight, &peak).unwrap();
                    }
                });
            }
        });
        assert_eq!(peak.load(Ordering::SeqCst), 2, "never more than the limit, and it is reached");
    });
    assert_quiescent(&bulkhead, 2);
}

/// A registry whose "attr-adaptive" instance has an `adaptive:` block (AIMD, limit 2..=8,
/// starting at 8, a 50 ms timeout: a slower success counts as a failure).
#[cfg(feature = "serde")]
fn adaptive_registry() -> &'static BulkheadRegistry {
    static REGISTRY: OnceLock<BulkheadRegistry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        BulkheadRegistry::from_yaml_str(
            "
resilience4j.bulkhead.instances.attr-adaptive:
  max-concurrent-calls: 8
  adaptive: { algorithm: aimd, min-limit: 2, timeout: 50ms }
",
        )
        .expect("valid config")
    })
}

#[cfg(feature = "serde")]
#[bulkhead(name = "attr-adaptive", registry = adaptive_registry)]
fn adaptive_port(slow: bool) -> Result<(), PortError> {
    if slow {
        std::thread::sleep(Duration::from_millis(60));
    }
    Ok(())
}

#[cfg(feature = "serde")]
#[bulkhead(name = "attr-adaptive", registry = adaptive_registry)]
async fn adaptive_async_port() -> Result<(), PortError> {
    tokio::task::yield_now().await;
    Ok(())
}

/// On an adaptive registry entry the attribute's calls record samples (sync and async), and
/// slow ones (over the adaptive timeout) lower the limit: the attribute runs under the
/// adaptive limit of the registry's entry.
#[cfg(feature = "serde")]
#[tokio::test]
async fn attribute_on_an_adaptive_entry_records_samples() {
    let bulkhead = adaptive_registry().find("attr-adaptive").expect("the entry");
    let adaptive = bulkhead.adaptive_limit().expect("adaptive entry");
    assert_eq!(adaptive.limit(), 8);
    adaptive_port(false).unwrap();
    adaptive_async_port().await.unwrap();
    assert_eq!(adaptive.metrics().samples(), 2);
    tokio::task::spawn_blocking(|| adaptive_port(true)).await.unwrap().unwrap();
    assert_eq!(adaptive.metrics().samples(), 3);
    assert!(
        adaptive.limit() < 8,
        "a call over the timeout lowered the limit: {}",
        adaptive.limit()
    );
}

//! Static assertions on the auto traits and derives the public API promises (in the spirit
//! of tokio's `async_send_sync.rs`). Each assertion is checked at compile time; the tests
//! exist so the checks are named and run.

use std::error::Error;
use std::fmt::{Debug, Display};
use std::future::Future;
use std::sync::Arc;

use bulkhead::{
    Acquire, AcquireOwned, Bulkhead, BulkheadConfig, BulkheadConfigBuilder, BulkheadEvent,
    BulkheadEventKind, BulkheadFull, BulkheadMetrics, ConfigError, OwnedPermit, Permit,
    RejectReason,
};

fn send<T: Send>() {}
fn send_sync<T: Send + Sync>() {}
fn debug<T: Debug>() {}
fn unpin<T: Unpin>() {}
fn send_static_future<F: Future + Send + 'static>(_: &F) {}
fn send_future<F: Future + Send>(_: &F) {}
fn error_send_sync_clone_static<T: Error + Send + Sync + Clone + 'static>() {}

/// Compiles only if `T` does *not* implement `Clone`: with a `Clone` impl both blanket
/// impls apply and the call is ambiguous (the trick `static_assertions` uses).
trait AmbiguousIfClone<A> {
    fn check() {}
}
impl<T: ?Sized> AmbiguousIfClone<()> for T {}
impl<T: Clone> AmbiguousIfClone<u8> for T {}

#[test]
fn bulkhead_is_send_sync_debug_and_not_clone() {
    send_sync::<Bulkhead>();
    debug::<Bulkhead>();
    <Bulkhead as AmbiguousIfClone<_>>::check();
    // Shared by Arc across threads.
    send_sync::<Arc<Bulkhead>>();
}

#[test]
fn permits_are_send_debug_and_not_clone() {
    send::<Permit<'static>>();
    send::<OwnedPermit>();
    debug::<Permit<'static>>();
    debug::<OwnedPermit>();
    <Permit<'static> as AmbiguousIfClone<_>>::check();
    <OwnedPermit as AmbiguousIfClone<_>>::check();
}

#[test]
fn acquire_owned_async_future_is_send_and_static() {
    let bulkhead = Arc::new(Bulkhead::new("traits-owned-future", BulkheadConfig::default()));
    let fut = bulkhead.acquire_owned_async();
    send_static_future(&fut);
    send::<AcquireOwned>();
    debug::<AcquireOwned>();
}

#[test]
fn borrowed_async_futures_are_send() {
    let bulkhead = Bulkhead::new("traits-futures", BulkheadConfig::default());
    send_future(&bulkhead.acquire_async());
    send_future(&bulkhead.call_async(async { 1 }));
    send_future(&bulkhead.acquire_async_with_sleep(|_| std::future::ready(())));
    debug::<Acquire<'static>>();
    // Holds no timer: `Unpin`, so it can be polled with `Pin::new`.
    send_future(&bulkhead.drained());
    unpin::<bulkhead::Drained<'static>>();
}

#[test]
fn bulkhead_full_is_error_send_sync_clone_static() {
    error_send_sync_clone_static::<BulkheadFull>();
    debug::<BulkheadFull>();
    fn display<T: Display>() {}
    display::<BulkheadFull>();
    // Usable with `?` into the usual boxed error.
    fn boxed() -> Result<(), Box<dyn Error + Send + Sync + 'static>> {
        let bulkhead = Bulkhead::new(
            "traits-boxed",
            BulkheadConfig::builder().max_concurrent_calls(0).build()?,
        );
        let _permit = bulkhead.try_acquire()?;
        Ok(())
    }
    let err = boxed().unwrap_err();
    let full = err.downcast_ref::<BulkheadFull>().expect("a BulkheadFull");
    assert_eq!(full.reason(), RejectReason::Full);
}

#[test]
fn bulkhead_config_is_clone_debug_partial_eq_send_sync() {
    fn clone_debug_eq_send_sync<T: Clone + Debug + PartialEq + Send + Sync>() {}
    clone_debug_eq_send_sync::<BulkheadConfig>();
    fn default<T: Default>() {}
    default::<BulkheadConfig>();
    send_sync::<BulkheadConfigBuilder>();
    debug::<BulkheadConfigBuilder>();
}

#[test]
fn config_error_is_error_send_sync_static() {
    fn error_send_sync_static<T: Error + Send + Sync + 'static>() {}
    error_send_sync_static::<ConfigError>();
}

#[test]
fn metrics_events_and_reasons_are_plain_data() {
    fn copy_debug_eq_send_sync<T: Copy + Debug + PartialEq + Send + Sync>() {}
    copy_debug_eq_send_sync::<BulkheadMetrics>();
    copy_debug_eq_send_sync::<RejectReason>();
    copy_debug_eq_send_sync::<BulkheadEventKind>();
    fn clone_debug_send_sync<T: Clone + Debug + Send + Sync + 'static>() {}
    clone_debug_send_sync::<BulkheadEvent>();
}

#[test]
fn on_event_accepts_send_sync_static_closures() {
    let bulkhead = Bulkhead::new("traits-listener", BulkheadConfig::default());
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    bulkhead.on_event(move |event: &BulkheadEvent| sink.lock().unwrap().push(event.kind()));
    drop(bulkhead.try_acquire().unwrap());
    assert_eq!(seen.lock().unwrap().len(), 2);
}

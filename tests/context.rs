//! Context stays with the call (guide rules R-RES-BH-2 and R-RES-BH-X1).
//!
//! A semaphore bulkhead runs the protected call on the caller's own thread (`call`) or in
//! the caller's own task (`call_async`), so whatever the caller set up around it, a tracing
//! span or a thread-local (the Rust counterparts of Java's MDC and security context), is
//! still there inside the call, also when the call first had to wait for a slot. The last
//! tests show the same reads coming back empty once the work is handed to another thread,
//! which is what a thread-pool bulkhead does, and why this crate offers none.

use std::cell::RefCell;
use std::sync::{Arc, Once};
use std::thread;
use std::time::{Duration, Instant};

use bulkhead::{Bulkhead, BulkheadConfig};
use tracing::{Instrument, Span};

thread_local! {
    /// What a request filter sets for the request being served on this thread.
    static REQUEST_ID: RefCell<Option<String>> = const { RefCell::new(None) };
}

fn request_id() -> Option<String> {
    REQUEST_ID.with(|id| id.borrow().clone())
}

fn set_request_id(id: &str) {
    REQUEST_ID.with(|slot| *slot.borrow_mut() = Some(id.to_owned()));
}

/// One process-wide subscriber (tracing-subscriber's registry, which tracks the current
/// span per thread), so a span's absence on another thread means it was lost, not that the
/// thread had no subscriber.
fn install_subscriber() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        tracing::subscriber::set_global_default(tracing_subscriber::registry())
            .expect("no other global subscriber in this test binary");
    });
}

/// The id and name of the current span.
fn current_span() -> Option<(tracing::Id, &'static str)> {
    let span = Span::current();
    Some((span.id()?, span.metadata()?.name()))
}

fn bulkhead(max: usize, wait: Duration) -> Arc<Bulkhead> {
    let config = BulkheadConfig::builder()
        .max_concurrent_calls(max)
        .max_wait_duration(wait)
        .build()
        .unwrap();
    Arc::new(Bulkhead::new("context", config))
}

/// Waits (hang guard: 10 s) until a caller is queued on `bulkhead`.
fn until_queued(bulkhead: &Bulkhead) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while bulkhead.metrics().waiting_calls() == 0 {
        assert!(Instant::now() < deadline, "the caller never queued");
        thread::sleep(Duration::from_millis(1));
    }
}

/// Holds the only permit of `bulkhead` on another thread until a caller queues, then
/// releases it: the caller's call runs only after a wait and a hand-off.
fn release_once_someone_waits(bulkhead: &Arc<Bulkhead>) -> thread::JoinHandle<()> {
    let permit = bulkhead.try_acquire_owned().expect("the slot is free");
    let bulkhead = Arc::clone(bulkhead);
    thread::spawn(move || {
        until_queued(&bulkhead);
        drop(permit);
    })
}

fn current_thread_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

#[test]
fn callers_span_is_current_inside_call() {
    install_subscriber();
    let bank = bulkhead(1, Duration::ZERO);
    let span = tracing::info_span!("checkout", order = 42);
    let _entered = span.enter();
    let inside = bank.call(current_span).unwrap();
    assert_eq!(inside, Some((span.id().unwrap(), "checkout")));
}

#[test]
fn callers_span_is_current_inside_call_that_waited_for_a_slot() {
    install_subscriber();
    let bank = bulkhead(1, Duration::from_secs(30));
    let releaser = release_once_someone_waits(&bank);
    let span = tracing::info_span!("checkout-after-wait");
    let _entered = span.enter();
    let inside = bank.call(current_span).unwrap();
    releaser.join().unwrap();
    assert_eq!(inside, Some((span.id().unwrap(), "checkout-after-wait")));
}

#[test]
fn callers_span_is_current_inside_call_async() {
    install_subscriber();
    let bank = bulkhead(1, Duration::from_secs(30));
    let span = tracing::info_span!("checkout-async");
    let inside = current_thread_runtime().block_on(
        async { bank.call_async(async { current_span() }).await.unwrap() }.instrument(span.clone()),
    );
    assert_eq!(inside, Some((span.id().unwrap(), "checkout-async")));
}

#[test]
fn callers_span_is_current_inside_call_async_that_waited_on_a_multi_thread_runtime() {
    install_subscriber();
    let bank = bulkhead(1, Duration::from_secs(30));
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build();
    let runtime = runtime.unwrap();
    let releaser = release_once_someone_waits(&bank);
    let span = tracing::info_span!("checkout-async-after-wait");
    let caller = {
        let bank = Arc::clone(&bank);
        async move { bank.call_async(async { current_span() }).await.unwrap() }
            .instrument(span.clone())
    };
    // The task may resume on either worker after the hand-off; the span goes with the task.
    let inside = runtime.block_on(async { tokio::spawn(caller).await.unwrap() });
    releaser.join().unwrap();
    assert_eq!(inside, Some((span.id().unwrap(), "checkout-async-after-wait")));
}

#[test]
fn callers_thread_local_is_visible_inside_call() {
    let bank = bulkhead(1, Duration::ZERO);
    set_request_id("req-call");
    assert_eq!(bank.call(request_id).unwrap().as_deref(), Some("req-call"));
}

#[test]
fn callers_thread_local_is_visible_inside_call_that_waited_for_a_slot() {
    let bank = bulkhead(1, Duration::from_secs(30));
    let releaser = release_once_someone_waits(&bank);
    set_request_id("req-call-after-wait");
    let inside = bank.call(request_id).unwrap();
    releaser.join().unwrap();
    assert_eq!(inside.as_deref(), Some("req-call-after-wait"));
}

#[test]
fn callers_thread_local_is_visible_inside_call_async_on_a_current_thread_runtime() {
    let bank = bulkhead(1, Duration::from_secs(30));
    set_request_id("req-async");
    let runtime = current_thread_runtime();
    let inside = runtime.block_on(bank.call_async(async { request_id() })).unwrap();
    assert_eq!(inside.as_deref(), Some("req-async"));

    // Also after queueing: another thread's release wakes the task, which resumes here.
    let releaser = release_once_someone_waits(&bank);
    set_request_id("req-async-after-wait");
    let inside = runtime.block_on(bank.call_async(async { request_id() })).unwrap();
    releaser.join().unwrap();
    assert_eq!(inside.as_deref(), Some("req-async-after-wait"));
}

tokio::task_local! {
    /// The async counterpart of `REQUEST_ID`: follows the task, not the thread.
    static TASK_REQUEST_ID: &'static str;
}

#[test]
fn callers_task_local_is_visible_inside_call_async_on_a_multi_thread_runtime() {
    let bank = bulkhead(1, Duration::from_secs(30));
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build();
    let runtime = runtime.unwrap();
    let releaser = release_once_someone_waits(&bank);
    let caller = {
        let bank = Arc::clone(&bank);
        TASK_REQUEST_ID.scope("req-task", async move {
            bank.call_async(async { TASK_REQUEST_ID.try_with(|id| *id).ok() }).await.unwrap()
        })
    };
    let inside = runtime.block_on(async { tokio::spawn(caller).await.unwrap() });
    releaser.join().unwrap();
    assert_eq!(inside, Some("req-task"));
}

/// What a thread-pool bulkhead does: run the call on one of its own threads.
fn on_another_thread<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    thread::spawn(work).join().unwrap()
}

#[test]
fn thread_local_is_lost_when_the_work_moves_to_another_thread() {
    let bank = bulkhead(1, Duration::ZERO);
    set_request_id("req-handed-off");
    // Same read, same caller: on the caller's thread it sees the value...
    assert_eq!(bank.call(request_id).unwrap().as_deref(), Some("req-handed-off"));
    // ...handed to another thread (a thread-pool bulkhead), it reads nothing.
    let there = bank.call(|| on_another_thread(request_id)).unwrap();
    assert_eq!(there, None);
    // The caller's own value is untouched; it just is not where the work ran.
    assert_eq!(request_id().as_deref(), Some("req-handed-off"));
}

#[test]
fn span_is_lost_when_the_work_moves_to_another_thread() {
    install_subscriber();
    let bank = bulkhead(1, Duration::ZERO);
    let span = tracing::info_span!("checkout-handed-off");
    let _entered = span.enter();
    assert_eq!(bank.call(current_span).unwrap(), Some((span.id().unwrap(), "checkout-handed-off")));
    // The subscriber is global, so the other thread could see spans: it has none entered.
    let there = bank.call(|| on_another_thread(current_span)).unwrap();
    assert_eq!(there, None);
}

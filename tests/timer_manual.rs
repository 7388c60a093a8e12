//! Bring your own timer: with `bulkhead::timer::disable_thread()` called first, no thread is
//! ever started; a bounded async wait is then ended by `fire_expired()` (what a user's own
//! timer calls), which withdraws it at its deadline and wakes it. A test binary of its own:
//! the switch is process-wide.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use bulkhead::{Bulkhead, BulkheadConfig, RejectReason};

struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn fire_expired_ends_bounded_waits_when_the_thread_is_disabled() {
    assert!(bulkhead::timer::disable_thread(), "called before any bounded wait");
    assert!(bulkhead::timer::disable_thread(), "and stays disabled");
    let wait = Duration::from_millis(10);
    let config =
        BulkheadConfig::builder().max_concurrent_calls(1).max_wait_duration(wait).build().unwrap();
    let bulkhead = Bulkhead::new("manual", config);
    let _held = bulkhead.try_acquire().expect("free");
    let counter = Arc::new(CountingWaker(AtomicUsize::new(0)));
    let waker = Waker::from(Arc::clone(&counter));
    let mut acquire = Box::pin(bulkhead.acquire_async());
    let queued_at = Instant::now();
    assert!(acquire.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
    let deadline = bulkhead::timer::fire_expired().expect("the wait armed its deadline");
    assert!(deadline > queued_at, "the deadline is ahead");
    // Nothing fires by itself: no thread.
    std::thread::sleep(wait * 3);
    assert_eq!(counter.0.load(Ordering::SeqCst), 0, "no thread woke it");
    assert_eq!(bulkhead.metrics().waiting_calls(), 1, "still queued");
    // The user's timer fires: the wait is withdrawn and woken; nothing else is armed.
    assert_eq!(bulkhead::timer::fire_expired(), None);
    assert_eq!(counter.0.load(Ordering::SeqCst), 1, "woken once");
    assert_eq!(bulkhead.metrics().waiting_calls(), 0);
    match acquire.as_mut().poll(&mut Context::from_waker(&waker)) {
        Poll::Ready(Err(err)) => {
            assert_eq!(err.reason(), RejectReason::WaitTimedOut);
            assert!(err.waited() >= wait);
        }
        other => panic!("expected WaitTimedOut, got {other:?}"),
    };
}

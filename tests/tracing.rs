//! The `tracing` feature: refusals and long waits as events, target `bulkhead`, naming the
//! bulkhead and the reason, at the documented levels; nothing for permits taken at once.
#![cfg(feature = "tracing")]

mod common;

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use bulkhead::{Bulkhead, RejectReason};
use common::*;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

/// One captured event: level, target and fields (as their `Debug` text).
#[derive(Debug, Clone)]
struct Captured {
    level: Level,
    target: String,
    fields: BTreeMap<String, String>,
}

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<Captured>>>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S: Subscriber> Layer<S> for Capture {
    fn on_event(&self, event: &Event<'_>, _cx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        self.0.lock().unwrap().push(Captured {
            level: *event.metadata().level(),
            target: event.metadata().target().to_owned(),
            fields,
        });
    }
}

/// Runs `body` with a subscriber capturing every event of this thread.
fn captured(body: impl FnOnce()) -> Vec<Captured> {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    tracing::subscriber::with_default(subscriber, body);
    let events = capture.0.lock().unwrap().clone();
    events.into_iter().filter(|e| e.target == "bulkhead").collect()
}

#[test]
fn tracing_full_rejection_is_a_debug_event_with_name_and_reason() {
    let bulkhead = Bulkhead::new("tr-full", limit(1));
    let events = captured(|| {
        let held = bulkhead.try_acquire().unwrap(); // no event for a permit taken at once
        assert_eq!(bulkhead.try_acquire().unwrap_err().reason(), RejectReason::Full);
        drop(held); // nor for a release
    });
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].level, Level::DEBUG);
    assert_eq!(events[0].fields["bulkhead"], "tr-full");
    assert_eq!(events[0].fields["reason"], "full");
}

/// The zero-wait refusal through the waiting API (`acquire`, `call`, `acquire_async`,
/// `call_async`: a default bulkhead's max wait is zero) is the same debug event. Stop 39
/// decides the unobserved refusal first on those paths; with a subscriber interested they
/// must still tell it, once per refusal.
#[test]
fn tracing_zero_wait_refusal_through_the_waiting_api_is_a_debug_event() {
    let bulkhead = Bulkhead::new("tr-zero-wait", limit(1));
    let held = bulkhead.try_acquire().unwrap();
    let (_, waker) = CountingWaker::new();
    let events = captured(|| {
        assert_eq!(bulkhead.acquire().map(drop).unwrap_err().reason(), RejectReason::Full);
        assert_eq!(bulkhead.call(|| ()).unwrap_err().reason(), RejectReason::Full);
        let mut fut = Box::pin(bulkhead.acquire_async());
        assert!(matches!(poll_once(&mut fut, &waker), std::task::Poll::Ready(Err(_))));
        let mut call = Box::pin(bulkhead.call_async(async {}));
        assert!(matches!(poll_once(&mut call, &waker), std::task::Poll::Ready(Err(_))));
    });
    drop(held);
    assert_eq!(events.len(), 4, "one event per refusal: {events:?}");
    for event in &events {
        assert_eq!(event.level, Level::DEBUG);
        assert_eq!(event.fields["bulkhead"], "tr-zero-wait");
        assert_eq!(event.fields["reason"], "full");
    }
}

/// An adaptive bulkhead's refusal (its controller alone observes) is the same debug event:
/// stop 39 returns that refusal early, and only when nobody else, `tracing` included, wants
/// to hear of it.
#[test]
fn tracing_an_adaptive_bulkheads_refusal_is_a_debug_event() {
    use bulkhead::adaptive::{AdaptiveLimit, Aimd};
    let bulkhead = Bulkhead::new("tr-adaptive", limit(2));
    bulkhead.set_adaptive_limit(AdaptiveLimit::new(Aimd::default())).unwrap();
    let mut held = Vec::new();
    while let Ok(permit) = bulkhead.try_acquire() {
        held.push(permit);
    }
    let events = captured(|| {
        assert_eq!(bulkhead.try_acquire().unwrap_err().reason(), RejectReason::Full);
    });
    drop(held);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].level, Level::DEBUG);
    assert_eq!(events[0].fields["bulkhead"], "tr-adaptive");
    assert_eq!(events[0].fields["reason"], "full");
}

#[test]
fn tracing_timed_out_wait_is_an_info_event_with_the_wait() {
    let bulkhead = Bulkhead::new("tr-timeout", limit_wait(1, Duration::from_millis(2)));
    let _held = bulkhead.try_acquire().unwrap();
    let events = captured(|| {
        assert_eq!(bulkhead.acquire().unwrap_err().reason(), RejectReason::WaitTimedOut);
    });
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].level, Level::INFO);
    assert_eq!(events[0].fields["reason"], "wait_timed_out");
    let waited: u64 = events[0].fields["waited_us"].parse().unwrap();
    assert!(waited >= 2_000, "{events:?}");
}

#[test]
fn tracing_too_many_waiting_is_a_debug_event() {
    let bulkhead = Bulkhead::new("tr-cap", limit_wait_cap(1, LONG_WAIT, 0));
    let _held = bulkhead.try_acquire().unwrap();
    let events = captured(|| {
        assert_eq!(bulkhead.acquire().unwrap_err().reason(), RejectReason::TooManyWaiting);
    });
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].level, Level::DEBUG);
    assert_eq!(events[0].fields["reason"], "too_many_waiting");
}

/// Issue 31: a sheddable call held back by the headroom is logged with its own reason.
#[test]
fn tracing_reserved_refusal_is_a_debug_event_with_its_own_reason() {
    use bulkhead::{BulkheadConfig, Criticality};
    let config =
        BulkheadConfig::builder().max_concurrent_calls(2).sheddable_headroom(1).build().unwrap();
    let bulkhead = Bulkhead::new("tr-reserved", config);
    let _user = bulkhead.try_acquire().unwrap();
    let events = captured(|| {
        let refused = bulkhead.try_acquire_many(Criticality::Sheddable).unwrap_err();
        assert_eq!(refused.reason(), RejectReason::Reserved);
    });
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].level, Level::DEBUG);
    assert_eq!(events[0].fields["bulkhead"], "tr-reserved");
    assert_eq!(events[0].fields["reason"], "reserved");
}

/// Issue 19: a keyed bulkhead's `TooManyKeys` refusal is logged like any refusal, naming
/// the refused key's would-be bulkhead.
#[test]
fn tracing_too_many_keys_is_a_debug_event_naming_the_key() {
    let keyed = bulkhead::keyed::KeyedBulkhead::<u32>::builder("tr-keyed")
        .default_config(limit(1))
        .max_keys(1)
        .build()
        .unwrap();
    let _busy = keyed.try_acquire(&1).unwrap();
    let events = captured(|| {
        assert_eq!(keyed.try_acquire(&2).unwrap_err().reason(), RejectReason::TooManyKeys);
    });
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].level, Level::DEBUG);
    assert_eq!(events[0].fields["bulkhead"], "tr-keyed/2");
    assert_eq!(events[0].fields["reason"], "too_many_keys");
}

/// Holds `bulkhead`'s only permit while `wait` queues on another thread (its events
/// captured), for past the 10 ms threshold, then frees it: the wait is one `DEBUG` event
/// naming the bulkhead, with its length.
fn assert_long_wait_logged(bulkhead: &Arc<Bulkhead>, wait: fn(&Bulkhead)) {
    let held = bulkhead.try_acquire().unwrap();
    let waiter = {
        let bulkhead = Arc::clone(bulkhead);
        thread::spawn(move || captured(|| wait(&bulkhead)))
    };
    wait_for_waiters(bulkhead, 1);
    thread::sleep(Duration::from_millis(15)); // past the 10 ms threshold
    drop(held);
    let events = join_guarded(waiter);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].level, Level::DEBUG);
    assert_eq!(events[0].fields["bulkhead"], bulkhead.name());
    let waited: u64 = events[0].fields["waited_us"].parse().unwrap();
    assert!(waited >= 15_000, "{events:?}");
}

#[test]
fn tracing_long_wait_is_a_debug_event_and_a_short_one_is_not() {
    with_hang_guard(|| {
        let bulkhead = shared("tr-wait", limit_wait(1, LONG_WAIT));
        assert_long_wait_logged(&bulkhead, |bulkhead| drop(bulkhead.acquire().unwrap()));

        // A permit free at once: no wait, no event.
        let quick = captured(|| drop(bulkhead.acquire().unwrap()));
        assert!(quick.is_empty(), "{quick:?}");
    });
}

/// An unbounded async wait reads the clock when a subscriber is interested, though the
/// bulkhead was built before the subscriber existed and nothing else observes it: its long
/// wait is logged with its length.
#[test]
fn tracing_long_unbounded_async_wait_is_timed_and_logged() {
    with_hang_guard(|| {
        let bulkhead = shared("tr-async-wait", limit_wait(1, Duration::MAX));
        assert_long_wait_logged(&bulkhead, |bulkhead| {
            drop(futures::executor::block_on(bulkhead.acquire_async()).unwrap())
        });
    });
}

/// Issue 18: a file-backed registry asked for a name its file does not define says so at
/// WARN, naming the bulkhead and the file; a name the file defines says nothing.
#[cfg(feature = "serde")]
#[test]
fn tracing_undefined_name_in_a_file_backed_registry_is_a_warning() {
    let registry =
        bulkhead::BulkheadRegistry::from_yaml_str("resilience4j.bulkhead.instances.bank: {}")
            .unwrap();
    let events = captured(|| {
        registry.bulkhead("bank");
        registry.bulkhead("bnak");
        registry.bulkhead("bnak");
    });
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].level, Level::WARN);
    assert_eq!(events[0].target, "bulkhead");
    assert_eq!(events[0].fields["bulkhead"], "bnak");
    assert_eq!(events[0].fields["file"], "the configuration text");
}

/// Issue 18: a zero limit in a loaded file is a WARN event naming the instance.
#[cfg(feature = "serde")]
#[test]
fn tracing_zero_limit_in_a_loaded_file_is_a_warning() {
    let events = captured(|| {
        bulkhead::file::ConfigFile::from_yaml_str(
            "resilience4j.bulkhead.instances: { bank: { max-concurrent-calls: 0 }, ok: {} }",
        )
        .unwrap();
    });
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].level, Level::WARN);
    assert_eq!(events[0].fields["bulkhead"], "bank");
    assert!(events[0].fields["message"].contains("refuse every call"), "{events:?}");
}

/// Issue 29: a waker that panics in `wake`, woken by a release on this thread, is contained
/// and reported as one ERROR event (target `bulkhead`) naming where it panicked and its
/// message; the release goes on (the waiter holds its grant).
#[test]
fn tracing_a_contained_waker_panic_is_an_error_event() {
    use std::task::{Poll, Wake, Waker};
    struct Panicking;
    impl Wake for Panicking {
        fn wake(self: Arc<Self>) {
            panic!("this waker panics");
        }
    }
    let bulkhead = Bulkhead::new("tr-panic", limit_wait(1, LONG_WAIT));
    let held = bulkhead.try_acquire().unwrap();
    let waker = Waker::from(Arc::new(Panicking));
    let mut acquire = bulkhead.acquire_async();
    assert!(poll_once(&mut acquire, &waker).is_pending());
    let events = captured(|| drop(held));
    let errors: Vec<_> = events.iter().filter(|e| e.level == Level::ERROR).collect();
    assert_eq!(errors.len(), 1, "{events:?}");
    assert_eq!(errors[0].fields["panicked_in"], "a waker's wake");
    assert_eq!(errors[0].fields["panic"], "this waker panics");
    assert!(matches!(poll_once(&mut acquire, &waker), Poll::Ready(Ok(_))));
}

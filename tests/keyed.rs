//! `bulkhead::keyed`: a bulkhead per key, the shared total, bounded cardinality.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use bulkhead::keyed::KeyedBulkhead;
use bulkhead::{BulkheadConfig, RejectReason};

fn config(limit: usize, wait: Duration) -> BulkheadConfig {
    BulkheadConfig::builder().max_concurrent_calls(limit).max_wait_duration(wait).build().unwrap()
}

#[test]
fn noisy_key_saturated_other_keys_still_admitted() {
    let keyed = KeyedBulkhead::<String>::builder("api")
        .default_config(config(2, Duration::ZERO))
        .total(config(10, Duration::ZERO))
        .build()
        .unwrap();
    let noisy = "noisy".to_owned();
    let held: Vec<_> = (0..2).map(|_| keyed.try_acquire(&noisy).unwrap()).collect();
    for _ in 0..100 {
        let refused = keyed.try_acquire(&noisy).unwrap_err();
        assert_eq!(refused.bulkhead_name(), "api/noisy");
        assert_eq!(refused.reason(), RejectReason::Full);
    }
    for tenant in 0..8 {
        let permit = keyed.try_acquire(&format!("quiet-{tenant}")).unwrap();
        assert_eq!(permit.key_bulkhead().name(), format!("api/quiet-{tenant}"));
    }
    // The noisy key's refusals never touched the total: 2 held, the quiet permits dropped.
    assert_eq!(keyed.total_metrics().unwrap().in_flight_calls(), 2);
    drop(held);
}

#[test]
fn key_override_applies_to_that_key_only() {
    let keyed = KeyedBulkhead::<&str>::builder("api")
        .default_config(config(1, Duration::ZERO))
        .key_config("gold", config(3, Duration::ZERO))
        .build()
        .unwrap();
    let gold: Vec<_> = (0..3).map(|_| keyed.try_acquire(&"gold").unwrap()).collect();
    assert!(keyed.try_acquire(&"gold").is_err());
    let _plain = keyed.try_acquire(&"plain").unwrap();
    assert!(keyed.try_acquire(&"plain").is_err());
    assert_eq!(keyed.config_for(&"gold").max_concurrent_calls(), 3);
    drop(gold);
}

/// Many threads, each on its own key, all through a small total: in flight never exceeds
/// the total, no key slot stays held when the total refused, and everything is back at the
/// end.
#[test]
fn two_levels_under_contention_conserve_slots() {
    const THREADS: usize = 8;
    let keyed = Arc::new(
        KeyedBulkhead::<usize>::builder("api")
            .default_config(config(2, Duration::ZERO))
            .total(config(3, Duration::ZERO))
            .build()
            .unwrap(),
    );
    let in_flight = Arc::new(AtomicUsize::new(0));
    let max_seen = Arc::new(AtomicUsize::new(0));
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (keyed, in_flight, max_seen, barrier) =
                (keyed.clone(), in_flight.clone(), max_seen.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                let mut admitted = 0;
                for i in 0..2_000 {
                    if let Ok(permit) = keyed.try_acquire(&(t % 4)) {
                        let now = in_flight.fetch_add(1, SeqCst) + 1;
                        max_seen.fetch_max(now, SeqCst);
                        if i % 7 == 0 {
                            std::thread::yield_now();
                        }
                        in_flight.fetch_sub(1, SeqCst);
                        drop(permit);
                        admitted += 1;
                    }
                }
                admitted
            })
        })
        .collect();
    let admitted: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert!(admitted > 0);
    assert!(max_seen.load(SeqCst) <= 3, "{} in flight", max_seen.load(SeqCst));
    let total = keyed.total_metrics().unwrap();
    assert_eq!((total.in_flight_calls(), total.available_concurrent_calls()), (0, 3));
    for key in 0..4 {
        let m = keyed.key_metrics(&key).unwrap();
        assert_eq!((m.in_flight_calls(), m.available_concurrent_calls()), (0, 2), "key {key}");
    }
}

/// Per-key FIFO across a blocking wait: the waiter queued on its key is served first when
/// the key frees, and the total is taken after the key.
#[test]
fn waiter_on_its_key_gets_the_freed_slot() {
    let keyed = Arc::new(
        KeyedBulkhead::<u8>::builder("api")
            .default_config(config(1, Duration::from_secs(10)))
            .total(config(4, Duration::ZERO))
            .build()
            .unwrap(),
    );
    let held = keyed.try_acquire(&1).unwrap();
    let waiter = {
        let keyed = keyed.clone();
        std::thread::spawn(move || keyed.acquire(&1).map(|p| p.key_bulkhead().name().to_owned()))
    };
    while keyed.key_metrics(&1).unwrap().waiting_calls() == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    // Queued on key 1 while holding nothing of the total.
    assert_eq!(keyed.total_metrics().unwrap().in_flight_calls(), 1);
    assert!(keyed.try_acquire(&1).is_err(), "no barging past the queued waiter");
    drop(held);
    assert_eq!(waiter.join().unwrap().unwrap(), "api/1");
}

/// A future waiting for the total, dropped: the key slot it already held is released.
#[tokio::test]
async fn cancelled_wait_on_total_releases_key_slot() {
    let keyed = KeyedBulkhead::<u8>::builder("api")
        .default_config(config(1, Duration::from_secs(10)))
        .total(config(1, Duration::from_secs(10)))
        .build()
        .unwrap();
    let held = keyed.try_acquire(&1).unwrap();
    let waited = tokio::time::timeout(Duration::from_millis(20), keyed.acquire_async(&2)).await;
    assert!(waited.is_err(), "the total is held: the wait must still be pending");
    let key2 = keyed.key_metrics(&2).unwrap();
    assert_eq!((key2.in_flight_calls(), key2.waiting_calls()), (0, 0));
    assert_eq!(keyed.total_metrics().unwrap().waiting_calls(), 0);
    drop(held);
    let permit = keyed.acquire_async(&2).await.unwrap();
    assert_eq!(permit.key_bulkhead().name(), "api/2");
}

#[test]
fn bounded_keys_refuse_with_the_key_named() {
    let keyed = KeyedBulkhead::<u32>::builder("hosts").max_keys(3).build().unwrap();
    let busy: Vec<_> = (0..3).map(|k| keyed.try_acquire(&k).unwrap()).collect();
    let refused = keyed.try_acquire(&77).unwrap_err();
    assert_eq!(refused.reason(), RejectReason::TooManyKeys);
    assert_eq!((refused.bulkhead_name(), refused.max_concurrent_calls()), ("hosts/77", 3));
    assert_eq!(
        refused.to_string(),
        "Bulkhead 'hosts/77' has no room for another key (too many keys; max keys 3)"
    );
    drop(busy);
    // All three are idle now: the next new key evicts them.
    let _p = keyed.try_acquire(&77).unwrap();
    assert_eq!(keyed.live_keys(), 1);
}

/// 100 000 distinct keys through a map bounded at 64: never more than 64 live, and the
/// busy keys (held permits) are never evicted.
#[test]
fn churn_of_distinct_keys_stays_bounded() {
    let keyed = KeyedBulkhead::<u64>::builder("tenants").max_keys(64).build().unwrap();
    let pinned: Vec<_> = (0..10).map(|k| keyed.try_acquire(&k).unwrap()).collect();
    for k in 10..100_010 {
        drop(keyed.try_acquire(&k).unwrap());
        assert!(keyed.live_keys() <= 64);
    }
    for k in 0..10 {
        assert_eq!(keyed.key_metrics(&k).unwrap().in_flight_calls(), 1, "key {k} evicted");
    }
    drop(pinned);
}

#[test]
fn fallback_key_takes_calls_when_the_map_is_busy() {
    let keyed = KeyedBulkhead::<&str>::builder("hosts")
        .max_keys(1)
        .fallback_key("other")
        .key_config("other", config(1, Duration::ZERO))
        .build()
        .unwrap();
    let _a = keyed.try_acquire(&"a").unwrap();
    let b = keyed.try_acquire(&"b").unwrap();
    assert_eq!(b.key_bulkhead().name(), "hosts/other");
    // The fallback's own limit applies to everything sent there.
    assert_eq!(keyed.try_acquire(&"c").unwrap_err().reason(), RejectReason::Full);
}

#[test]
fn metrics_have_bounded_labels() {
    let keyed = KeyedBulkhead::<u32>::builder("api").build().unwrap();
    let held: Vec<_> = (0..50).map(|k| keyed.try_acquire(&k).unwrap()).collect();
    let metrics = keyed.metrics(5);
    assert_eq!(metrics.keys.len(), 5);
    assert_eq!(metrics.other_keys, 45);
    assert_eq!(metrics.others.in_flight_calls(), 45);
    assert_eq!(metrics.others.max_allowed_concurrent_calls(), 45 * 25);
    drop(held);
}

#[test]
fn keyed_types_are_send_and_sync_and_futures_send() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>(_: &T) {}
    send_sync::<KeyedBulkhead<String>>();
    send_sync::<bulkhead::keyed::OwnedKeyedPermit>();
    send_sync::<bulkhead::keyed::AcquireOwnedKeyed>();
    let keyed = KeyedBulkhead::<String>::builder("api").build().unwrap();
    let key = "acme".to_owned();
    let permit = keyed.try_acquire(&key).unwrap();
    send(&permit);
    drop(permit);
    send(&keyed.acquire_async(&key));
    send(&keyed.call_async(&key, async { 1 }));
}

/// Issue 17: a closed keyed bulkhead whose map is full refuses a new key with `Closed`, not
/// `TooManyKeys` (the map's bound is not why it is refused), and the key takes no place.
#[test]
fn closed_full_map_refuses_a_new_key_as_closed() {
    let keyed = KeyedBulkhead::<u32>::builder("api")
        .default_config(config(1, Duration::ZERO))
        .max_keys(1)
        .build()
        .unwrap();
    let busy = keyed.try_acquire(&1).unwrap();
    assert_eq!(
        keyed.try_acquire(&2).unwrap_err().reason(),
        RejectReason::TooManyKeys,
        "open and full"
    );
    assert!(keyed.close());
    for refused in [keyed.try_acquire(&2).unwrap_err(), keyed.acquire(&2).unwrap_err()] {
        assert_eq!(refused.reason(), RejectReason::Closed, "{refused:?}");
        assert_eq!(refused.bulkhead_name(), "api/2");
    }
    assert_eq!(keyed.live_keys(), 1, "the refused key took no place");
    drop(busy);
    assert!(keyed.wait_drained(Duration::ZERO));
}

/// Issue 17: `evict_idle` after `close` evicts the idle keys (a closed key used to never
/// count as idle, so a closed keyed bulkhead kept every key until dropped), and never a
/// key with a call in flight.
#[test]
fn evict_idle_after_close_evicts_idle_closed_keys() {
    let keyed = KeyedBulkhead::<u32>::builder("api").shards(4).build().unwrap();
    for key in 0..8 {
        drop(keyed.try_acquire(&key).unwrap());
    }
    let busy = keyed.try_acquire(&8).unwrap();
    assert_eq!(keyed.live_keys(), 9);
    assert!(keyed.close());
    assert_eq!(keyed.evict_idle(), 8, "every idle closed key");
    assert_eq!(keyed.live_keys(), 1);
    assert!(keyed.key_metrics(&8).is_some(), "the busy key stays");
    drop(busy);
    assert_eq!(keyed.evict_idle(), 1);
    assert_eq!(keyed.live_keys(), 0);
    // Still closed afterwards, for every key.
    assert_eq!(keyed.try_acquire(&8).unwrap_err().reason(), RejectReason::Closed);
    assert_eq!(keyed.live_keys(), 0);
}

// ---------------------------------------------------------------------------------------
// Issue 19: the plain verbs with a key, one refusal type.
// ---------------------------------------------------------------------------------------

/// A keyed bulkhead "api": keys of `key` slots, a total of `total`, `max_keys` keys, no wait.
fn family(key: usize, total: usize, max_keys: usize) -> Arc<KeyedBulkhead<u32>> {
    Arc::new(
        KeyedBulkhead::<u32>::builder("api")
            .default_config(config(key, Duration::ZERO))
            .total(config(total, Duration::ZERO))
            .max_keys(max_keys)
            .build()
            .unwrap(),
    )
}

/// The caller's error type: what `call_fallible` maps a refusal into.
#[derive(Debug, PartialEq)]
enum PortError {
    Domain(u32),
    Unavailable { bulkhead: String, reason: RejectReason },
}

impl From<bulkhead::BulkheadFull> for PortError {
    fn from(full: bulkhead::BulkheadFull) -> Self {
        PortError::Unavailable { bulkhead: full.bulkhead_name().to_owned(), reason: full.reason() }
    }
}

fn unavailable(bulkhead: &str, reason: RejectReason) -> Result<u32, PortError> {
    Err(PortError::Unavailable { bulkhead: bulkhead.to_owned(), reason })
}

/// One `From<BulkheadFull>` serves the plain and the keyed `call_fallible`, and each level's
/// refusal names that level: the key, the total, the refused key.
#[test]
fn call_fallible_maps_every_level_through_one_from() {
    let keyed = family(1, 2, 2);
    assert_eq!(
        keyed.call_fallible(&1, || Err::<u32, _>(PortError::Domain(4))),
        Err(PortError::Domain(4))
    );
    assert_eq!(keyed.call_fallible(&1, || Ok::<_, PortError>(7)), Ok(7));
    let one = keyed.try_acquire(&1).unwrap();
    assert_eq!(keyed.call_fallible(&1, || Ok(7)), unavailable("api/1", RejectReason::Full));
    let two = keyed.try_acquire(&2).unwrap();
    // Keys 1 and 2 are busy and live: key 3 has no room.
    assert_eq!(keyed.call_fallible(&3, || Ok(7)), unavailable("api/3", RejectReason::TooManyKeys));
    drop(two);
    let _two_again = keyed.try_acquire_owned(&2).unwrap();
    drop(one);
    let _one_again = keyed.try_acquire(&1).unwrap();
    // Both total slots are held: key 2 is full itself, so ask a key with a free slot.
    keyed.change_key_config(2, config(2, Duration::ZERO));
    assert_eq!(keyed.call_fallible(&2, || Ok(7)), unavailable("api", RejectReason::Full));
    let plain = bulkhead::Bulkhead::new("plain", config(0, Duration::ZERO));
    assert_eq!(plain.call_fallible(|| Ok(7)), unavailable("plain", RejectReason::Full));
    // The async forms map the same way.
    let refused = futures::executor::block_on(keyed.call_async_fallible(&1, async { Ok(7) }));
    assert_eq!(refused, unavailable("api/1", RejectReason::Full));
    let owned = keyed.call_owned_async_fallible(&3, async { Ok(7) });
    assert_eq!(futures::executor::block_on(owned), unavailable("api/3", RejectReason::TooManyKeys));
}

#[test]
fn owned_permits_move_across_threads_and_release_both_levels() {
    let keyed = family(2, 2, 8);
    let permits = vec![keyed.try_acquire_owned(&1).unwrap(), keyed.acquire_owned(&1).unwrap()];
    assert_eq!(permits[0].key_bulkhead().name(), "api/1");
    assert_eq!(permits[0].total_bulkhead().unwrap().name(), "api");
    // The total is full: an owned acquire of another key holds nothing afterwards.
    assert_eq!(keyed.try_acquire_owned(&2).unwrap_err().bulkhead_name(), "api");
    assert_eq!(keyed.key_metrics(&2).unwrap().in_flight_calls(), 0);
    std::thread::spawn(move || drop(permits)).join().unwrap();
    assert_eq!(keyed.total_metrics().unwrap().in_flight_calls(), 0);
    assert_eq!(keyed.key_metrics(&1).unwrap().in_flight_calls(), 0);
    // The owned future borrows nothing: it is spawned on another thread.
    let acquire = keyed.acquire_owned_async(&5);
    let permit = std::thread::spawn(move || futures::executor::block_on(acquire)).join().unwrap();
    assert_eq!(permit.unwrap().key_bulkhead().name(), "api/5");
    assert_eq!(keyed.key_metrics(&5).unwrap().in_flight_calls(), 0);
}

#[test]
fn acquire_timeout_bounds_both_levels_together() {
    let keyed = KeyedBulkhead::<u32>::builder("api")
        .default_config(config(1, Duration::from_secs(60)))
        .total(config(1, Duration::from_secs(60)))
        .build()
        .unwrap();
    let held = keyed.try_acquire(&1).unwrap();
    let wait = Duration::from_millis(20);
    // Key 1 is full: its own wait is bounded by `wait`, not the configured minute.
    let err = keyed.acquire_timeout(&1, wait).unwrap_err();
    assert_eq!((err.bulkhead_name(), err.reason()), ("api/1", RejectReason::WaitTimedOut));
    assert!(err.waited() >= wait);
    // Key 2 is free, the total is not: the total's wait is bounded too, and key 2's slot
    // is given back.
    let err = keyed.acquire_timeout(&2, wait).unwrap_err();
    assert_eq!((err.bulkhead_name(), err.reason()), ("api", RejectReason::WaitTimedOut));
    assert_eq!(keyed.key_metrics(&2).unwrap().in_flight_calls(), 0);
    drop(held);
    assert!(keyed.acquire_timeout(&2, wait).is_ok());
}

#[test]
fn on_event_hears_every_key_the_total_and_too_many_keys() {
    let keyed = family(1, 4, 2);
    drop(keyed.try_acquire(&1).unwrap()); // live before the listener
    let heard = Arc::new(std::sync::Mutex::new(Vec::new()));
    let handle = {
        let heard = Arc::clone(&heard);
        keyed.on_event(move |event| {
            heard.lock().unwrap().push((event.bulkhead_name().to_owned(), event.kind()));
        })
    };
    let one = keyed.try_acquire(&1).unwrap();
    let two = keyed.try_acquire(&2).unwrap(); // created after the listener
    assert!(keyed.try_acquire(&3).is_err()); // too many keys
    drop((one, two));
    use bulkhead::BulkheadEventKind::{CallFinished, CallPermitted, CallRejected};
    let names = |kind| {
        let heard = heard.lock().unwrap();
        let mut names: Vec<String> =
            heard.iter().filter(|(_, k)| *k == kind).map(|(n, _)| n.clone()).collect();
        names.sort();
        names
    };
    assert_eq!(names(CallPermitted), ["api", "api", "api/1", "api/2"]);
    assert_eq!(names(CallFinished), ["api", "api", "api/1", "api/2"]);
    assert_eq!(names(CallRejected(RejectReason::TooManyKeys)), ["api/3"]);
    assert!(handle.remove());
    let before = heard.lock().unwrap().len();
    drop(keyed.try_acquire(&1).unwrap());
    assert_eq!(heard.lock().unwrap().len(), before, "removed from every bulkhead");
    assert_eq!(keyed.metrics(0).too_many_keys, 1);
}

#[test]
fn enable_counters_counts_keys_created_later() {
    let keyed = family(1, 4, 8);
    drop(keyed.try_acquire(&1).unwrap());
    keyed.enable_counters();
    keyed.enable_counters(); // idempotent
    for key in [1, 2] {
        let permit = keyed.try_acquire(&key).unwrap();
        assert!(keyed.try_acquire(&key).is_err());
        drop(permit);
        let m = keyed.key_metrics(&key).unwrap();
        assert_eq!((m.calls_permitted(), m.calls_rejected(RejectReason::Full)), (1, 1), "{key}");
    }
    assert_eq!(keyed.total_metrics().unwrap().calls_finished(), 2);
}

#[test]
fn change_config_of_a_key_the_default_and_the_total() {
    let keyed = family(1, 4, 8);
    let one = keyed.try_acquire(&1).unwrap();
    drop(keyed.try_acquire(&2).unwrap());
    keyed.change_key_config(1, config(2, Duration::ZERO));
    let one_more = keyed.try_acquire(&1).unwrap();
    assert!(keyed.try_acquire(&1).is_err());
    keyed.change_default_config(config(3, Duration::ZERO));
    assert_eq!(keyed.key_metrics(&2).unwrap().max_allowed_concurrent_calls(), 3, "live key");
    assert_eq!(keyed.key_metrics(&1).unwrap().max_allowed_concurrent_calls(), 2, "override");
    drop(keyed.try_acquire(&7).unwrap());
    assert_eq!(keyed.key_metrics(&7).unwrap().max_allowed_concurrent_calls(), 3, "new key");
    // An evicted key comes back with its override.
    drop((one, one_more));
    assert!(keyed.evict_idle() >= 3);
    drop(keyed.try_acquire(&1).unwrap());
    assert_eq!(keyed.key_metrics(&1).unwrap().max_allowed_concurrent_calls(), 2);
    keyed.change_total_config(config(1, Duration::ZERO)).unwrap();
    let _held = keyed.try_acquire(&1).unwrap();
    assert_eq!(keyed.try_acquire(&2).unwrap_err().bulkhead_name(), "api");
    let no_total = KeyedBulkhead::<u32>::builder("hosts").build().unwrap();
    let err = no_total.change_total_config(config(1, Duration::ZERO)).unwrap_err();
    assert_eq!(err.key(), "total");
    assert!(err.to_string().contains("no total"), "{err}");
}

/// Changes racing key creation: every key ends with the last configuration.
#[test]
fn change_default_config_racing_new_keys_ends_consistent() {
    let keyed = Arc::new(
        KeyedBulkhead::<u32>::builder("api")
            .default_config(config(1, Duration::ZERO))
            .max_keys(10_000)
            .build()
            .unwrap(),
    );
    let start = Arc::new(Barrier::new(3));
    let creators: Vec<_> = (0..2u32)
        .map(|t| {
            let (keyed, start) = (Arc::clone(&keyed), Arc::clone(&start));
            std::thread::spawn(move || {
                start.wait();
                for key in 0..500 {
                    drop(keyed.try_acquire(&(t * 1_000 + key)));
                }
            })
        })
        .collect();
    start.wait();
    for limit in 2..=20 {
        keyed.change_default_config(config(limit, Duration::ZERO));
    }
    creators.into_iter().for_each(|t| t.join().unwrap());
    let metrics = keyed.metrics(usize::MAX);
    assert_eq!(metrics.keys.len(), 1_000);
    for (key, m) in &metrics.keys {
        assert_eq!(m.max_allowed_concurrent_calls(), 20, "key {key}");
    }
}

#[test]
fn drained_waits_for_close_and_for_every_key() {
    let keyed = family(2, 4, 8);
    let permit = keyed.try_acquire_owned(&1).unwrap();
    let waiter = {
        let keyed = Arc::clone(&keyed);
        std::thread::spawn(move || futures::executor::block_on(keyed.drained()))
    };
    let blocking = {
        let keyed = Arc::clone(&keyed);
        std::thread::spawn(move || keyed.wait_drained(Duration::from_secs(30)))
    };
    std::thread::sleep(Duration::from_millis(20));
    assert!(!waiter.is_finished() && !blocking.is_finished(), "not closed yet");
    assert!(keyed.close());
    std::thread::sleep(Duration::from_millis(20));
    assert!(!waiter.is_finished(), "a call is in flight");
    drop(permit);
    waiter.join().unwrap();
    assert!(blocking.join().unwrap());
    assert!(!family(1, 1, 1).wait_drained(Duration::ZERO), "never closed");
}

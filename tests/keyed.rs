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
        "Bulkhead 'hosts/77' is full and does not permit further calls (too many keys; max keys 3)"
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

//! Keyed bulkheads in a `BulkheadRegistry`: look-up by name, key types, close and drain.

use std::sync::{Arc, Barrier};
use std::time::Duration;

use bulkhead::keyed::KeyedBulkhead;
use bulkhead::{BulkheadConfig, BulkheadRegistry, RegistryError, RejectReason};

fn config(limit: usize) -> BulkheadConfig {
    BulkheadConfig::builder()
        .max_concurrent_calls(limit)
        .max_wait_duration(Duration::ZERO)
        .build()
        .unwrap()
}

#[test]
fn concurrent_first_look_ups_share_one_keyed_bulkhead() {
    let registry = Arc::new(BulkheadRegistry::new(config(3)));
    let barrier = Arc::new(Barrier::new(8));
    let found: Vec<_> = (0..8)
        .map(|_| {
            let (registry, barrier) = (Arc::clone(&registry), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                registry.keyed::<u32>("tenants").unwrap()
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().unwrap())
        .collect();
    for keyed in &found {
        assert!(Arc::ptr_eq(keyed, &found[0]));
    }
    assert_eq!(registry.keyed_names(), ["tenants"]);
    // The registry's default configuration is each key's.
    let held: Vec<_> = (0..3).map(|_| found[0].try_acquire(&7).unwrap()).collect();
    assert_eq!(found[0].try_acquire(&7).unwrap_err().reason(), RejectReason::Full);
    drop(held);
}

#[test]
fn key_type_mismatch_names_both_types_and_changes_nothing() {
    let registry = BulkheadRegistry::default();
    let tenants = registry.keyed::<u64>("tenants").unwrap();
    match registry.keyed_with("tenants", KeyedBulkhead::<String>::builder("tenants")) {
        Err(RegistryError::KeyTypeMismatch { name, registered, requested }) => {
            assert_eq!(name, "tenants");
            assert_eq!(registered, "u64");
            assert!(requested.ends_with("String"), "{requested}");
        }
        other => panic!("{other:?}"),
    }
    assert!(Arc::ptr_eq(&registry.find_keyed::<u64>("tenants").unwrap(), &tenants));
    // A plain bulkhead of the same name is another namespace.
    assert_eq!(registry.bulkhead("tenants").name(), "tenants");
    assert_eq!(registry.names(), ["tenants"]);
    assert_eq!(registry.keyed_names(), ["tenants"]);
}

#[test]
fn close_all_and_wait_drained_reach_keyed_bulkheads() {
    let registry = BulkheadRegistry::new(config(4));
    let plain = registry.bulkhead("bank");
    let tenants = registry
        .keyed_with(
            "tenants",
            KeyedBulkhead::<u32>::builder("tenants").total(config(10)).fallback_key(0).max_keys(2),
        )
        .unwrap();
    let in_flight = tenants.try_acquire(&1).unwrap();
    let fallback = tenants.try_acquire(&0).unwrap();
    assert_eq!(registry.close_all(), 2, "the plain bulkhead and the keyed one");
    assert_eq!(registry.close_all(), 0);
    assert!(plain.is_closed() && tenants.is_closed());
    // A live key, a new key, the fallback key: all refuse with Closed, holding nothing.
    for key in [1, 2, 0] {
        assert_eq!(tenants.try_acquire(&key).unwrap_err().reason(), RejectReason::Closed);
    }
    assert!(tenants.total().unwrap().is_closed());
    assert!(!registry.wait_drained(Duration::ZERO), "two keyed calls in flight");
    std::thread::scope(|s| {
        s.spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            drop((in_flight, fallback));
        });
        assert!(registry.wait_drained(Duration::from_secs(10)));
    });
    assert_eq!(tenants.total_metrics().unwrap().in_flight_calls(), 0);
}

#[test]
fn removed_keyed_bulkhead_is_rebuilt_on_next_look_up() {
    let registry = BulkheadRegistry::default();
    let old = registry.keyed::<u32>("tenants").unwrap();
    old.close();
    assert!(registry.remove_keyed("tenants"));
    let new = registry.keyed::<u32>("tenants").unwrap();
    assert!(!Arc::ptr_eq(&old, &new));
    assert!(!new.is_closed());
    assert!(new.try_acquire(&1).is_ok());
    assert!(!new.wait_drained(Duration::ZERO), "not closed: returns false at once");
}

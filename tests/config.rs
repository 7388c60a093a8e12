//! `BulkheadConfig`: defaults, the builder, `for_pool`, and `build()` validation.

use std::time::Duration;

use bulkhead::{Bulkhead, BulkheadConfig};

#[test]
fn config_default_is_25_calls_fail_fast_no_waiter_cap() {
    let config = BulkheadConfig::default();
    assert_eq!(BulkheadConfig::DEFAULT_MAX_CONCURRENT_CALLS, 25);
    assert_eq!(config.max_concurrent_calls(), 25);
    assert_eq!(config.max_wait_duration(), Duration::ZERO);
    assert_eq!(config.max_waiting_calls(), None);
}

#[test]
fn config_builder_starts_from_default() {
    assert_eq!(BulkheadConfig::builder().build().unwrap(), BulkheadConfig::default());
}

#[test]
fn config_builder_sets_each_field() {
    let config = BulkheadConfig::builder()
        .max_concurrent_calls(16)
        .max_wait_duration(Duration::from_millis(100))
        .max_waiting_calls(32)
        .build()
        .unwrap();
    assert_eq!(config.max_concurrent_calls(), 16);
    assert_eq!(config.max_wait_duration(), Duration::from_millis(100));
    assert_eq!(config.max_waiting_calls(), Some(32));
    // Untouched fields keep their defaults.
    let only_wait =
        BulkheadConfig::builder().max_wait_duration(Duration::from_secs(1)).build().unwrap();
    assert_eq!(only_wait.max_concurrent_calls(), 25);
    assert_eq!(only_wait.max_waiting_calls(), None);
}

#[test]
fn config_builder_keeps_sub_millisecond_and_extreme_waits() {
    for wait in [
        Duration::from_nanos(1),
        Duration::from_micros(300),
        Duration::from_nanos(1_500_000),
        Duration::MAX,
    ] {
        let config = BulkheadConfig::builder().max_wait_duration(wait).build().unwrap();
        assert_eq!(config.max_wait_duration(), wait);
    }
}

#[test]
fn config_builder_accepts_zero_limit_and_zero_waiters() {
    let config =
        BulkheadConfig::builder().max_concurrent_calls(0).max_waiting_calls(0).build().unwrap();
    assert_eq!(config.max_concurrent_calls(), 0);
    assert_eq!(config.max_waiting_calls(), Some(0));
}

#[test]
fn config_builder_accepts_the_engine_maximum() {
    let max = BulkheadConfig::MAX_CONCURRENT_CALLS;
    assert_eq!(max, (1 << 30) - 1);
    let config = BulkheadConfig::builder().max_concurrent_calls(max).build().unwrap();
    assert_eq!(config.max_concurrent_calls(), max);
    let bulkhead = Bulkhead::new("config-max", config);
    let m = bulkhead.metrics();
    assert_eq!(m.max_allowed_concurrent_calls(), max);
    assert_eq!(m.available_concurrent_calls(), max);
    drop(bulkhead.try_acquire().unwrap());
}

#[test]
fn config_build_above_maximum_names_key_and_value() {
    for n in [BulkheadConfig::MAX_CONCURRENT_CALLS + 1, 1 << 40, usize::MAX] {
        let err = BulkheadConfig::builder().max_concurrent_calls(n).build().unwrap_err();
        let text = err.to_string();
        assert!(text.contains("max_concurrent_calls"), "{text}");
        assert!(text.contains(&n.to_string()), "{text}");
        assert_eq!(err.key(), "max_concurrent_calls");
        assert_eq!(err.value(), n.to_string());
        let _: &dyn std::error::Error = &err;
    }
}

#[test]
fn config_for_pool_takes_four_fifths_with_floor_and_minimum_one() {
    let cases =
        [(0, 0), (1, 1), (2, 1), (4, 3), (5, 4), (6, 4), (10, 8), (20, 16), (21, 16), (100, 80)];
    for (pool, calls) in cases {
        let config = BulkheadConfig::for_pool(pool);
        assert_eq!(config.max_concurrent_calls(), calls, "for_pool({pool})");
        assert_eq!(config.max_wait_duration(), Duration::from_millis(100), "for_pool({pool})");
        assert_eq!(config.max_waiting_calls(), None);
    }
}

#[test]
fn config_for_pool_huge_does_not_overflow_and_stays_within_maximum() {
    for pool in [usize::MAX, usize::MAX / 4 + 1, 1 << 40, BulkheadConfig::MAX_CONCURRENT_CALLS * 2]
    {
        let calls = BulkheadConfig::for_pool(pool).max_concurrent_calls();
        assert!(calls <= BulkheadConfig::MAX_CONCURRENT_CALLS, "for_pool({pool}) = {calls}");
        assert!(calls >= 1);
        // Usable as is.
        let bulkhead = Bulkhead::new("config-huge-pool", BulkheadConfig::for_pool(pool));
        assert_eq!(bulkhead.metrics().max_allowed_concurrent_calls(), calls);
    }
    // Within the engine's range the rule is exact: floor(n * 4 / 5).
    let n = 1_000_000_007;
    assert_eq!(BulkheadConfig::for_pool(n).max_concurrent_calls(), 800_000_005);
}

#[test]
fn config_for_pool_20_admits_16_then_refuses() {
    let bulkhead = Bulkhead::new("config-pool-20", BulkheadConfig::for_pool(20));
    let held: Vec<_> = (0..16).map(|_| bulkhead.try_acquire().unwrap()).collect();
    assert!(bulkhead.try_acquire().is_err());
    drop(held);
}

#[test]
fn config_is_comparable_and_cloneable() {
    let a = BulkheadConfig::for_pool(20);
    let b = a.clone();
    assert_eq!(a, b);
    assert_ne!(a, BulkheadConfig::default());
    assert!(format!("{a:?}").contains("16"));
}

#[test]
fn bulkhead_new_keeps_name_and_config() {
    let config = BulkheadConfig::builder()
        .max_concurrent_calls(3)
        .max_wait_duration(Duration::from_micros(300))
        .max_waiting_calls(2)
        .build()
        .unwrap();
    let bulkhead = Bulkhead::new(String::from("config-new"), config.clone());
    assert_eq!(bulkhead.name(), "config-new");
    assert_eq!(bulkhead.config(), config);
}

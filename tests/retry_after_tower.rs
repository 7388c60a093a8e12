//! The tower layer carries a refusal's `retry_after` (issue 32): its error holds the
//! `BulkheadFull` with the estimate, and `RetryAfter` gives the HTTP header values.
#![cfg(feature = "tower")]

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bulkhead::tower::{BulkheadLayer, RetryAfter};
use bulkhead::{Bulkhead, BulkheadConfig, BulkheadFull};
use tower::{service_fn, ServiceBuilder, ServiceExt};

fn one_slot(name: &str) -> Arc<Bulkhead> {
    let config = BulkheadConfig::builder().max_concurrent_calls(1).build().unwrap();
    Arc::new(Bulkhead::new(name, config))
}

#[tokio::test]
async fn the_layers_refusal_carries_the_estimate_as_headers() {
    let bank = one_slot("bank");
    bank.enable_counters();
    let client = ServiceBuilder::new().layer(BulkheadLayer::new(Arc::clone(&bank))).service(
        service_fn(|ms: u64| async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok::<_, Infallible>(ms)
        }),
    );
    let _busy = bank.try_acquire().unwrap();
    // No call finished yet: a refusal, but no estimate.
    let err = client.clone().oneshot(1).await.unwrap_err();
    assert!(err.downcast_ref::<BulkheadFull>().is_some());
    assert_eq!(RetryAfter::from_error(&*err), None);
    drop(_busy);
    for _ in 0..3 {
        client.clone().oneshot(2).await.unwrap();
    }
    let _busy = bank.try_acquire().unwrap();
    let err = client.oneshot(2).await.unwrap_err();
    let full = err.downcast_ref::<BulkheadFull>().expect("the bulkhead's refusal");
    let retry = RetryAfter::from_error(&*err).expect("observed, calls finished");
    assert_eq!(Some(retry.estimate()), full.retry_after());
    let estimate = retry.estimate();
    // Whole seconds rounded up, at least 1; milliseconds rounded up, at least 1.
    let secs = estimate.as_secs() + u64::from(estimate.subsec_nanos() > 0);
    assert_eq!(retry.header_seconds(), secs.max(1));
    assert_eq!(u128::from(retry.header_millis()), estimate.as_nanos().div_ceil(1_000_000).max(1));
}

#[tokio::test]
async fn an_unobserved_layers_refusal_has_no_estimate() {
    let bank = one_slot("quiet");
    let client = ServiceBuilder::new()
        .layer(BulkheadLayer::new(Arc::clone(&bank)))
        .service(service_fn(|x: u32| async move { Ok::<_, Infallible>(x) }));
    client.clone().oneshot(1).await.unwrap();
    let _busy = bank.try_acquire().unwrap();
    let err = client.oneshot(2).await.unwrap_err();
    assert!(err.downcast_ref::<BulkheadFull>().is_some());
    assert_eq!(RetryAfter::from_error(&*err), None);
}

#[test]
fn header_values_round_up_and_are_at_least_one() {
    let cases = [(0, 1, 1), (1, 1, 1), (999_999, 1, 1), (1_000_001, 1, 2), (999_999_999, 1, 1000)];
    for (nanos, secs, millis) in cases {
        let retry = RetryAfter::new(Duration::from_nanos(nanos));
        assert_eq!((retry.header_seconds(), retry.header_millis()), (secs, millis), "{nanos} ns");
    }
    let retry = RetryAfter::new(Duration::from_millis(2_001));
    assert_eq!((retry.header_seconds(), retry.header_millis()), (3, 2_001));
}

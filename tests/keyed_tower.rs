//! `KeyedBulkheadLayer` (feature `tower`): a slot of the request's key, then one of the total,
//! held until the response is there; refusals are `BulkheadFull` in the `BoxError`, and the
//! key's slot is given back when the total refuses; dropping the response future releases
//! what it holds.
#![cfg(feature = "tower")]

mod common;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bulkhead::keyed::KeyedBulkhead;
use bulkhead::tower::KeyedBulkheadLayer;
use bulkhead::RejectReason;
use common::*;
use tower::{service_fn, Layer, Service, ServiceExt};

type Request = (&'static str, u32);

fn keyed(
    key_limit: usize,
    total: Option<usize>,
    max_keys: usize,
) -> Arc<KeyedBulkhead<&'static str>> {
    let mut builder = KeyedBulkhead::<&'static str>::builder("api")
        .default_config(limit(key_limit))
        .max_keys(max_keys);
    if let Some(total) = total {
        builder = builder.total(limit(total));
    }
    Arc::new(builder.build().unwrap())
}

fn key_of(request: &Request) -> &'static str {
    request.0
}

/// An inner service that waits for `gate` before answering its request's number.
fn gated(
    gate: Arc<tokio::sync::Notify>,
) -> impl Service<Request, Response = u32, Error = Infallible, Future = impl Send> + Clone {
    service_fn(move |request: Request| {
        let gate = Arc::clone(&gate);
        async move {
            gate.notified().await;
            Ok::<_, Infallible>(request.1)
        }
    })
}

fn refusal(error: &bulkhead::tower::BoxError) -> &bulkhead::BulkheadFull {
    error.downcast_ref::<bulkhead::BulkheadFull>().expect("a BulkheadFull")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holds_the_key_and_the_total_while_the_inner_call_runs() {
    let tenants = keyed(1, Some(2), 8);
    let gate = Arc::new(tokio::sync::Notify::new());
    let client =
        KeyedBulkheadLayer::new(Arc::clone(&tenants), key_of).layer(gated(Arc::clone(&gate)));
    let running = tokio::spawn(client.clone().oneshot(("acme", 1)));
    wait_until("acme's call runs", || {
        tenants.key_metrics(&"acme").is_some_and(|m| m.in_flight_calls() == 1)
    });
    assert_eq!(tenants.total_metrics().unwrap().in_flight_calls(), 1);

    // acme is full: refused at its key, the total untouched.
    let err = client.clone().oneshot(("acme", 2)).await.unwrap_err();
    assert_eq!(refusal(&err).reason(), RejectReason::Full);
    assert_eq!(refusal(&err).bulkhead_name(), "api/acme");
    assert_eq!(tenants.total_metrics().unwrap().in_flight_calls(), 1);

    gate.notify_one();
    assert_eq!(running.await.unwrap().unwrap(), 1);
    assert_eq!(tenants.key_metrics(&"acme").unwrap().in_flight_calls(), 0);
    assert_eq!(tenants.total_metrics().unwrap().in_flight_calls(), 0);
}

#[tokio::test]
async fn a_total_refusal_gives_the_key_slot_back() {
    let tenants = keyed(1, Some(1), 8);
    let _busy = tenants.try_acquire(&"acme").unwrap(); // holds the whole total
    let client = KeyedBulkheadLayer::new(Arc::clone(&tenants), key_of)
        .layer(service_fn(|request: Request| async move { Ok::<_, Infallible>(request.1) }));
    let err = client.oneshot(("globex", 1)).await.unwrap_err();
    assert_eq!(refusal(&err).bulkhead_name(), "api", "the total refused");
    assert_eq!(tenants.key_metrics(&"globex").unwrap().in_flight_calls(), 0, "no slot held");
}

#[tokio::test]
async fn too_many_keys_is_refused_without_a_slot() {
    let tenants = keyed(1, None, 1);
    let _busy = tenants.try_acquire(&"acme").unwrap();
    let client = KeyedBulkheadLayer::new(Arc::clone(&tenants), key_of)
        .layer(service_fn(|request: Request| async move { Ok::<_, Infallible>(request.1) }));
    let err = client.oneshot(("globex", 1)).await.unwrap_err();
    assert_eq!(refusal(&err).reason(), RejectReason::TooManyKeys, "{err}");
    assert_eq!(refusal(&err).bulkhead_name(), "api/globex");
    assert_eq!(tenants.live_keys(), 1);
}

/// Dropped while queued at the key, while queued at the total, and while the inner call
/// runs: nothing stays held or queued.
#[tokio::test]
async fn dropping_the_response_future_releases_what_it_holds() {
    let tenants = Arc::new(
        KeyedBulkhead::<&'static str>::builder("api")
            .default_config(limit_wait(1, Duration::from_secs(60)))
            .total(limit_wait(1, Duration::from_secs(60)))
            .build()
            .unwrap(),
    );
    let gate = Arc::new(tokio::sync::Notify::new());
    let mut client =
        KeyedBulkheadLayer::new(Arc::clone(&tenants), key_of).layer(gated(Arc::clone(&gate)));

    // Queued at the key.
    let held = tenants.try_acquire(&"acme").unwrap();
    let mut queued = Box::pin(client.call(("acme", 1)));
    assert!(futures::poll!(queued.as_mut()).is_pending());
    assert_eq!(tenants.key_metrics(&"acme").unwrap().waiting_calls(), 1);
    drop(queued);
    assert_eq!(tenants.key_metrics(&"acme").unwrap().waiting_calls(), 0);

    // Queued at the total, holding globex's slot.
    let mut queued = Box::pin(client.call(("globex", 2)));
    assert!(futures::poll!(queued.as_mut()).is_pending());
    assert_eq!(tenants.key_metrics(&"globex").unwrap().in_flight_calls(), 1);
    assert_eq!(tenants.total_metrics().unwrap().waiting_calls(), 1);
    drop(queued);
    assert_eq!(tenants.key_metrics(&"globex").unwrap().in_flight_calls(), 0);
    assert_eq!(tenants.total_metrics().unwrap().waiting_calls(), 0);
    drop(held);

    // Running the inner call.
    let mut running = Box::pin(client.call(("acme", 3)));
    assert!(futures::poll!(running.as_mut()).is_pending());
    assert_eq!(tenants.total_metrics().unwrap().in_flight_calls(), 1);
    drop(running);
    assert_eq!(tenants.key_metrics(&"acme").unwrap().in_flight_calls(), 0);
    assert_eq!(tenants.total_metrics().unwrap().in_flight_calls(), 0);
}

/// `KeyedBulkheadLayer::classify`: the request's number is its cost in permits, taken at
/// its key and at the total; a cost above the key's limit is refused at once.
#[tokio::test(flavor = "current_thread")]
async fn classify_asks_the_key_and_the_total_for_the_requests_permits() {
    let tenants = keyed(3, Some(4), 8);
    let layer = KeyedBulkheadLayer::new(Arc::clone(&tenants), key_of)
        .classify(|request: &Request| bulkhead::Request::permits(request.1));
    let client =
        layer.layer(service_fn(|request: Request| async move { Ok::<_, Infallible>(request.1) }));
    let held = tenants.try_acquire_many(&"acme", 2).unwrap();
    // acme has 1 free: a request of cost 2 waits (no max wait: refused Full), of cost 1 runs.
    let err = client.clone().oneshot(("acme", 2)).await.unwrap_err();
    assert_eq!(refusal(&err).reason(), RejectReason::Full);
    assert_eq!(client.clone().oneshot(("acme", 1)).await.unwrap(), 1);
    // Above the key's limit of 3: refused at once, whatever is free.
    let err = client.clone().oneshot(("globex", 4)).await.unwrap_err();
    assert_eq!(refusal(&err).reason(), RejectReason::ExceedsLimit);
    // globex's 2 fit the total (2 of 4 held by acme).
    assert_eq!(client.oneshot(("globex", 2)).await.unwrap(), 2);
    drop(held);
    assert_eq!(tenants.total_metrics().unwrap().available_concurrent_calls(), 4);
}

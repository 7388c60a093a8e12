//! examples/guide_adapter.rs end to end over 127.0.0.1: a port guarded by
//! `#[bulkhead(name = "sber")]` behind a hyper service answers 503 with `Retry-After` when
//! the bulkhead is full, and the endpoint with `fallback = cached_rates` answers from the
//! cache instead. The simulated bank holds calls at a gate the test opens, so "in flight" is
//! under the test's control, not a race against a timer.
#![cfg(feature = "macros")]

#[allow(dead_code, missing_docs)]
#[path = "../examples/guide_adapter.rs"]
mod adapter;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use adapter::{Bank, SberPort};
use bulkhead::BulkheadRegistry;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::{Request, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::sync::Semaphore;

/// Generous hang guard for anything the test waits on.
const HANG_GUARD: Duration = Duration::from_secs(20);

struct Answer {
    status: StatusCode,
    retry_after: Option<String>,
    retry_after_ms: Option<String>,
    source: Option<String>,
    body: String,
}

async fn get(addr: SocketAddr, path: &str) -> Answer {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let request = Request::get(format!("http://{addr}{path}")).body(Empty::new()).unwrap();
    let response = client.request(request).await.expect("the service answers");
    let header = |name: &str| {
        response.headers().get(name).map(|v| v.to_str().expect("ASCII header").to_owned())
    };
    let (retry_after, source) = (header("retry-after"), header("x-source"));
    let retry_after_ms = header(adapter::RETRY_AFTER_MS);
    let status = response.status();
    let body = response.into_body().collect().await.expect("a body").to_bytes();
    let body = String::from_utf8_lossy(&body).into_owned();
    Answer { status, retry_after, retry_after_ms, source, body }
}

/// Waits (bounded by the hang guard) until `name` has `n` calls in flight.
async fn in_flight(name: &str, n: usize) {
    let bulkhead = BulkheadRegistry::global().bulkhead(name);
    tokio::time::timeout(HANG_GUARD, async {
        while bulkhead.metrics().in_flight_calls() != n {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("'{name}' never had {n} calls in flight"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guide_adapter_answers_503_with_retry_after_or_serves_the_fallback() {
    tokio::time::timeout(HANG_GUARD, scenario()).await.expect("the scenario hung");
}

async fn scenario() {
    adapter::configure(2, Duration::ZERO);
    let bank = Bank { delay: Duration::ZERO, gate: Semaphore::new(0) };
    let port = Arc::new(SberPort { bank });
    let addr = adapter::start(Arc::clone(&port)).await;

    // Two balance calls hold both permits of "sber" at the bank's closed gate.
    let held: Vec<_> = (0..2).map(|_| tokio::spawn(get(addr, "/balance/7"))).collect();
    in_flight("sber", 2).await;
    let refused = get(addr, "/balance/7").await;
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
    // No call has finished yet: no estimate, the fixed second.
    assert_eq!(refused.retry_after.as_deref(), Some(adapter::RETRY_AFTER_SECS));
    assert_eq!(refused.retry_after_ms, None);
    assert_eq!(refused.body, "system temporarily unavailable");

    // The rates endpoint names a fallback: full, it answers 200 from the cache.
    let held_rates: Vec<_> = (0..2).map(|_| tokio::spawn(get(addr, "/rates/EUR"))).collect();
    in_flight("sber-rates", 2).await;
    let cached = get(addr, "/rates/EUR").await;
    assert_eq!(cached.status, StatusCode::OK);
    assert_eq!(cached.source.as_deref(), Some("cache"));
    assert_eq!(cached.body, "EUR 90");
    assert_eq!(cached.retry_after, None);

    // Open the gate: the held calls complete normally, from the bank.
    port.bank.gate.add_permits(1_000);
    for answer in held {
        let answer = answer.await.unwrap();
        assert_eq!((answer.status, answer.body.as_str()), (StatusCode::OK, "700"));
    }
    for answer in held_rates {
        let answer = answer.await.unwrap();
        assert_eq!(answer.source.as_deref(), Some("bank"));
        assert_eq!(answer.body, "EUR 91.25");
    }
    in_flight("sber", 0).await;
    in_flight("sber-rates", 0).await;

    // With room again: served, and the port's own errors are not 503.
    assert_eq!(get(addr, "/balance/7").await.status, StatusCode::OK);
    let unknown = get(addr, "/balance/0").await;
    assert_eq!((unknown.status, unknown.body.as_str()), (StatusCode::NOT_FOUND, "no account 0"));
    assert_eq!(get(addr, "/rates/USD").await.source.as_deref(), Some("bank"));

    // Calls have finished now: a refusal carries the bulkhead's estimate, in whole seconds
    // rounded up (at least 1) and in milliseconds.
    port.bank.gate.forget_permits(1_000);
    let held: Vec<_> = (0..2).map(|_| tokio::spawn(get(addr, "/balance/7"))).collect();
    in_flight("sber", 2).await;
    let refused = get(addr, "/balance/7").await;
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
    let ms: u64 = refused.retry_after_ms.expect("an estimate").parse().expect("milliseconds");
    let secs: u64 = refused.retry_after.expect("Retry-After").parse().expect("whole seconds");
    assert!(ms >= 1);
    assert_eq!(secs, ms.div_ceil(1000).max(1), "{ms} ms");
    port.bank.gate.add_permits(1_000);
    for answer in held {
        assert_eq!(answer.await.unwrap().status, StatusCode::OK);
    }
    in_flight("sber", 0).await;
}

//! `BulkheadLayer` around hyper-util's pooled client, against a real hyper server on
//! 127.0.0.1 whose handler is slow: it holds each request until the test opens a gate, so
//! "in flight" is something the test controls instead of a race against a timer.
#![cfg(feature = "tower")]

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bulkhead::tower::{BoxError, BulkheadLayer};
use bulkhead::{Bulkhead, BulkheadConfig, BulkheadFull, RejectReason};
use bytes::Bytes;
use http_body_util::{Empty, Full};
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tower::{Service, ServiceBuilder, ServiceExt};

/// Generous hang guard for anything a test waits on.
const HANG_GUARD: Duration = Duration::from_secs(20);

/// The slow downstream: counts what reaches it, and holds every request at a gate.
struct Downstream {
    addr: SocketAddr,
    requests: AtomicUsize,
    in_flight: AtomicUsize,
    peak: AtomicUsize,
    gate: Semaphore,
    /// How long each request takes once through the gate.
    delay: Duration,
}

impl Downstream {
    /// Binds 127.0.0.1:0 and serves HTTP/1 until the test's runtime shuts down.
    async fn start() -> Arc<Downstream> {
        Self::start_slow(Duration::ZERO).await
    }

    /// As `start`, and each request also sleeps `delay` after the gate.
    async fn start_slow(delay: Duration) -> Arc<Downstream> {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let downstream = Arc::new(Downstream {
            addr: listener.local_addr().unwrap(),
            requests: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            gate: Semaphore::new(0),
            delay,
        });
        let server = Arc::clone(&downstream);
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                let server = Arc::clone(&server);
                tokio::spawn(async move {
                    let handler = hyper::service::service_fn(move |_request| {
                        let server = Arc::clone(&server);
                        async move { server.handle().await }
                    });
                    // A client that drops a request closes the connection: not an error here.
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), handler)
                        .await;
                });
            }
        });
        downstream
    }

    async fn handle(&self) -> Result<Response<Full<Bytes>>, Infallible> {
        self.requests.fetch_add(1, Ordering::SeqCst);
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        // Slow: wait for the test to let requests through (the permit goes straight back).
        let _pass = self.gate.acquire().await.unwrap();
        tokio::time::sleep(self.delay).await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        Ok(Response::new(Full::from("balance: 42")))
    }

    fn open_gate(&self) {
        self.gate.add_permits(Semaphore::MAX_PERMITS / 2);
    }

    fn url(&self) -> String {
        format!("http://{}/balance", self.addr)
    }
}

type HttpClient = Client<HttpConnector, Empty<Bytes>>;

fn http_client() -> HttpClient {
    Client::builder(TokioExecutor::new()).build_http()
}

fn get(url: &str) -> Request<Empty<Bytes>> {
    Request::get(url).body(Empty::new()).unwrap()
}

fn bulkhead(name: &str, max: usize, wait: Duration) -> Arc<Bulkhead> {
    let config = BulkheadConfig::builder()
        .max_concurrent_calls(max)
        .max_wait_duration(wait)
        .build()
        .unwrap();
    Arc::new(Bulkhead::new(name, config))
}

/// Polls `cond` until it holds (hang guard: `HANG_GUARD`).
async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let wait = async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    };
    tokio::time::timeout(HANG_GUARD, wait)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"));
}

async fn guarded<F: Future>(what: &str, fut: F) -> F::Output {
    tokio::time::timeout(HANG_GUARD, fut).await.unwrap_or_else(|_| panic!("hung: {what}"))
}

fn as_full(err: &BoxError) -> &BulkheadFull {
    err.downcast_ref::<BulkheadFull>()
        .unwrap_or_else(|| panic!("expected BulkheadFull, got {err:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_the_limit_requests_fail_fast_with_bulkhead_full() {
    const LIMIT: usize = 3;
    const EXTRA: usize = 4;
    let downstream = Downstream::start().await;
    let bank = bulkhead("tower-fail-fast", LIMIT, Duration::ZERO);
    let client =
        ServiceBuilder::new().layer(BulkheadLayer::new(Arc::clone(&bank))).service(http_client());

    let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel();
    for _ in 0..LIMIT + EXTRA {
        let client = client.clone();
        let request = get(&downstream.url());
        let done_tx = done_tx.clone();
        tokio::spawn(async move {
            let _ = done_tx.send(client.oneshot(request).await);
        });
    }

    // While the gate is closed nothing can finish at the server, so every request that
    // completes now was refused by the bulkhead without waiting for a slot to free.
    let mut refused = Vec::new();
    for _ in 0..EXTRA {
        let result = guarded("a refusal", done_rx.recv()).await.unwrap();
        refused.push(result.expect_err("the gate is closed: only refusals can complete"));
    }
    for err in &refused {
        let full = as_full(err);
        assert_eq!(full.reason(), RejectReason::Full);
        assert_eq!(full.bulkhead_name(), "tower-fail-fast");
        assert_eq!(full.max_concurrent_calls(), LIMIT);
    }
    eventually("the admitted requests to reach the server", || {
        downstream.in_flight.load(Ordering::SeqCst) == LIMIT
    })
    .await;
    assert_eq!(bank.metrics().in_flight_calls(), LIMIT);

    downstream.open_gate();
    for _ in 0..LIMIT {
        let response = guarded("an admitted response", done_rx.recv()).await.unwrap().unwrap();
        assert_eq!(response.status(), StatusCode::OK);
    }
    assert_eq!(downstream.requests.load(Ordering::SeqCst), LIMIT, "refused calls never left");
    assert_eq!(downstream.peak.load(Ordering::SeqCst), LIMIT);
    assert_eq!(bank.metrics().in_flight_calls(), 0);
    assert_eq!(bank.metrics().available_concurrent_calls(), LIMIT);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_flight_at_the_server_never_exceeds_the_limit() {
    const LIMIT: usize = 2;
    const REQUESTS: usize = 24;
    // Each request takes 10 ms at the server, so requests overlap unless something bounds them.
    let downstream = Downstream::start_slow(Duration::from_millis(10)).await;
    downstream.open_gate();
    // A long max wait: every request queues until a slot frees, none is refused.
    let bank = bulkhead("tower-never-exceeds", LIMIT, Duration::from_secs(60));
    let client =
        ServiceBuilder::new().layer(BulkheadLayer::new(Arc::clone(&bank))).service(http_client());

    let calls: Vec<_> = (0..REQUESTS)
        .map(|_| tokio::spawn(client.clone().oneshot(get(&downstream.url()))))
        .collect();
    for call in calls {
        let response = guarded("a queued request", call).await.unwrap().unwrap();
        assert_eq!(response.status(), StatusCode::OK);
    }
    assert_eq!(downstream.requests.load(Ordering::SeqCst), REQUESTS);
    let peak = downstream.peak.load(Ordering::SeqCst);
    assert!((1..=LIMIT).contains(&peak), "peak in flight at the server {peak} > {LIMIT}");
    assert_eq!(bank.metrics().in_flight_calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_flight_is_bounded_while_the_server_holds_requests() {
    // The same bound, observed at the moment the server holds as many as it will get.
    const LIMIT: usize = 2;
    let downstream = Downstream::start().await;
    let bank = bulkhead("tower-held", LIMIT, Duration::from_secs(60));
    let client =
        ServiceBuilder::new().layer(BulkheadLayer::new(Arc::clone(&bank))).service(http_client());
    let calls: Vec<_> =
        (0..6).map(|_| tokio::spawn(client.clone().oneshot(get(&downstream.url())))).collect();
    eventually("two requests at the server and four queued", || {
        downstream.in_flight.load(Ordering::SeqCst) == LIMIT && bank.metrics().waiting_calls() == 4
    })
    .await;
    assert_eq!(downstream.requests.load(Ordering::SeqCst), LIMIT);
    downstream.open_gate();
    for call in calls {
        assert_eq!(guarded("a response", call).await.unwrap().unwrap().status(), StatusCode::OK);
    }
    assert_eq!(downstream.peak.load(Ordering::SeqCst), LIMIT);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_ready_clones_hold_no_permit() {
    const LIMIT: usize = 2;
    let downstream = Downstream::start().await;
    downstream.open_gate();
    let bank = bulkhead("tower-idle-clones", LIMIT, Duration::ZERO);
    let client =
        ServiceBuilder::new().layer(BulkheadLayer::new(Arc::clone(&bank))).service(http_client());

    // Many clones, each driven to readiness and then left idle (as in a pool or a balancer).
    let mut clones: Vec<_> = (0..100).map(|_| client.clone()).collect();
    for clone in &mut clones {
        guarded("poll_ready", clone.ready()).await.unwrap();
        assert!(Arc::ptr_eq(clone.bulkhead(), &bank), "clones share the one bulkhead");
    }
    assert_eq!(bank.metrics().in_flight_calls(), 0);
    assert_eq!(bank.metrics().available_concurrent_calls(), LIMIT);

    // The limit is still there for real calls, through any of them.
    let response = guarded("a call", clones[42].call(get(&downstream.url()))).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(bank.metrics().in_flight_calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_response_future_releases_its_permit() {
    let downstream = Downstream::start().await;
    let bank = bulkhead("tower-drop", 1, Duration::ZERO);
    let mut client =
        ServiceBuilder::new().layer(BulkheadLayer::new(Arc::clone(&bank))).service(http_client());

    // Called but never polled: no permit was ever taken.
    guarded("poll_ready", client.ready()).await.unwrap();
    let unpolled = client.call(get(&downstream.url()));
    assert_eq!(bank.metrics().in_flight_calls(), 0);
    drop(unpolled);

    // In flight at the server, then cancelled (a caller's timeout, a client gone away).
    let task = tokio::spawn(client.clone().oneshot(get(&downstream.url())));
    eventually("the request to reach the server", || {
        downstream.in_flight.load(Ordering::SeqCst) == 1
    })
    .await;
    assert_eq!(bank.metrics().in_flight_calls(), 1);
    let err = client.clone().oneshot(get(&downstream.url())).await.unwrap_err();
    assert_eq!(as_full(&err).reason(), RejectReason::Full, "the one slot is taken");
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    assert_eq!(bank.metrics().in_flight_calls(), 0, "the dropped future released its permit");

    // The slot is usable again.
    downstream.open_gate();
    let response = guarded("a call after the drop", client.oneshot(get(&downstream.url()))).await;
    assert_eq!(response.unwrap().status(), StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_queued_response_future_leaves_the_queue() {
    let downstream = Downstream::start().await;
    let bank = bulkhead("tower-drop-queued", 1, Duration::from_secs(60));
    let client =
        ServiceBuilder::new().layer(BulkheadLayer::new(Arc::clone(&bank))).service(http_client());
    let held = bank.try_acquire_owned().unwrap();

    let queued = tokio::spawn(client.clone().oneshot(get(&downstream.url())));
    eventually("the request to queue", || bank.metrics().waiting_calls() == 1).await;
    queued.abort();
    assert!(queued.await.unwrap_err().is_cancelled());
    assert_eq!(bank.metrics().waiting_calls(), 0);
    drop(held);
    assert_eq!(bank.metrics().in_flight_calls(), 0);
    assert_eq!(bank.metrics().available_concurrent_calls(), 1);
    assert_eq!(downstream.requests.load(Ordering::SeqCst), 0, "the cancelled call never left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_request_times_out_after_the_max_wait() {
    const MAX_WAIT: Duration = Duration::from_millis(50);
    let downstream = Downstream::start().await;
    let bank = bulkhead("tower-timeout", 1, MAX_WAIT);
    let client =
        ServiceBuilder::new().layer(BulkheadLayer::new(Arc::clone(&bank))).service(http_client());

    let first = tokio::spawn(client.clone().oneshot(get(&downstream.url())));
    eventually("the first request at the server", || {
        downstream.in_flight.load(Ordering::SeqCst) == 1
    })
    .await;
    let err = guarded("the second request", client.clone().oneshot(get(&downstream.url())))
        .await
        .unwrap_err();
    let full = as_full(&err);
    assert_eq!(full.reason(), RejectReason::WaitTimedOut);
    assert!(full.waited() >= MAX_WAIT, "refused after {:?}, before the max wait", full.waited());
    assert_eq!(downstream.requests.load(Ordering::SeqCst), 1, "the refused call never left");

    downstream.open_gate();
    assert_eq!(
        guarded("the first response", first).await.unwrap().unwrap().status(),
        StatusCode::OK
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_request_proceeds_when_a_slot_frees_within_the_max_wait() {
    let downstream = Downstream::start().await;
    let bank = bulkhead("tower-handoff", 1, Duration::from_secs(60));
    let client =
        ServiceBuilder::new().layer(BulkheadLayer::new(Arc::clone(&bank))).service(http_client());

    let first = tokio::spawn(client.clone().oneshot(get(&downstream.url())));
    eventually("the first request at the server", || {
        downstream.in_flight.load(Ordering::SeqCst) == 1
    })
    .await;
    let second = tokio::spawn(client.clone().oneshot(get(&downstream.url())));
    eventually("the second request to queue", || bank.metrics().waiting_calls() == 1).await;
    assert_eq!(downstream.requests.load(Ordering::SeqCst), 1);

    downstream.open_gate();
    assert_eq!(guarded("first", first).await.unwrap().unwrap().status(), StatusCode::OK);
    assert_eq!(guarded("second", second).await.unwrap().unwrap().status(), StatusCode::OK);
    assert_eq!(downstream.peak.load(Ordering::SeqCst), 1);
    assert_eq!(bank.metrics().in_flight_calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inner_errors_pass_through_and_release_the_permit() {
    // A port nothing listens on: bind one, note it, close it.
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap();
    let bank = bulkhead("tower-inner-error", 1, Duration::ZERO);
    let client =
        ServiceBuilder::new().layer(BulkheadLayer::new(Arc::clone(&bank))).service(http_client());
    let err = guarded("a refused connection", client.oneshot(get(&format!("http://{closed}/"))))
        .await
        .unwrap_err();
    assert!(err.downcast_ref::<BulkheadFull>().is_none(), "not a bulkhead refusal: {err:?}");
    assert!(err.downcast_ref::<hyper_util::client::legacy::Error>().is_some(), "{err:?}");
    assert_eq!(bank.metrics().in_flight_calls(), 0);
}

/// A service that is not ready until told, and counts `poll_ready` calls.
#[derive(Clone)]
struct Gated {
    ready: Arc<AtomicBool>,
    polls: Arc<AtomicUsize>,
}

impl Service<u32> for Gated {
    type Response = u32;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<u32, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.polls.fetch_add(1, Ordering::SeqCst);
        if self.ready.load(Ordering::SeqCst) {
            Poll::Ready(Ok(()))
        } else {
            Poll::Pending
        }
    }

    fn call(&mut self, request: u32) -> Self::Future {
        Box::pin(async move { Ok(request + 1) })
    }
}

#[tokio::test]
async fn poll_ready_is_the_inner_services_and_takes_no_permit() {
    let bank = bulkhead("tower-poll-ready", 1, Duration::ZERO);
    let gated =
        Gated { ready: Arc::new(AtomicBool::new(false)), polls: Arc::new(AtomicUsize::new(0)) };
    let mut service = tower::Layer::layer(&BulkheadLayer::new(Arc::clone(&bank)), gated.clone());

    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    assert!(service.poll_ready(&mut cx).is_pending(), "not ready while the inner is not");
    assert_eq!(gated.polls.load(Ordering::SeqCst), 1);
    gated.ready.store(true, Ordering::SeqCst);
    assert!(matches!(service.poll_ready(&mut cx), Poll::Ready(Ok(()))));
    assert_eq!(bank.metrics().in_flight_calls(), 0, "readiness reserves nothing");

    // Readiness does not depend on the bulkhead: full, and still ready.
    let held = bank.try_acquire().unwrap();
    assert!(matches!(service.poll_ready(&mut cx), Poll::Ready(Ok(()))));
    let err = service.call(1).await.unwrap_err();
    assert_eq!(as_full(&err).reason(), RejectReason::Full);
    drop(held);
    assert!(matches!(service.poll_ready(&mut cx), Poll::Ready(Ok(()))));
    assert_eq!(service.call(1).await.unwrap(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clones_share_one_bulkhead() {
    let bank = bulkhead("tower-shared", 1, Duration::ZERO);
    // The request is the call's "slowness": the call lasts until its sender fires.
    let slow = tower::service_fn(|finish: tokio::sync::oneshot::Receiver<()>| async move {
        let _ = finish.await;
        Ok::<_, Infallible>("done")
    });
    let a = ServiceBuilder::new().layer(BulkheadLayer::new(Arc::clone(&bank))).service(slow);
    let b = a.clone();
    assert!(Arc::ptr_eq(a.bulkhead(), b.bulkhead()));
    assert!(Arc::ptr_eq(a.bulkhead(), &bank));

    // A call in flight through `a` fills the bulkhead for `b`.
    let (finish_a, finish_rx) = tokio::sync::oneshot::channel();
    let through_a = tokio::spawn(a.clone().oneshot(finish_rx));
    eventually("the call through a to hold the permit", || bank.metrics().in_flight_calls() == 1)
        .await;
    let (_finish_b, finish_rx) = tokio::sync::oneshot::channel();
    let err = b.clone().oneshot(finish_rx).await.unwrap_err();
    assert_eq!(as_full(&err).bulkhead_name(), "tower-shared");

    finish_a.send(()).unwrap();
    assert_eq!(guarded("the call through a", through_a).await.unwrap().unwrap(), "done");
    assert_eq!(bank.metrics().in_flight_calls(), 0);
    let (finish_b, finish_rx) = tokio::sync::oneshot::channel();
    finish_b.send(()).unwrap();
    assert_eq!(b.oneshot(finish_rx).await.unwrap(), "done");
}

#[cfg(feature = "metrics")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instrumented_layer_exports_gauges_and_wait_times() {
    let downstream = Downstream::start().await;
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let bank = bulkhead("tower-metrics", 1, Duration::from_millis(30));
    let instrumented =
        metrics::with_local_recorder(&recorder, || bulkhead::metrics_export::register(&bank));
    let client = ServiceBuilder::new()
        .layer(BulkheadLayer::instrumented(&instrumented))
        .service(http_client());

    // Idle ready clones: the exported gauges show nothing in flight.
    let mut clones: Vec<_> = (0..50).map(|_| client.clone()).collect();
    for clone in &mut clones {
        guarded("poll_ready", clone.ready()).await.unwrap();
    }
    instrumented.record();
    let text = recorder.handle().render();
    assert!(text.contains("bulkhead_in_flight_calls{name=\"tower-metrics\"} 0\n"), "{text}");
    assert!(
        text.contains(
            "resilience4j_bulkhead_available_concurrent_calls{name=\"tower-metrics\"} 1\n"
        ),
        "{text}"
    );

    // One call held at the server, one refused after waiting the max wait.
    let first = tokio::spawn(client.clone().oneshot(get(&downstream.url())));
    eventually("the first request at the server", || {
        downstream.in_flight.load(Ordering::SeqCst) == 1
    })
    .await;
    let err =
        guarded("the refusal", client.clone().oneshot(get(&downstream.url()))).await.unwrap_err();
    assert_eq!(as_full(&err).reason(), RejectReason::WaitTimedOut);
    instrumented.record();
    let text = recorder.handle().render();
    assert!(text.contains("bulkhead_in_flight_calls{name=\"tower-metrics\"} 1\n"), "{text}");
    downstream.open_gate();
    guarded("the first response", first).await.unwrap().unwrap();

    let text = recorder.handle().render();
    let line = |series: &str| text.lines().find(|l| l.starts_with(series)).map(str::to_owned);
    assert_eq!(
        line(r#"bulkhead_wait_duration_seconds_count{name="tower-metrics",outcome="permitted"}"#)
            .as_deref(),
        Some(r#"bulkhead_wait_duration_seconds_count{name="tower-metrics",outcome="permitted"} 1"#),
        "{text}"
    );
    assert_eq!(
        line(r#"bulkhead_wait_duration_seconds_count{name="tower-metrics",outcome="rejected"}"#)
            .as_deref(),
        Some(r#"bulkhead_wait_duration_seconds_count{name="tower-metrics",outcome="rejected"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(
            r#"bulkhead_calls_rejected_total{name="tower-metrics",reason="wait_timed_out"} 1"#
        ),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_refuses_queued_and_new_requests_and_lets_the_call_in_flight_finish() {
    let downstream = Downstream::start().await;
    let bank = bulkhead("tower-close", 1, Duration::from_secs(60));
    let client =
        ServiceBuilder::new().layer(BulkheadLayer::new(Arc::clone(&bank))).service(http_client());

    let first = tokio::spawn(client.clone().oneshot(get(&downstream.url())));
    eventually("the first request at the server", || {
        downstream.in_flight.load(Ordering::SeqCst) == 1
    })
    .await;
    let queued = tokio::spawn(client.clone().oneshot(get(&downstream.url())));
    eventually("the second request queued", || bank.metrics().waiting_calls() == 1).await;

    assert!(bank.close());
    let err = guarded("the queued request", queued).await.unwrap().unwrap_err();
    assert_eq!(as_full(&err).reason(), RejectReason::Closed);
    let err =
        guarded("a new request", client.clone().oneshot(get(&downstream.url()))).await.unwrap_err();
    assert_eq!(as_full(&err).reason(), RejectReason::Closed);

    downstream.open_gate();
    let status = guarded("the first response", first).await.unwrap().unwrap().status();
    assert_eq!(status, StatusCode::OK, "the call in flight finished normally");
    guarded("the drain", bank.drained()).await;
    assert_eq!(downstream.requests.load(Ordering::SeqCst), 1, "refused calls never left");
}

/// `BulkheadLayer::classify`: each request says what it needs. A batch query costs 2
/// permits and is sheddable, a user query 1 permit and critical: with the bulkhead full, a
/// queued user query is served before a batch query queued earlier, and a batch query is
/// refused at once when its cost is above the limit.
#[tokio::test(flavor = "current_thread")]
async fn classify_gives_each_request_its_permits_and_criticality() {
    use bulkhead::{Criticality, Request as Ask};
    #[derive(Clone, Copy, Debug)]
    struct Query {
        batch: bool,
        cost: u32,
    }
    let db = bulkhead("classified", 2, Duration::from_secs(10));
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = Arc::clone(&order);
    let inner = tower::service_fn(move |query: Query| {
        seen.lock().unwrap().push(query.batch);
        async move { Ok::<_, Infallible>(query.cost) }
    });
    let layer = BulkheadLayer::new(Arc::clone(&db)).classify(|query: &Query| {
        let class = if query.batch { Criticality::Sheddable } else { Criticality::Critical };
        Ask::permits(query.cost).criticality(class)
    });
    let service = ServiceBuilder::new().layer(layer).service(inner);

    let held = db.try_acquire_many(2).expect("free");
    let batch = tokio::spawn(service.clone().oneshot(Query { batch: true, cost: 2 }));
    let user = tokio::spawn(service.clone().oneshot(Query { batch: false, cost: 1 }));
    eventually("both queued", || db.metrics().waiting_calls() == 2).await;
    drop(held);
    assert_eq!(guarded("user", user).await.unwrap().unwrap(), 1);
    assert_eq!(guarded("batch", batch).await.unwrap().unwrap(), 2);
    assert_eq!(*order.lock().unwrap(), vec![false, true], "the critical query went first");

    let err = service.oneshot(Query { batch: true, cost: 3 }).await.unwrap_err();
    assert_eq!(as_full(&err).reason(), RejectReason::ExceedsLimit);
    assert_eq!(db.metrics().available_concurrent_calls(), 2);
}

/// Issue 31: a sheddable request the layer refuses for the headroom while slots are free
/// reaches the caller as `Reserved` (never calling the inner service), its message says so,
/// and `map_refusal` maps it to the same "temporarily unavailable" (503) as any refusal.
#[tokio::test(flavor = "current_thread")]
async fn a_sheddable_request_held_back_by_the_headroom_is_refused_as_reserved() {
    use bulkhead::tower::map_refusal;
    use bulkhead::{Criticality, Request as Ask};
    #[derive(Debug)]
    enum EdgeError {
        /// 503: the downstream is temporarily unavailable to us.
        Unavailable(BulkheadFull),
        /// 502: anything else.
        Upstream,
    }
    impl From<BulkheadFull> for EdgeError {
        fn from(full: BulkheadFull) -> Self {
            EdgeError::Unavailable(full)
        }
    }
    impl From<BoxError> for EdgeError {
        fn from(_: BoxError) -> Self {
            EdgeError::Upstream
        }
    }
    fn status(err: &EdgeError) -> StatusCode {
        match err {
            EdgeError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            EdgeError::Upstream => StatusCode::BAD_GATEWAY,
        }
    }

    let config = BulkheadConfig::builder().max_concurrent_calls(2).sheddable_headroom(1).build();
    let db = Arc::new(Bulkhead::new("prefetch", config.unwrap()));
    db.enable_counters();
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&calls);
    let inner = tower::service_fn(move |batch: bool| {
        seen.fetch_add(1, Ordering::SeqCst);
        async move { Ok::<_, BoxError>(batch) }
    });
    let layer = BulkheadLayer::new(Arc::clone(&db)).classify(|batch: &bool| {
        let class = if *batch { Criticality::Sheddable } else { Criticality::Default };
        Ask::permits(1).criticality(class)
    });
    let service = ServiceBuilder::new().layer(layer).service(inner);

    let _user = db.try_acquire().unwrap();
    // One slot free, kept from sheddable requests.
    let err = service.clone().oneshot(true).await.map_err(map_refusal::<EdgeError>).unwrap_err();
    assert_eq!(status(&err), StatusCode::SERVICE_UNAVAILABLE);
    let EdgeError::Unavailable(full) = err else { unreachable!() };
    assert_eq!((full.reason(), full.bulkhead_name()), (RejectReason::Reserved, "prefetch"));
    assert_eq!(
        full.to_string(),
        "Bulkhead 'prefetch' keeps its remaining free permits for calls that are not sheddable \
         (held back by the sheddable headroom; max concurrent calls 2)"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 0, "the inner service was not called");
    assert_eq!(db.metrics().calls_rejected(RejectReason::Reserved), 1);
    // A default request takes the kept slot.
    assert!(service.oneshot(false).await.map_err(map_refusal::<EdgeError>).is_ok());
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

//! The guide's adapter in Rust: an outbound port guarded by `#[bulkhead(name = "sber")]`,
//! and an HTTP service that maps a refusal to `503 Service Unavailable` with `Retry-After`
//! ("system temporarily unavailable"), or serves a fallback instead.
//!
//! The Java original:
//!
//! ```java
//! @Bulkhead(name = "sber")
//! public Balance balance(AccountId id) { return sberClient.balance(id); }
//! // BulkheadFullException, like CallNotPermittedException: 503 "system temporarily unavailable"
//! ```
//!
//! Here the port's error type has one variant for "temporarily unavailable"; the bulkhead's
//! refusal lands in it through `From<BulkheadFull>` (a circuit breaker's refusal would get the
//! same `From`), and the HTTP edge answers it with 503 and `Retry-After`: the bulkhead's own
//! estimate of when a slot frees (`BulkheadFull::retry_after`, whole seconds rounded up, and
//! the precise value in a `retry-after-ms` header) once it has seen calls finish, else a
//! fixed second. A second endpoint
//! names a fallback (`fallback = cached_rates`, like Resilience4j's `fallbackMethod`) and
//! answers 200 from the cache instead.
//!
//! The bank is simulated in-process and is slow (300 ms a call); `main` fires a burst of 8
//! concurrent requests at each endpoint of the service (real HTTP on 127.0.0.1), then one
//! more at the first (whose 503s now carry the estimate), and prints what each got. `tests/guide_adapter.rs` drives the same code end to end.
//!
//! Run it with `cargo run --example guide_adapter --features macros`. It takes about 1.5 s.

use std::convert::Infallible;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bulkhead::{bulkhead, BulkheadConfig, BulkheadFull, BulkheadRegistry};
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// The port's error: what the service needs to tell apart, nothing more.
#[derive(Debug, PartialEq)]
pub enum PortError {
    /// The bank is temporarily unavailable *to us*: our bulkhead refused (or a circuit
    /// breaker would). Nothing is broken: answer 503 with `Retry-After`, or a fallback. Carries
    /// the bulkhead's estimate of when a slot frees ([`BulkheadFull::retry_after`]), if any.
    TemporarilyUnavailable(Option<Duration>),
    /// The bank answered, and the answer is no.
    UnknownAccount(u32),
}

impl From<BulkheadFull> for PortError {
    fn from(refused: BulkheadFull) -> Self {
        PortError::TemporarilyUnavailable(refused.retry_after())
    }
}

impl fmt::Display for PortError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PortError::TemporarilyUnavailable(_) => f.write_str("system temporarily unavailable"),
            PortError::UnknownAccount(id) => write!(f, "no account {id}"),
        }
    }
}

/// Exchange rates, and where they came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Rates {
    /// The currency asked for.
    pub currency: String,
    /// Roubles per unit.
    pub rate: f64,
    /// `"bank"` or `"cache"` (the fallback).
    pub source: &'static str,
}

/// The simulated bank: every call takes `delay`, then passes a gate (a test closes the gate
/// to hold calls in flight for as long as it likes).
pub struct Bank {
    /// How long each call takes before the gate.
    pub delay: Duration,
    /// Each call passes here last; with no permits, calls wait in flight.
    pub gate: Semaphore,
}

impl Bank {
    async fn call(&self) {
        tokio::time::sleep(self.delay).await;
        let _pass = self.gate.acquire().await.expect("the gate is never closed");
    }
}

/// The outbound port. Each method runs under its bulkhead of the global registry.
pub struct SberPort {
    /// What the port calls.
    pub bank: Bank,
}

impl SberPort {
    /// `@Bulkhead(name = "sber")`: a refusal is `Err(PortError::TemporarilyUnavailable(_))`.
    #[bulkhead(name = "sber")]
    pub async fn balance(&self, account: u32) -> Result<u64, PortError> {
        self.bank.call().await;
        match account {
            0 => Err(PortError::UnknownAccount(0)),
            _ => Ok(u64::from(account) * 100),
        }
    }

    /// `@Bulkhead(name = "sber-rates", fallbackMethod = "cachedRates")`.
    #[bulkhead(name = "sber-rates", fallback = cached_rates)]
    pub async fn rates(&self, currency: String) -> Rates {
        self.bank.call().await;
        Rates { currency, rate: 91.25, source: "bank" }
    }

    /// The fallback: the same arguments, then the refusal.
    async fn cached_rates(&self, currency: String, _refused: BulkheadFull) -> Rates {
        Rates { currency, rate: 90.0, source: "cache" }
    }
}

/// Sizes the two bulkheads in the global registry before their first call (the first
/// creation wins): `limit` concurrent calls each, waiting at most `max_wait`. Their counters
/// are on, so they are observed: once calls have finished, a refusal carries an estimate of
/// when a slot frees, which the 503 passes on.
pub fn configure(limit: usize, max_wait: Duration) {
    let config = BulkheadConfig::builder()
        .max_concurrent_calls(limit)
        .max_wait_duration(max_wait)
        .build()
        .expect("a valid config");
    for name in ["sber", "sber-rates"] {
        BulkheadRegistry::global()
            .bulkhead_with(name, config.clone())
            .expect("a config without an adaptive limit cannot be refused")
            .enable_counters();
    }
}

/// Seconds a client should wait before retrying after a 503 when the bulkhead has no
/// estimate yet (no call has finished).
pub const RETRY_AFTER_SECS: &str = "1";

/// The header with the precise estimate, in milliseconds (rounded up, at least 1); sent
/// only with an estimate. `Retry-After` itself is whole seconds (HTTP's format): the
/// estimate rounded up, at least 1.
pub const RETRY_AFTER_MS: &str = "retry-after-ms";

/// `Retry-After` and `retry-after-ms` for an estimate: seconds rounded up (at least 1) and
/// milliseconds rounded up (at least 1).
pub fn retry_after_headers(estimate: Duration) -> (u64, u64) {
    let secs = estimate.as_secs() + u64::from(estimate.subsec_nanos() > 0);
    let millis = u64::try_from(estimate.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX);
    (secs.max(1), millis.max(1))
}

/// The HTTP edge: `GET /balance/<account>` (503 on refusal) and `GET /rates/<currency>`
/// (the fallback on refusal).
pub async fn handle(
    port: &SberPort,
    request: Request<hyper::body::Incoming>,
) -> Response<Full<Bytes>> {
    let path = request.uri().path();
    if let Some(account) = path.strip_prefix("/balance/") {
        let Ok(account) = account.parse() else {
            return text(StatusCode::BAD_REQUEST, format!("bad account '{account}'"));
        };
        return match port.balance(account).await {
            Ok(balance) => text(StatusCode::OK, balance.to_string()),
            Err(err @ PortError::TemporarilyUnavailable(estimate)) => {
                let mut response = text(StatusCode::SERVICE_UNAVAILABLE, err.to_string());
                let headers = response.headers_mut();
                match estimate.map(retry_after_headers) {
                    Some((secs, millis)) => {
                        headers.insert(hyper::header::RETRY_AFTER, secs.into());
                        headers.insert(RETRY_AFTER_MS, millis.into());
                    }
                    None => {
                        headers
                            .insert(hyper::header::RETRY_AFTER, RETRY_AFTER_SECS.parse().unwrap());
                    }
                }
                response
            }
            Err(err @ PortError::UnknownAccount(_)) => text(StatusCode::NOT_FOUND, err.to_string()),
        };
    }
    if let Some(currency) = path.strip_prefix("/rates/") {
        let rates = port.rates(currency.to_owned()).await;
        let mut response = text(StatusCode::OK, format!("{} {}", rates.currency, rates.rate));
        response.headers_mut().insert("x-source", rates.source.parse().unwrap());
        return response;
    }
    text(StatusCode::NOT_FOUND, "no such endpoint".into())
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::from(body));
    *response.status_mut() = status;
    response
}

/// Serves `port` over HTTP/1 on `listener` until the runtime ends.
pub async fn serve(listener: TcpListener, port: Arc<SberPort>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let port = Arc::clone(&port);
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let port = Arc::clone(&port);
                async move { Ok::<_, Infallible>(handle(&port, request).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Binds 127.0.0.1 on a free port and serves `port` there in a task.
pub async fn start(port: Arc<SberPort>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1");
    let addr = listener.local_addr().expect("local address");
    tokio::spawn(serve(listener, port));
    addr
}

#[allow(dead_code)] // tests/guide_adapter.rs includes this file and has its own main
#[tokio::main]
async fn main() {
    use http_body_util::{BodyExt, Empty};
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;

    // The guide's settings, small: 4 calls to the bank at once, wait at most 100 ms.
    configure(4, Duration::from_millis(100));
    let bank = Bank { delay: Duration::from_millis(300), gate: Semaphore::new(1_000) };
    let addr = start(Arc::new(SberPort { bank })).await;
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();

    // The second balance burst comes after calls finished: its 503s carry the estimate.
    for path in ["/balance/7", "/rates/EUR", "/balance/7"] {
        let started = Instant::now();
        let burst = (0..8).map(|_| {
            let client = client.clone();
            let url = format!("http://{addr}{path}");
            async move {
                let request = Request::get(url).body(Empty::new()).expect("a request");
                let response = client.request(request).await.expect("the service answers");
                let status = response.status();
                let header = |name: &str| {
                    let value = response.headers().get(name);
                    value.map_or("-".to_owned(), |v| v.to_str().unwrap_or("-").to_owned())
                };
                let (retry, ms) = (header("retry-after"), header(RETRY_AFTER_MS));
                let source = header("x-source");
                let body = response.into_body().collect().await.expect("a body").to_bytes();
                (
                    status,
                    format!("{retry:>2} ({ms:>3} ms)"),
                    source,
                    String::from_utf8_lossy(&body).into_owned(),
                )
            }
        });
        println!("8 concurrent GET {path}:");
        for (status, retry, source, body) in futures::future::join_all(burst).await {
            println!("  {status}  retry-after: {retry}  x-source: {source:>5}  {body}");
        }
        println!("  ({} ms)", started.elapsed().as_millis());
    }
}

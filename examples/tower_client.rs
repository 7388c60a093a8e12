//! An async service protected by the tower layer, with a fallback when the bulkhead is full.
//!
//! Three parts, all real HTTP on 127.0.0.1:
//!
//! - a downstream "rates" service that answers every request correctly, but slowly (1 s);
//! - our service, a hyper server with a `/quote` endpoint, which calls the downstream
//!   through hyper-util's pooled client wrapped in `BulkheadLayer` (4 concurrent calls, wait
//!   at most 100 ms, as the style guide says);
//! - a burst of 12 concurrent `/quote` requests from a client.
//!
//! Four quotes are fresh (about 1 s each). The other eight find the bulkhead full, wait
//! 100 ms, and are answered from the last good rate, marked stale, instead of piling up on
//! the slow downstream. A `/health` probe during the burst stays fast.
//!
//! Run it with `cargo run --example tower_client --features tower`. It takes about 3 s.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bulkhead::tower::{BoxError, BulkheadLayer, BulkheadService};
use bulkhead::{Bulkhead, BulkheadConfig, BulkheadFull};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tower::{ServiceBuilder, ServiceExt};

const DOWNSTREAM_DELAY: Duration = Duration::from_secs(1);
const BURST: usize = 12;

type HttpClient = Client<HttpConnector, Empty<Bytes>>;
type RatesClient = BulkheadService<HttpClient>;

/// Serves `handler` over HTTP/1 on 127.0.0.1 (a free port) until the program ends.
async fn serve<H, F>(handler: H) -> SocketAddr
where
    H: Fn(Request<hyper::body::Incoming>) -> F + Clone + Send + Sync + 'static,
    F: std::future::Future<Output = Result<Response<Full<Bytes>>, Infallible>> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1");
    let addr = listener.local_addr().expect("local address");
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            let handler = handler.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(handler);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    addr
}

/// The slow downstream: always right, never fast.
async fn rates(
    _request: Request<hyper::body::Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    tokio::time::sleep(DOWNSTREAM_DELAY).await;
    Ok(Response::new(Full::from("EUR/USD 1.0842")))
}

/// Our service's state: the guarded client and the last good answer (the fallback).
struct Quotes {
    rates: RatesClient,
    rates_url: String,
    last_good: Mutex<Option<String>>,
}

impl Quotes {
    async fn handle(
        &self,
        request: Request<hyper::body::Incoming>,
    ) -> Result<Response<Full<Bytes>>, Infallible> {
        if request.uri().path() == "/health" {
            return Ok(Response::new(Full::from("ok")));
        }
        let call = Request::get(&self.rates_url).body(Empty::new()).expect("valid request");
        let response = match self.rates.clone().oneshot(call).await {
            Ok(response) => fresh(response, &self.last_good).await,
            Err(err) => self.fallback(&err),
        };
        Ok(response)
    }

    /// The downstream is temporarily unavailable *to us*: answer from the last good rate,
    /// marked stale; with none yet, 503 (never 500: nothing is broken).
    fn fallback(&self, err: &BoxError) -> Response<Full<Bytes>> {
        let Some(full) = err.downcast_ref::<BulkheadFull>() else {
            return text(StatusCode::BAD_GATEWAY, format!("rates failed: {err}"), "error");
        };
        let source = format!("cache: {}", full.reason());
        match self.last_good.lock().unwrap().clone() {
            Some(rate) => text(StatusCode::OK, format!("{rate} (stale)"), &source),
            None => text(StatusCode::SERVICE_UNAVAILABLE, "rates unavailable".into(), &source),
        }
    }
}

async fn fresh(
    response: Response<hyper::body::Incoming>,
    last_good: &Mutex<Option<String>>,
) -> Response<Full<Bytes>> {
    let body = match response.into_body().collect().await {
        Ok(body) => String::from_utf8_lossy(&body.to_bytes()).into_owned(),
        Err(err) => return text(StatusCode::BAD_GATEWAY, format!("rates body: {err}"), "error"),
    };
    *last_good.lock().unwrap() = Some(body.clone());
    text(StatusCode::OK, body, "fresh")
}

/// A text response whose `x-source` header says where the answer came from.
fn text(status: StatusCode, body: String, source: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert("x-source", source.parse().expect("a header value"));
    response
}

/// A plain client of our service.
async fn get(client: &HttpClient, url: &str) -> (StatusCode, String, String, Duration) {
    let start = Instant::now();
    let request = Request::get(url).body(Empty::new()).expect("valid request");
    let response = client.request(request).await.expect("our service answers");
    let status = response.status();
    let source = response.headers().get("x-source").map_or("-", |v| v.to_str().unwrap_or("-"));
    let source = source.to_owned();
    let body = response.into_body().collect().await.expect("a body").to_bytes();
    (status, source, String::from_utf8_lossy(&body).into_owned(), start.elapsed())
}

#[tokio::main]
async fn main() {
    let started = Instant::now();
    let rates_addr = serve(rates).await;

    // The guide's settings: a small limit below the pool, a 100 ms max wait.
    let config = BulkheadConfig::builder()
        .max_concurrent_calls(4)
        .max_wait_duration(Duration::from_millis(100))
        .build()
        .expect("a valid config");
    let bulkhead = Arc::new(Bulkhead::new("rates", config));
    let http: HttpClient = Client::builder(TokioExecutor::new()).build_http();
    let quotes = Arc::new(Quotes {
        rates: ServiceBuilder::new().layer(BulkheadLayer::new(Arc::clone(&bulkhead))).service(http),
        rates_url: format!("http://{rates_addr}/rate"),
        last_good: Mutex::new(None),
    });
    let service_addr = serve(move |request| {
        let quotes = Arc::clone(&quotes);
        async move { quotes.handle(request).await }
    })
    .await;
    println!("downstream rates on {rates_addr} (answers in {DOWNSTREAM_DELAY:?}), our service on {service_addr}");

    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
    let quote_url = format!("http://{service_addr}/quote");

    // One quote to warm the cache the fallback serves from.
    let (status, source, body, took) = get(&client, &quote_url).await;
    println!("warm-up  {status} {source:<21} {took:>8.0?}  {body}");

    println!("\nburst of {BURST} concurrent /quote requests, bulkhead: 4 calls, 100 ms max wait");
    let burst: Vec<_> = (0..BURST)
        .map(|_| {
            let client = client.clone();
            let url = quote_url.clone();
            tokio::spawn(async move { get(&client, &url).await })
        })
        .collect();
    // Meanwhile the service itself stays responsive.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (_, _, _, health) = get(&client, &format!("http://{service_addr}/health")).await;
    let in_flight = bulkhead.metrics().in_flight_calls();

    let (mut fresh, mut stale) = (0, 0);
    for (i, call) in burst.into_iter().enumerate() {
        let (status, source, body, took) = call.await.expect("request task");
        if source == "fresh" {
            fresh += 1;
        } else {
            stale += 1;
        }
        println!("#{i:<2}     {status} {source:<21} {took:>8.0?}  {body}");
    }
    println!(
        "\n{fresh} fresh from the downstream, {stale} answered from cache after the bulkhead \
         refused them; /health during the burst: {health:.1?}; calls in flight then: {in_flight} \
         (limit 4)"
    );
    println!("done in {:.1?}", started.elapsed());
}

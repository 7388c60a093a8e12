//! "Our service", built the way a Java servlet container is: one acceptor thread hands
//! connections through a bounded queue to a FIXED pool of worker threads. `/health` answers
//! at once; `/pay` calls the slow downstream through a real HTTP client (ureq) whose
//! connection pool holds 20 connections. When all 20 are out, a caller WAITS for one up to
//! the pool's acquire timeout, as HikariCP or Apache HttpClient make it wait: that wait is
//! what pins the workers (R-RES-BH-1). Optionally the downstream call runs inside a bulkhead
//! (static or adaptive), and a full bulkhead becomes an immediate `503`.

use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use bulkhead::Bulkhead;
use bulkhead::Outcome;

use crate::http;

/// How the service is built.
pub struct ServiceConfig {
    /// Worker threads (Tomcat's `maxThreads`).
    pub workers: usize,
    /// Accepted connections that may wait for a worker (Tomcat's `acceptCount`); more wait
    /// in the kernel's listen backlog.
    pub accept_queue: usize,
    /// Connections the HTTP client may have open to the downstream.
    pub pool_size: usize,
    /// How long a caller waits for a pooled connection before it fails with 500.
    pub pool_acquire_timeout: Duration,
    /// Bounds each downstream call (connect + request + response).
    pub downstream_timeout: Duration,
    /// Socket read/write timeout for the service's own clients.
    pub socket_timeout: Duration,
    /// The downstream's address.
    pub downstream: SocketAddr,
    /// `None`: the downstream call is made directly. `Some`: it runs inside the bulkhead's
    /// `call_classified` (a non-200 answer is a failure, for an adaptive limit to learn).
    pub bulkhead: Option<Arc<Bulkhead>>,
}

/// The HTTP client's connection limit: ureq caps *idle* connections only, so the cap on
/// connections in use is this counting guard, which makes callers wait like a real pool.
struct ConnectionPool {
    max: usize,
    acquire_timeout: Duration,
    state: Mutex<PoolState>,
    freed: Condvar,
}

#[derive(Default)]
struct PoolState {
    in_use: usize,
    waiting: usize,
    peak_waiting: usize,
}

struct PoolLease<'a>(&'a ConnectionPool);

impl ConnectionPool {
    fn lock(&self) -> std::sync::MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A connection, or `None` after `acquire_timeout` without one.
    fn acquire(&self) -> Option<PoolLease<'_>> {
        let deadline = Instant::now() + self.acquire_timeout;
        let mut state = self.lock();
        while state.in_use >= self.max {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            state.waiting += 1;
            state.peak_waiting = state.peak_waiting.max(state.waiting);
            state = self.freed.wait_timeout(state, left).unwrap_or_else(PoisonError::into_inner).0;
            state.waiting -= 1;
        }
        state.in_use += 1;
        Some(PoolLease(self))
    }
}

impl Drop for PoolLease<'_> {
    fn drop(&mut self) {
        self.0.lock().in_use -= 1;
        self.0.freed.notify_one();
    }
}

struct Shared {
    bulkhead: Option<Arc<Bulkhead>>,
    agent: ureq::Agent,
    pool: ConnectionPool,
    url: String,
    socket_timeout: Duration,
    /// Workers handling a connection right now, and the most at once.
    busy: AtomicUsize,
    peak_busy: AtomicUsize,
    /// Connections accepted but not yet picked up by a worker.
    queued: AtomicUsize,
    /// Server-side time from entering `Bulkhead::call` to its `BulkheadFull`.
    rejections: Mutex<Vec<Duration>>,
}

/// A running service on 127.0.0.1 (ephemeral port).
pub struct Service {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
    workers: Vec<JoinHandle<()>>,
}

impl Service {
    pub fn start(config: ServiceConfig) -> io::Result<Service> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .max_idle_connections(config.pool_size)
            .max_idle_connections_per_host(config.pool_size)
            .timeout_connect(Some(Duration::from_secs(1)))
            .timeout_global(Some(config.downstream_timeout))
            .http_status_as_error(false)
            .build()
            .into();
        let shared = Arc::new(Shared {
            bulkhead: config.bulkhead,
            agent,
            pool: ConnectionPool {
                max: config.pool_size,
                acquire_timeout: config.pool_acquire_timeout,
                state: Mutex::default(),
                freed: Condvar::new(),
            },
            url: format!("http://{}/slow/charge", config.downstream),
            socket_timeout: config.socket_timeout,
            busy: AtomicUsize::new(0),
            peak_busy: AtomicUsize::new(0),
            queued: AtomicUsize::new(0),
            rejections: Mutex::default(),
        });
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::sync_channel::<TcpStream>(config.accept_queue);
        let rx = Arc::new(Mutex::new(rx));
        let mut workers = Vec::with_capacity(config.workers);
        for i in 0..config.workers {
            let (rx, shared) = (rx.clone(), shared.clone());
            workers.push(
                thread::Builder::new()
                    .name(format!("worker-{i}"))
                    .spawn(move || worker(&rx, &shared))?,
            );
        }
        let acceptor = {
            let (stop, shared) = (stop.clone(), shared.clone());
            thread::Builder::new()
                .name("service-accept".into())
                .spawn(move || accept_loop(&listener, &tx, &stop, &shared))?
        };
        Ok(Service { addr, shared, stop, acceptor: Some(acceptor), workers })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Workers handling a request right now.
    pub fn busy_workers(&self) -> usize {
        self.shared.busy.load(Ordering::Relaxed)
    }

    /// True when no worker is busy and no accepted connection waits for one.
    pub fn is_idle(&self) -> bool {
        self.busy_workers() == 0 && self.shared.queued.load(Ordering::Relaxed) == 0
    }

    pub fn peak_busy_workers(&self) -> usize {
        self.shared.peak_busy.load(Ordering::Relaxed)
    }

    /// The most workers that waited at once for a pooled connection.
    pub fn peak_pool_waiters(&self) -> usize {
        self.shared.pool.lock().peak_waiting
    }

    /// Starts the peaks and the rejection log afresh, for a run whose first burst is not
    /// measured.
    pub fn reset_counters(&self) {
        let s = &self.shared;
        // Relaxed: statistics read after the run; the caller resets while the service is idle.
        s.peak_busy.store(s.busy.load(Ordering::Relaxed), Ordering::Relaxed);
        let mut pool = s.pool.lock();
        pool.peak_waiting = pool.waiting;
        drop(pool);
        s.rejections.lock().unwrap_or_else(PoisonError::into_inner).clear();
    }

    /// Server-side decision times of every `BulkheadFull`.
    pub fn rejection_times(&self) -> Vec<Duration> {
        self.shared.rejections.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Stops accepting, lets the workers finish what they hold, and joins every thread
    /// (each is bounded by the socket, pool and downstream timeouts).
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Release);
        if let Ok(wake) = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1)) {
            let _ = wake.shutdown(Shutdown::Both);
            if let Some(acceptor) = self.acceptor.take() {
                let _ = acceptor.join(); // drops the sender: workers see the queue close
                for worker in self.workers.drain(..) {
                    let _ = worker.join();
                }
            }
        }
    }
}

fn accept_loop(
    listener: &TcpListener,
    tx: &SyncSender<TcpStream>,
    stop: &AtomicBool,
    shared: &Shared,
) {
    for conn in listener.incoming() {
        if stop.load(Ordering::Acquire) {
            return;
        }
        let Ok(conn) = conn else { continue };
        shared.queued.fetch_add(1, Ordering::Relaxed);
        // Blocks while the queue is full: further clients wait in the listen backlog.
        if tx.send(conn).is_err() {
            return;
        }
    }
}

fn worker(rx: &Mutex<Receiver<TcpStream>>, shared: &Shared) {
    loop {
        let conn = rx.lock().unwrap_or_else(PoisonError::into_inner).recv();
        let Ok(conn) = conn else { return };
        shared.queued.fetch_sub(1, Ordering::Relaxed);
        let now = shared.busy.fetch_add(1, Ordering::Relaxed) + 1;
        shared.peak_busy.fetch_max(now, Ordering::Relaxed);
        handle(conn, shared);
        shared.busy.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One request per connection (`Connection: close`), as the load generator sends them.
fn handle(mut conn: TcpStream, shared: &Shared) {
    if conn.set_read_timeout(Some(shared.socket_timeout)).is_err()
        || conn.set_write_timeout(Some(shared.socket_timeout)).is_err()
    {
        return;
    }
    let _ = conn.set_nodelay(true);
    let Ok(Some(request)) = http::read_request(&mut conn, &mut Vec::new()) else { return };
    let (status, body) = match request.path.as_str() {
        "/health" => (200, "UP"),
        "/pay" => pay(shared),
        _ => (404, "no such endpoint"),
    };
    // The client may have given up long ago (its timeout); a servlet container writes anyway.
    let _ = http::write_response(&mut conn, status, body, false);
}

fn pay(shared: &Shared) -> (u16, &'static str) {
    let Some(bulkhead) = &shared.bulkhead else { return call_downstream(shared) };
    let entered = Instant::now();
    let answer = bulkhead.call_classified(
        || call_downstream(shared),
        |&(status, _)| if status == 200 { Outcome::Success } else { Outcome::Failure },
    );
    match answer {
        Ok(answer) => answer,
        Err(_full) => {
            let decided = entered.elapsed();
            shared.rejections.lock().unwrap_or_else(PoisonError::into_inner).push(decided);
            (503, "payment provider busy, try again later")
        }
    }
}

/// The outbound call: take a pooled connection (or wait for one), then GET the downstream.
fn call_downstream(shared: &Shared) -> (u16, &'static str) {
    let Some(_connection) = shared.pool.acquire() else {
        return (500, "timed out waiting for a connection from the pool");
    };
    // `response` drops before `_connection`, so ureq has the connection back in its idle
    // pool before the next caller is let through.
    match shared.agent.get(&shared.url).call() {
        Ok(mut response) if response.status() == 200 => {
            match response.body_mut().read_to_string() {
                Ok(_) => (200, "paid"),
                Err(_) => (502, "downstream body failed"),
            }
        }
        Ok(_) => (502, "downstream answered an error"),
        Err(_) => (502, "downstream call failed"),
    }
}

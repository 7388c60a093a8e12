//! The slow downstream (think: a bank's payment API on a bad day). It answers every request
//! with 200 after a fixed delay and never fails. HTTP/1.1 keep-alive, one thread per
//! connection, so the service's client pool really reuses its connections.

use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crate::http;

/// An idle keep-alive connection is closed after this long.
const IDLE_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Default)]
struct Counters {
    in_flight: AtomicUsize,
    peak_in_flight: AtomicUsize,
    served: AtomicUsize,
}

/// A running downstream server on 127.0.0.1 (ephemeral port).
pub struct Downstream {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
    acceptor: Option<JoinHandle<()>>,
}

impl Downstream {
    /// Starts the server; every request is answered `latency` after it arrives.
    pub fn start(latency: Duration) -> io::Result<Downstream> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(Counters::default());
        let acceptor = {
            let (stop, counters) = (stop.clone(), counters.clone());
            thread::Builder::new().name("downstream-accept".into()).spawn(move || {
                for conn in listener.incoming() {
                    if stop.load(Ordering::Acquire) {
                        break;
                    }
                    let Ok(conn) = conn else { continue };
                    let counters = counters.clone();
                    let spawned = thread::Builder::new()
                        .name("downstream-conn".into())
                        .stack_size(128 * 1024)
                        .spawn(move || serve(conn, latency, &counters));
                    if spawned.is_err() {
                        break;
                    }
                }
            })?
        };
        Ok(Downstream { addr, stop, counters, acceptor: Some(acceptor) })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The most requests it was answering at once.
    pub fn peak_in_flight(&self) -> usize {
        self.counters.peak_in_flight.load(Ordering::Relaxed)
    }

    /// Starts counting afresh (peak and answered), for a run whose first burst is not
    /// measured.
    pub fn reset_counters(&self) {
        let c = &self.counters;
        // Relaxed: statistics read after the run; the caller resets while nothing is in flight.
        c.peak_in_flight.store(c.in_flight.load(Ordering::Relaxed), Ordering::Relaxed);
        c.served.store(0, Ordering::Relaxed); // Relaxed: as above
    }

    /// Requests answered so far.
    pub fn served(&self) -> usize {
        self.counters.served.load(Ordering::Relaxed)
    }

    /// Stops accepting. Open connections end on their own (client close or idle timeout).
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Release);
        // Wake the blocking accept with one throwaway connection.
        if let Ok(wake) = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1)) {
            let _ = wake.shutdown(Shutdown::Both);
            if let Some(acceptor) = self.acceptor.take() {
                let _ = acceptor.join();
            }
        }
    }
}

fn serve(mut conn: TcpStream, latency: Duration, counters: &Counters) {
    if conn.set_read_timeout(Some(IDLE_TIMEOUT)).is_err()
        || conn.set_write_timeout(Some(IDLE_TIMEOUT)).is_err()
    {
        return;
    }
    let _ = conn.set_nodelay(true);
    let mut buf = Vec::new();
    while let Ok(Some(request)) = http::read_request(&mut conn, &mut buf) {
        let now = counters.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        counters.peak_in_flight.fetch_max(now, Ordering::Relaxed);
        thread::sleep(latency); // slow, but never wrong
        counters.in_flight.fetch_sub(1, Ordering::Relaxed);
        counters.served.fetch_add(1, Ordering::Relaxed);
        let body = format!("paid {}", request.path);
        if http::write_response(&mut conn, 200, &body, request.keep_alive).is_err()
            || !request.keep_alive
        {
            break;
        }
    }
}

//! The load generator: a bounded burst of concurrent `/pay` requests, released together,
//! plus an open-loop `/health` prober (a new probe every tick, whether or not the previous
//! ones came back, so a stalled server shows as stalled probes rather than as fewer probes).

use std::net::SocketAddr;
use std::sync::{Arc, Barrier, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::http::{self, ClientError};

/// Client threads need little stack; hundreds of them may be alive in the slow run.
const CLIENT_STACK: usize = 128 * 1024;

/// What one request saw: when it was sent (seconds from the burst start; negative before it),
/// how long it took, and how it ended.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    pub sent: f64,
    pub latency: Duration,
    pub outcome: Result<u16, ClientError>,
}

fn offset(at: Instant, origin: Instant) -> f64 {
    if at >= origin {
        (at - origin).as_secs_f64()
    } else {
        -(origin - at).as_secs_f64()
    }
}

fn timed_get(addr: SocketAddr, path: &str, timeout: Duration, origin: Instant) -> Sample {
    let start = Instant::now();
    let outcome = http::get(addr, path, timeout);
    Sample { sent: offset(start, origin), latency: start.elapsed(), outcome }
}

/// Fires `/health` every `interval` from a dedicated thread until stopped.
pub struct Prober {
    stop: Arc<Mutex<bool>>,
    ticker: JoinHandle<Vec<JoinHandle<Sample>>>,
}

impl Prober {
    pub fn start(addr: SocketAddr, interval: Duration, timeout: Duration, origin: Instant) -> Self {
        let stop = Arc::new(Mutex::new(false));
        let ticker = {
            let stop = stop.clone();
            thread::spawn(move || {
                let first = Instant::now();
                let mut probes = Vec::new();
                for tick in 1u32.. {
                    if *stop.lock().unwrap_or_else(PoisonError::into_inner) {
                        break;
                    }
                    let probe = thread::Builder::new()
                        .stack_size(CLIENT_STACK)
                        .spawn(move || timed_get(addr, "/health", timeout, origin));
                    match probe {
                        Ok(probe) => probes.push(probe),
                        Err(_) => break, // out of threads: stop probing rather than hang
                    }
                    let next = first + interval * tick;
                    thread::sleep(next.saturating_duration_since(Instant::now()));
                }
                probes
            })
        };
        Prober { stop, ticker }
    }

    /// Stops sending and waits for the probes in flight (each is bounded by its timeout).
    pub fn finish(self) -> Vec<Sample> {
        *self.stop.lock().unwrap_or_else(PoisonError::into_inner) = true;
        let probes = self.ticker.join().unwrap_or_default();
        probes.into_iter().filter_map(|p| p.join().ok()).collect()
    }
}

/// Sends `count` `/pay` requests at once at `origin` and returns when all have an outcome.
pub fn burst(addr: SocketAddr, count: usize, timeout: Duration, origin: Instant) -> Vec<Sample> {
    let gate = Arc::new(Barrier::new(count + 1));
    let clients: Vec<_> = (0..count)
        .filter_map(|_| {
            let gate = gate.clone();
            thread::Builder::new()
                .stack_size(CLIENT_STACK)
                .spawn(move || {
                    gate.wait();
                    timed_get(addr, "/pay", timeout, origin)
                })
                .ok()
        })
        .collect();
    assert_eq!(clients.len(), count, "could not start the burst's client threads");
    thread::sleep(origin.saturating_duration_since(Instant::now()));
    gate.wait();
    clients.into_iter().filter_map(|c| c.join().ok()).collect()
}

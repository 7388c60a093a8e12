//! A pooled, blocking client with a fallback.

use std::time::Duration;

use bulkhead::{Bulkhead, BulkheadConfig, BulkheadFull};

use crate::sync::{lock, AtomicUsize, Mutex, Ordering};

/// One connection of the pool (a stand-in: it answers at once).
#[derive(Debug)]
pub struct Connection {
    id: usize,
}

impl Connection {
    fn request(&self, key: &str) -> String {
        format!("{key} via connection {}", self.id)
    }
}

/// What a caller gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// The downstream answered.
    Fresh(String),
    /// The bulkhead refused (or the pool had no connection): the fallback answer.
    Fallback,
}

/// A client whose bulkhead admits at most as many calls as the pool has connections, so an
/// admitted call always finds an idle connection.
#[derive(Debug)]
pub struct PooledClient {
    bulkhead: Bulkhead,
    idle: Mutex<Vec<Connection>>,
    /// Callers waiting for a permit right now: a gauge for the dashboard, and the load
    /// shedder's input (with `shed_at` or more waiting, callers get the fallback at once).
    waiting: AtomicUsize,
    shed_at: usize,
}

impl PooledClient {
    /// A pool of `connections`, a bulkhead of as many calls, waiting up to `max_wait`.
    pub fn new(connections: usize, max_wait: Duration, shed_at: usize) -> PooledClient {
        let config = BulkheadConfig::builder()
            .max_concurrent_calls(connections)
            .max_wait_duration(max_wait)
            .build()
            .expect("valid bulkhead config");
        PooledClient {
            bulkhead: Bulkhead::new("pooled-client", config),
            idle: Mutex::new((0..connections).map(|id| Connection { id }).collect()),
            waiting: AtomicUsize::new(0),
            shed_at,
        }
    }

    /// Asks the downstream for `key`; the fallback when the bulkhead refuses.
    pub fn get(&self, key: &str) -> Reply {
        // Ordering: Relaxed — a gauge; it publishes nothing.
        if self.waiting.load(Ordering::Relaxed) >= self.shed_at {
            return Reply::Fallback;
        }
        match self.call(key) {
            Ok(reply) => reply,
            Err(_full) => Reply::Fallback,
        }
    }

    fn call(&self, key: &str) -> Result<Reply, BulkheadFull> {
        // Ordering: Relaxed — a gauge; it publishes nothing.
        self.waiting.fetch_add(1, Ordering::Relaxed);
        #[cfg(not(feature = "bug-gauge-leaks-on-timeout"))]
        let permit = {
            let permit = self.bulkhead.acquire();
            // Ordering: Relaxed — a gauge.
            self.waiting.fetch_sub(1, Ordering::Relaxed);
            permit?
        };
        // SEEDED BUG: `?` returns before the gauge is decremented, so every timed-out caller
        // leaves the gauge one higher, and the shedder ends up refusing everybody.
        #[cfg(feature = "bug-gauge-leaks-on-timeout")]
        let permit = {
            let permit = self.bulkhead.acquire()?;
            // Ordering: Relaxed — a gauge.
            self.waiting.fetch_sub(1, Ordering::Relaxed);
            permit
        };
        let Some(connection) = lock(&self.idle).pop() else {
            // Cannot happen while every permit holder returns its connection first.
            return Ok(Reply::Fallback);
        };
        let answer = connection.request(key);
        #[cfg(not(feature = "bug-release-before-checkin"))]
        {
            lock(&self.idle).push(connection);
            drop(permit);
        }
        // SEEDED BUG: the permit is released before the connection is back in the pool, so
        // the next admitted caller can find the pool empty and fall back for no reason.
        #[cfg(feature = "bug-release-before-checkin")]
        {
            drop(permit);
            lock(&self.idle).push(connection);
        }
        Ok(Reply::Fresh(answer))
    }

    /// Graceful shutdown: refuses new calls at once (the bulkhead's `close`), waits up to
    /// `grace` for the calls in flight to finish, then takes every connection out of the
    /// pool to close it. Returns the connections closed; fewer than the pool had means a
    /// call was still running when `grace` ran out.
    pub fn shutdown(&self, grace: Duration) -> usize {
        self.bulkhead.close();
        #[cfg(not(feature = "bug-shutdown-without-drain"))]
        let _drained = self.bulkhead.wait_drained(grace);
        // SEEDED BUG: the pool is emptied right after `close`, without waiting for the calls
        // in flight: a call admitted before the close still holds its connection, which is
        // then never closed (it comes back to a pool nobody reads any more).
        #[cfg(feature = "bug-shutdown-without-drain")]
        let _drained = grace.is_zero();
        let connections = std::mem::take(&mut *lock(&self.idle));
        connections.len()
    }

    /// Callers waiting for a permit now.
    pub fn waiting(&self) -> usize {
        // Ordering: Relaxed — a gauge.
        self.waiting.load(Ordering::Relaxed)
    }

    /// Idle connections in the pool now.
    pub fn idle_connections(&self) -> usize {
        lock(&self.idle).len()
    }

    /// The bulkhead, for its metrics.
    pub fn bulkhead(&self) -> &Bulkhead {
        &self.bulkhead
    }
}

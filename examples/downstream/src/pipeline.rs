//! A two-stage pipeline: the producer admits each item with an owned permit and sends it,
//! permit and all, to the workers; the permit is released when a worker is done with it.
//! So at most `limit` items are between admission and the end of their downstream call.

use std::sync::Arc;
use std::time::Duration;

use bulkhead::{Bulkhead, BulkheadConfig, BulkheadFull, OwnedPermit};

use crate::sync::{lock, mpsc, AtomicUsize, Mutex, Ordering};

/// One admitted item: the permit travels with it.
#[derive(Debug)]
pub struct Job {
    pub item: u32,
    pub permit: OwnedPermit,
}

/// The producer side.
#[derive(Debug)]
pub struct Pipeline {
    bulkhead: Arc<Bulkhead>,
    jobs: mpsc::Sender<Job>,
}

/// The worker side: any number of workers share it.
#[derive(Debug)]
pub struct Workers {
    jobs: Mutex<mpsc::Receiver<Job>>,
}

impl Pipeline {
    /// A pipeline admitting `limit` items at a time; `submit` waits up to `max_wait`.
    pub fn new(limit: usize, max_wait: Duration) -> (Pipeline, Workers) {
        let config = BulkheadConfig::builder()
            .max_concurrent_calls(limit)
            .max_wait_duration(max_wait)
            .build()
            .expect("valid bulkhead config");
        let (jobs, receiver) = mpsc::channel();
        let bulkhead = Arc::new(Bulkhead::new("pipeline", config));
        (Pipeline { bulkhead, jobs }, Workers { jobs: Mutex::new(receiver) })
    }

    /// Admits `item` (waiting for room) and hands it to the workers.
    pub fn submit(&self, item: u32) -> Result<(), BulkheadFull> {
        let permit = self.bulkhead.acquire_owned()?;
        self.jobs.send(Job { item, permit }).expect("workers alive");
        Ok(())
    }

    /// The bulkhead, for its metrics.
    pub fn bulkhead(&self) -> &Bulkhead {
        &self.bulkhead
    }
}

impl Workers {
    /// Takes one job and calls `downstream` with it; `false` once the producer is gone.
    pub fn work_one(&self, downstream: &Downstream) -> bool {
        #[cfg(not(feature = "bug-permit-dropped-on-receive"))]
        let Ok(Job { item, permit: _permit }) = lock(&self.jobs).recv() else {
            return false;
        };
        // SEEDED BUG: `..` leaves the permit unbound, so it is dropped with the received job
        // (a temporary) at the end of this statement, before the downstream call: the
        // producer admits the next item while this one is still running.
        #[cfg(feature = "bug-permit-dropped-on-receive")]
        let Ok(Job { item, .. }) = lock(&self.jobs).recv() else {
            return false;
        };
        downstream.call(item);
        true
    }
}

/// The system the pipeline protects; it records how many calls it ever had at once.
#[derive(Debug, Default)]
pub struct Downstream {
    in_flight: AtomicUsize,
    peak: AtomicUsize,
    calls: AtomicUsize,
}

impl Downstream {
    pub fn new() -> Downstream {
        Downstream::default()
    }

    fn call(&self, _item: u32) {
        // Ordering: SeqCst — test instrumentation; a read-modify-write sees the latest value
        // whatever the ordering, so the peak is exact.
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        // Ordering: SeqCst — as above.
        self.peak.fetch_max(now, Ordering::SeqCst);
        // Ordering: SeqCst — as above.
        self.calls.fetch_add(1, Ordering::SeqCst);
        // Ordering: SeqCst — as above.
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
    }

    /// The most calls it ever had at once.
    pub fn peak(&self) -> usize {
        // Ordering: SeqCst — read after every worker was joined.
        self.peak.load(Ordering::SeqCst)
    }

    /// Calls it received.
    pub fn calls(&self) -> usize {
        // Ordering: SeqCst — read after every worker was joined.
        self.calls.load(Ordering::SeqCst)
    }
}

//! Observing a bulkhead at full speed: call counters in per-thread cells, the wait
//! histogram, and the listener chain. Nothing here takes a lock or writes a reference count
//! on a call's path.
//!
//! # Whether to observe at all
//!
//! Bit 31 of the state word (`OBSERVED`, see `state.rs`) is set once counters are enabled,
//! a listener is registered, or the `tracing` feature is on. The fast paths already hold
//! the word they loaded or swapped, so an unobserved bulkhead pays one bit test, and an
//! observed one calls into [`Bulkhead`](crate::Bulkhead)'s `observe_*` functions, which
//! look at each observer below in turn.
//!
//! # Counters: one writer per cell
//!
//! Every thread gets a small *slot* number, unique among live threads and reused after a
//! thread exits (`sync::thread_slot`, after the thread ids of the `thread_local` crate).
//! A bulkhead's counters keep one cache-padded set of [`Cells`] per slot, so each cell has
//! exactly one writer: its thread bumps it with a plain load and store, no `lock`-prefixed
//! read-modify-write, and no other thread ever writes that cache line. A scrape sums the
//! cells of every slot (Relaxed loads).
//!
//! Why not striped cells shared by hashing threads onto them (Java's `LongAdder`, most
//! Rust "sharded counter" crates)? Sharing a cell needs an atomic read-modify-write
//! (`lock xadd`, about 20 cycles even uncontended), which is more than the whole
//! rejection costs (one load and a few instructions) and would double an uncontended
//! acquire + release (two read-modify-writes of its own). A single writer per cell makes
//! the increment a load, an add and a store, and still never shares a line between
//! threads. What it costs instead: a slot registry (a mutex taken once per thread), and
//! memory per slot per counted bulkhead (128 bytes).
//!
//! Slots `0..FIRST` live inline in the counters; higher slots in buckets of doubling size,
//! allocated on first use. A thread without a slot (its thread-locals are being
//! destroyed) counts in the `shared` cells with a read-modify-write.
//!
//! # The wait histogram
//!
//! Only the slow path (a caller that queued) measures a wait: the fast path's permits and
//! immediate refusals waited zero, which is what the histogram's zero bucket holds (the
//! counters minus the slow-path samples, worked out at read time). Slow-path samples are
//! added under a small mutex of their own, so a reader sees each bucket's count and total
//! together: that path already took the queue's lock and parked, so one more short lock
//! there costs nothing measurable, and a per-thread copy of the histogram would cost 200
//! bytes per slot per bulkhead.
//!
//! # Listeners: an append-only chain
//!
//! Listeners form an append-only, singly linked chain of nodes whose `next` links are
//! `OnceLock`s: emitting walks it with one Acquire load per node (no lock, no reference
//! count), and registering sets the first empty link (retrying further along if another
//! registration won the race). Removing a listener clears its node's `active` flag (one
//! Relaxed load per node when emitting); the node and its closure stay until the bulkhead
//! is dropped, since an emitter may be walking past it at that moment.
//!
//! # Contract: a registration is seen by every later call
//!
//! `on_event` and `enable_counters` first publish their data (the `OnceLock` set, Release)
//! and then set `OBSERVED` (a read-modify-write of the state word). A call that happens
//! after the registration returned reads the state word at or after that read-modify-write
//! in its modification order (coherence), so it sees `OBSERVED`; its `OnceLock` loads then
//! see the published data for the same reason. A call concurrent with the registration may
//! or may not be seen: there is no "after" to honour. No operation clears `OBSERVED`.

pub(crate) mod event;
pub(crate) mod metrics;
pub(crate) mod name;
pub(crate) mod reason;
pub(crate) mod retry;
pub(crate) mod trace;

use core::time::Duration;

use crossbeam_utils::CachePadded;

use std::sync::Arc;

use crate::engine::sync::{
    cached_thread_slot, thread_slot, AtomicBool, AtomicU64, Mutex, OnceLock, Ordering, NO_SLOT,
};
use crate::observe::event::BulkheadEvent;
use crate::observe::reason::RejectReason;

/// How many reasons there are: the length of every per-reason array.
pub(crate) const REASONS: usize = RejectReason::ALL.len();

/// Slots whose cells live inline in [`Counters`].
#[cfg(not(any(bulkhead_loom, bulkhead_shuttle)))]
const FIRST: usize = 8;
/// In a model, few inline slots, so the checkers also run the bucket path.
#[cfg(any(bulkhead_loom, bulkhead_shuttle))]
const FIRST: usize = 2;
/// Buckets after the inline slots: bucket `k` holds slots `FIRST << k .. FIRST << (k + 1)`.
/// Slots beyond the last (half a billion live threads) count in the shared cells.
const MORE: usize = 26;

/// The counters one slot writes.
#[derive(Debug)]
pub(crate) struct Cells {
    pub(crate) permitted: AtomicU64,
    pub(crate) finished: AtomicU64,
    pub(crate) rejected: [AtomicU64; REASONS],
}

impl Cells {
    fn new() -> Cells {
        Cells {
            permitted: AtomicU64::new(0),
            finished: AtomicU64::new(0),
            rejected: core::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// Adds one to a cell that only the calling thread writes.
#[inline]
pub(crate) fn bump_own(cell: &AtomicU64) {
    // Ordering: Relaxed — this thread is the cell's only writer (its slot is its own until
    // it exits, and the slot pool's mutex orders the hand-over), so a load and a store lose
    // no update; nothing is published through a counter, and readers only sum. A u64 does
    // not wrap: 584 years at one increment per nanosecond.
    cell.store(cell.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
}

/// Adds one to a cell that several threads may write.
#[cold]
fn bump_shared(cell: &AtomicU64) {
    // Ordering: Relaxed — a read-modify-write loses no update whatever the ordering; nothing
    // is published through a counter.
    cell.fetch_add(1, Ordering::Relaxed);
}

/// Reads a cell for a sum.
fn read(cell: &AtomicU64) -> u64 {
    // Ordering: Relaxed — a counter publishes nothing; each cell only grows, so a sum is at
    // least every increment that happened before the read.
    cell.load(Ordering::Relaxed)
}

/// Calls counted since counting was enabled: a sum over every slot's cells.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct CallCounts {
    pub(crate) permitted: u64,
    pub(crate) finished: u64,
    pub(crate) rejected: [u64; REASONS],
}

impl CallCounts {
    fn add(&mut self, cells: &Cells) {
        self.permitted = self.permitted.wrapping_add(read(&cells.permitted));
        self.finished = self.finished.wrapping_add(read(&cells.finished));
        for (sum, cell) in self.rejected.iter_mut().zip(&cells.rejected) {
            *sum = sum.wrapping_add(read(cell));
        }
    }
}

/// Upper bounds of the wait histogram's finite buckets; a last bucket holds longer waits.
pub(crate) const WAIT_BOUNDS: [Duration; 9] = [
    Duration::from_micros(100),
    Duration::from_millis(1),
    Duration::from_millis(5),
    Duration::from_millis(10),
    Duration::from_millis(25),
    Duration::from_millis(50),
    Duration::from_millis(100),
    Duration::from_millis(250),
    Duration::from_secs(1),
];

/// Buckets of the wait histogram: one per bound, and one above the last.
pub(crate) const WAIT_BUCKETS: usize = WAIT_BOUNDS.len() + 1;

/// Slow-path waits per bucket (see [`WAIT_BOUNDS`]): how many, and their total in
/// nanoseconds. Zero waits (the fast path) are not in here.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct WaitSnapshot {
    pub(crate) count: [u64; WAIT_BUCKETS],
    pub(crate) nanos: [u64; WAIT_BUCKETS],
}

impl WaitSnapshot {
    fn record(&mut self, waited: Duration) {
        let bucket =
            WAIT_BOUNDS.iter().position(|&bound| waited <= bound).unwrap_or(WAIT_BOUNDS.len());
        let nanos = u64::try_from(waited.as_nanos()).unwrap_or(u64::MAX);
        self.count[bucket] = self.count[bucket].wrapping_add(1);
        self.nanos[bucket] = self.nanos[bucket].wrapping_add(nanos);
    }
}

/// Whether a wait ended with a permit or a refusal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
pub(crate) enum Outcome {
    Permitted = 0,
    Rejected = 1,
}

/// A bulkhead's call counters and wait histogram; see the module docs.
#[derive(Debug)]
pub(crate) struct Counters {
    first: [CachePadded<Cells>; FIRST],
    more: [OnceLock<Box<[CachePadded<Cells>]>>; MORE],
    /// For a thread without a slot, or with a slot beyond the last bucket.
    shared: CachePadded<Cells>,
    /// Slow-path waits: permitted, rejected.
    waits: Mutex<[WaitSnapshot; 2]>,
}

impl Counters {
    pub(crate) fn new() -> Counters {
        Counters {
            first: core::array::from_fn(|_| CachePadded::new(Cells::new())),
            more: core::array::from_fn(|_| OnceLock::new()),
            shared: CachePadded::new(Cells::new()),
            waits: Mutex::new([WaitSnapshot::default(); 2]),
        }
    }

    /// The calling thread's cells if they are inline and its slot is already taken: the
    /// hot case, one thread-local read and a bounds check. `None` sends the caller to
    /// [`bump`](Self::bump).
    #[inline]
    pub(crate) fn inline_cells(&self) -> Option<&Cells> {
        self.first.get(cached_thread_slot()).map(|cells| &**cells)
    }

    /// Adds one to the calling thread's copy of the cell `pick` chooses, wherever it is:
    /// inline, in a bucket (allocated on first use), or in the shared cells.
    #[cold]
    pub(crate) fn bump(&self, pick: impl Fn(&Cells) -> &AtomicU64) {
        let slot = thread_slot();
        match self.first.get(slot).map(|cells| &**cells).or_else(|| self.cells_of(slot)) {
            Some(cells) => bump_own(pick(cells)),
            None => bump_shared(pick(&self.shared)),
        }
    }

    /// The cells of a slot beyond the inline ones, allocating its bucket on first use.
    fn cells_of(&self, slot: usize) -> Option<&Cells> {
        if slot == NO_SLOT || slot < FIRST {
            return None;
        }
        let k = (slot / FIRST).ilog2() as usize;
        let start = FIRST << k;
        let bucket = self
            .more
            .get(k)?
            .get_or_init(|| (0..start).map(|_| CachePadded::new(Cells::new())).collect());
        bucket.get(slot - start).map(|cells| &**cells)
    }

    /// Records a slow-path wait (never called for the fast path's zero waits).
    pub(crate) fn waited(&self, outcome: Outcome, waited: Duration) {
        self.waits.lock()[outcome as usize].record(waited);
    }

    /// The sums over every slot.
    pub(crate) fn counts(&self) -> CallCounts {
        let mut counts = CallCounts::default();
        self.first.iter().for_each(|cells| counts.add(cells));
        // A bucket may be allocated while a lower one is not (its slots' threads never
        // counted here), so look at every one.
        for bucket in self.more.iter().filter_map(OnceLock::get) {
            bucket.iter().for_each(|cells| counts.add(cells));
        }
        counts.add(&self.shared);
        counts
    }

    /// The calls finished, summed over every slot (the retry estimate's release count).
    pub(crate) fn finished(&self) -> u64 {
        let mut sum = 0u64;
        let mut add = |cells: &Cells| sum = sum.wrapping_add(read(&cells.finished));
        self.first.iter().for_each(|cells| add(cells));
        for bucket in self.more.iter().filter_map(OnceLock::get) {
            bucket.iter().for_each(|cells| add(cells));
        }
        add(&self.shared);
        sum
    }

    /// The slow-path waits that ended with `outcome`.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) fn waits(&self, outcome: Outcome) -> WaitSnapshot {
        self.waits.lock()[outcome as usize]
    }
}

/// A registered listener.
pub(crate) type Listener = dyn Fn(&BulkheadEvent) + Send + Sync + 'static;

/// One link of the listener chain.
struct Node {
    listener: Box<Listener>,
    /// Cleared by [`ListenerHandle::remove`](crate::ListenerHandle::remove): the node stays
    /// in the chain (emitters may be walking it), but is skipped.
    active: Arc<AtomicBool>,
    next: OnceLock<Box<Node>>,
}

/// The registered listeners, in registration order; see the module docs.
pub(crate) struct Listeners {
    head: OnceLock<Box<Node>>,
}

impl Listeners {
    pub(crate) fn new() -> Listeners {
        Listeners { head: OnceLock::new() }
    }

    /// Appends `listener`. Safe against concurrent appends and walks.
    pub(crate) fn push(&self, listener: Box<Listener>, active: Arc<AtomicBool>) {
        let mut node = Box::new(Node { listener, active, next: OnceLock::new() });
        let mut link = &self.head;
        loop {
            while let Some(next) = link.get() {
                link = &next.next;
            }
            match link.set(node) {
                Ok(()) => return,
                // Another registration took this link first: go on past its node.
                Err(back) => node = back,
            }
        }
    }

    /// Whether no listener is registered (yet, as far as this thread can see).
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.head.get().is_none()
    }

    /// Calls every listener with `event`, in registration order. Each call is isolated: a
    /// listener that panics is caught, and the next one still runs.
    pub(crate) fn emit(&self, event: &BulkheadEvent) {
        let mut link = &self.head;
        while let Some(node) = link.get() {
            // Ordering: Relaxed — the flag guards no data; a removal that happens-before this
            // emit is seen by coherence (a store that happens-before a load is visible to it).
            if node.active.load(Ordering::Relaxed) {
                // A panicking listener must not unwind through the engine (permit accounting
                // is already done) nor out of a `Drop`; it is caught and ignored.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    (node.listener)(event);
                }));
            }
            link = &node.next;
        }
    }
}

impl Drop for Listeners {
    /// Unlinks the chain node by node: dropping a long chain recursively could overflow the
    /// stack.
    fn drop(&mut self) {
        let mut next = self.head.take();
        while let Some(mut node) = next {
            next = node.next.take();
        }
    }
}

impl core::fmt::Debug for Listeners {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let mut count = 0;
        let mut link = &self.head;
        while let Some(node) = link.get() {
            count += 1;
            link = &node.next;
        }
        f.debug_struct("Listeners").field("count", &count).finish()
    }
}

#[cfg(all(test, not(any(bulkhead_loom, bulkhead_shuttle))))]
mod tests {
    use super::*;

    #[test]
    fn reasons_index_their_own_position() {
        for (i, reason) in RejectReason::ALL.iter().enumerate() {
            assert_eq!(reason.index(), i, "{reason:?}");
        }
    }

    #[test]
    fn counters_sum_every_bucket_and_the_shared_cells() {
        let counters = Counters::new();
        for slot in [FIRST, FIRST + 1, 2 * FIRST, 5 * FIRST + 3, 1000] {
            let cells = counters.cells_of(slot).expect("a bucket slot");
            bump_own(&cells.permitted);
        }
        bump_shared(&counters.shared.permitted);
        counters.bump(|cells| &cells.permitted); // this thread's slot, wherever it is
        assert_eq!(counters.counts().permitted, 5 + 1 + 1);
        // Inline slots are not bucket slots; a thread without a slot has none.
        assert!(counters.cells_of(0).is_none());
        assert!(counters.cells_of(NO_SLOT).is_none());
    }

    #[test]
    fn distinct_slots_get_distinct_cells() {
        let counters = Counters::new();
        let a = counters.cells_of(FIRST).expect("slot") as *const Cells;
        let b = counters.cells_of(2 * FIRST - 1).expect("slot") as *const Cells;
        let c = counters.cells_of(2 * FIRST).expect("slot") as *const Cells;
        assert_ne!(a, b);
        assert_ne!(b, c);
        assert_eq!(a, counters.cells_of(FIRST).expect("slot") as *const Cells);
    }

    #[test]
    fn waits_land_in_the_bucket_of_their_bound() {
        let counters = Counters::new();
        counters.waited(Outcome::Permitted, Duration::from_micros(100));
        counters.waited(Outcome::Permitted, Duration::from_micros(101));
        counters.waited(Outcome::Rejected, Duration::from_secs(7));
        let permitted = counters.waits(Outcome::Permitted);
        assert_eq!(permitted.count[0], 1);
        assert_eq!(permitted.count[1], 1);
        assert_eq!(permitted.nanos[1], 101_000);
        let rejected = counters.waits(Outcome::Rejected);
        assert_eq!(rejected.count[WAIT_BUCKETS - 1], 1);
        assert_eq!(rejected.nanos[WAIT_BUCKETS - 1], 7_000_000_000);
    }

    #[test]
    fn listeners_drop_a_long_chain_without_recursion() {
        // 10 000 nodes dropped on a thread with a 64 KiB stack: a recursive drop needs far
        // more than that (a frame per node) and overflows it, while building the chain (each
        // push walks it: quadratic) stays quick. 100 000 nodes on the default stack took
        // 45 s in a debug build.
        let listeners = Listeners::new();
        for _ in 0..10_000 {
            listeners.push(Box::new(|_| {}), Arc::new(AtomicBool::new(true)));
        }
        assert!(!listeners.is_empty());
        let dropper = std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(move || drop(listeners))
            .expect("spawn the dropping thread");
        dropper.join().expect("the chain dropped without overflowing a 64 KiB stack");
    }
}

//! Samples gathered per thread, folded into the controller off the call path (issue 21).
//!
//! # Why
//!
//! Feeding every sample to the algorithm as it comes costs each sampled call a lock (a
//! shared write that serialises every thread finishing a call) and the algorithm's
//! arithmetic. Here a sampled call writes its sample into its own thread's ring, with no
//! read-modify-write and no line shared with another writer, and some call now and then
//! *folds*: it takes the algorithm out of the controller (never waiting: if another fold
//! holds it, the caller leaves), drains every thread's ring, feeds the algorithm holding no
//! lock, and puts it back. The one who holds the algorithm is *the folder*.
//!
//! # The rings
//!
//! Every thread gets a small slot number (`engine::sync::thread_slot`, the counters'
//! scheme: dense among live threads, given back when a thread exits). A controller keeps a
//! [`Slot`] per slot number below [`SLOTS`], allocated when its thread first records: a
//! ring of [`RING`] packed samples, the owner's `tail` (samples pushed) and the folders'
//! `head` (samples folded). Only the owner writes `tail` and the ring; only the folder
//! writes `head`. So:
//!
//! - a push is a load of `tail`, a load of `head`, a store into the ring and a store of
//!   `tail` (Release, so a folder that reads the new `tail` reads the sample);
//! - a fold reads each ring from `head` to the `tail` it loaded (Acquire), then stores that
//!   `tail` as the new `head` (Release, so the owner overwrites a place only after the fold
//!   read it).
//!
//! A thread without a slot below [`SLOTS`] (more than [`SLOTS`] live threads, or a thread
//! whose thread-locals are being destroyed) leaves its sample in the controller's pending
//! list, which the next fold feeds (a fold that runs rechecks it as it rechecks the rings).
//!
//! # When a fold happens
//!
//! A call asks for a fold when its sample is not a success (a failure must reach the
//! algorithm at once: AIMD backs off on it, and the permit should pay the new debt), when
//! its ring holds [`FOLD_AT`] samples, or when the fold window
//! ([`AdaptiveLimit::fold_window`](super::AdaptiveLimit::fold_window), default 100 µs) has
//! passed since the last fold. Asking is: store the ring's `tail` as the slot's `want`, a
//! SeqCst fence, a look for the algorithm. A caller that finds it taken leaves: the folder,
//! after putting it back, issues a SeqCst fence of its own and looks for a `want` above its
//! slot's `head`, and folds again if it finds one (at most [`ROUNDS`] times in a row). The
//! two fences make this the store-buffering pattern with a fence on each side: either the
//! folder sees the `want`, or the caller's look sees the algorithm back and folds itself
//! (the algorithm's mutex, held for the take and the put-back, orders them too). So
//! a failure reaches the algorithm before its call returns, or within the fold that was
//! running when it ended.
//!
//! A ring full while another thread folds (the holder would have to keep the lock for
//! [`RING`] − [`FOLD_AT`] of this thread's calls) drops the sample and counts it
//! ([`AdaptiveMetrics::samples_dropped`](super::AdaptiveMetrics::samples_dropped)).
//!
//! # What the algorithm sees
//!
//! A fold feeds the samples of every ring, thread by thread, each ring in its order:
//! consecutive successes become one sample (their mean latency, the highest in-flight
//! count, `Success`), every other sample is fed on its own where it stands. At the rate
//! of the evidence in benches/results/adaptive.md (100 calls per second) every sample
//! folds on its own, as before; at thousands per second a success run is the 100 µs window's
//! (or [`FOLD_AT`] samples'), the way Netflix's `WindowedLimit` feeds its delegate
//! (average latency, max in flight, per window).

use crate::engine::pad::CachePadded;

use super::algorithm::Sample;
use crate::bulkhead::permit::Outcome;
use crate::engine::sync::{cached_thread_slot, fence, thread_slot, AtomicU64, OnceLock, Ordering};

/// Threads with a ring of their own, per controller (slot numbers below it).
#[cfg(not(any(bulkhead_loom, bulkhead_shuttle)))]
pub(super) const SLOTS: usize = 64;
/// Samples a ring holds.
#[cfg(not(any(bulkhead_loom, bulkhead_shuttle)))]
pub(super) const RING: u64 = 128;
/// A ring holding this many samples asks for a fold.
#[cfg(not(any(bulkhead_loom, bulkhead_shuttle)))]
pub(super) const FOLD_AT: u64 = 32;

// In a model: two slots (a third thread's samples go to the pending list), rings of two, so the
// checkers reach the full ring and the fallback path with a few calls.
#[cfg(any(bulkhead_loom, bulkhead_shuttle))]
pub(super) const SLOTS: usize = 2;
#[cfg(any(bulkhead_loom, bulkhead_shuttle))]
pub(super) const RING: u64 = 2;
#[cfg(any(bulkhead_loom, bulkhead_shuttle))]
pub(super) const FOLD_AT: u64 = 2;

/// Folds in a row one caller does when others keep asking (bounded, so that a caller
/// never folds for the others forever; a request left over waits for the next fold).
#[cfg(not(any(bulkhead_loom, bulkhead_shuttle)))]
pub(super) const ROUNDS: usize = 4;
/// In a model, more than a scenario's requests, so that none is ever left over.
#[cfg(any(bulkhead_loom, bulkhead_shuttle))]
pub(super) const ROUNDS: usize = 8;

const _: () = assert!(SLOTS <= 64, "`Slots::used` is a 64-bit mask");

// A packed sample: outcome (2 bits), calls in flight (14 bits), latency in ticks of the
// controller's clock (48 bits): converted to nanoseconds by the fold, once per run.
const OUTCOME_MASK: u64 = 0b11;
const IN_FLIGHT_SHIFT: u32 = 2;
const IN_FLIGHT_MAX: u64 = (1 << 14) - 1;
const LATENCY_SHIFT: u32 = 16;
const LATENCY_MAX: u64 = (1 << (64 - LATENCY_SHIFT)) - 1;

/// A sample as one word (latency in ticks, saturating at 2^48; in-flight at 2^14 − 1).
#[inline]
pub(super) fn pack(latency_ticks: u64, in_flight: usize, outcome: Outcome) -> u64 {
    let code = match outcome {
        Outcome::Success => 0,
        Outcome::Failure => 1,
        Outcome::Cancelled => 2,
        Outcome::Ignored => 3,
    };
    let in_flight = (in_flight as u64).min(IN_FLIGHT_MAX);
    latency_ticks.min(LATENCY_MAX) << LATENCY_SHIFT | in_flight << IN_FLIGHT_SHIFT | code
}

/// Whether a packed sample is a success.
#[inline]
pub(super) fn is_success(word: u64) -> bool {
    word & OUTCOME_MASK == 0
}

/// The sample [`pack`] packed, its latency converted by `nanos` (ticks to nanoseconds).
pub(super) fn unpack(word: u64, nanos: impl Fn(u64) -> u64) -> Sample {
    let outcome = match word & OUTCOME_MASK {
        0 => Outcome::Success,
        1 => Outcome::Failure,
        2 => Outcome::Cancelled,
        _ => Outcome::Ignored,
    };
    Sample::new(
        core::time::Duration::from_nanos(nanos(word >> LATENCY_SHIFT)),
        ((word >> IN_FLIGHT_SHIFT) & IN_FLIGHT_MAX) as usize,
        outcome,
    )
}

/// One thread's ring (see the module docs).
#[derive(Debug)]
pub(super) struct Slot {
    ring: [AtomicU64; RING as usize],
    /// Samples pushed: written by the owner only.
    tail: AtomicU64,
    /// Samples folded: written by the folder only (see the module docs).
    head: AtomicU64,
    /// The `tail` at which the owner last asked for a fold: written by the owner only.
    want: AtomicU64,
    /// Samples dropped on a full ring: written by the owner only.
    dropped: AtomicU64,
}

impl Slot {
    fn new() -> Slot {
        Slot {
            ring: core::array::from_fn(|_| AtomicU64::new(0)),
            tail: AtomicU64::new(0),
            head: AtomicU64::new(0),
            want: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    /// Appends `sample`; the samples now waiting (this one included), or `None` if the ring
    /// is full (nothing written).
    #[inline]
    pub(super) fn push(&self, sample: u64) -> Option<u64> {
        // Ordering: Relaxed — the owner is the only writer of `tail` (its slot is its own;
        // the slot pool's mutex orders a hand-over to the next owner).
        let tail = self.tail.load(Ordering::Relaxed);
        // Ordering: Acquire — pairs with the Release store of `head` in `drain`: the fold's
        // reads of the places we are about to overwrite happen before our writes.
        let head = self.head.load(Ordering::Acquire);
        if tail.wrapping_sub(head) >= RING {
            return None;
        }
        // Ordering: Relaxed — published by the Release store of `tail` below.
        self.ring[(tail % RING) as usize].store(sample, Ordering::Relaxed);
        // Ordering: Release — pairs with the Acquire load of `tail` in `drain`: a fold that
        // reads the new `tail` reads the sample stored above.
        self.tail.store(tail.wrapping_add(1), Ordering::Release);
        Some(tail.wrapping_add(1).wrapping_sub(head))
    }

    /// Asks for a fold of everything pushed so far; the caller then tries to fold.
    #[inline]
    pub(super) fn ask_fold(&self) {
        // Ordering: Relaxed — the owner is the only writer of `tail`.
        let tail = self.tail.load(Ordering::Relaxed);
        // Ordering: Relaxed — ordered by the fence below.
        self.want.store(tail, Ordering::Relaxed);
        // Ordering: SeqCst fence — pairs with the fence in `Controller::try_fold` after a
        // put-back: either that folder's recheck sees this `want`, or our look for the
        // algorithm (after this fence) finds it back. Without a fence on both sides, both could miss
        // (store buffering) and the sample would wait for an unrelated fold.
        fence(Ordering::SeqCst);
    }

    /// Counts a sample dropped on a full ring.
    #[cold]
    pub(super) fn drop_one(&self) {
        // Ordering: Relaxed — single writer (the owner); a counter publishes nothing.
        let dropped = self.dropped.load(Ordering::Relaxed);
        self.dropped.store(dropped.wrapping_add(1), Ordering::Relaxed);
    }

    /// Adds every success pushed and not yet folded to `run`, hands every other sample to
    /// `other` (with the run so far), in order, and marks them all folded. Call it as the
    /// folder (the only writer of `head`).
    fn drain(&self, run: &mut Run, other: &mut impl FnMut(&mut Run, u64)) {
        // Ordering: Acquire — pairs with the Release store in `push`: the samples up to
        // this `tail` are visible.
        let tail = self.tail.load(Ordering::Acquire);
        // Ordering: Relaxed — written only by the folder, which we are (the algorithm's
        // mutex orders one folder's store before the next folder's load).
        let head = self.head.load(Ordering::Relaxed);
        // The run in locals (registers) over the loop: most samples are successes.
        let Run { mut count, mut ticks, mut in_flight } = core::mem::take(run);
        let mut i = head;
        while i != tail {
            // Ordering: Relaxed — published by the Acquire load of `tail` above.
            let word = self.ring[(i % RING) as usize].load(Ordering::Relaxed);
            if is_success(word) {
                count += 1;
                // No overflow: at most `SLOTS * RING` (2^13) latencies of at most 2^48 ticks.
                ticks += word >> LATENCY_SHIFT;
                in_flight = in_flight.max((word >> IN_FLIGHT_SHIFT) & IN_FLIGHT_MAX);
            } else {
                *run = Run { count, ticks, in_flight };
                other(run, word);
                Run { count, ticks, in_flight } = core::mem::take(run);
            }
            i = i.wrapping_add(1);
        }
        *run = Run { count, ticks, in_flight };
        // Ordering: Release — pairs with the Acquire load of `head` in `push`: our reads
        // above happen before the owner overwrites those places.
        self.head.store(tail, Ordering::Release);
    }

    /// Whether the owner asked for a fold of samples not folded yet.
    fn wanted(&self) -> bool {
        // Ordering: Relaxed — ordered by the SeqCst fences (see `ask_fold`); `head` is
        // only compared.
        let want = self.want.load(Ordering::Relaxed);
        // Ordering: Relaxed — as above.
        let head = self.head.load(Ordering::Relaxed);
        want.wrapping_sub(head) as i64 > 0
    }
}

/// A controller's rings, one per thread slot below [`SLOTS`], allocated on first use.
pub(super) struct Slots {
    slots: [OnceLock<Box<CachePadded<Slot>>>; SLOTS],
    /// Bit `i` is set once slot `i` is allocated: folds visit only those.
    used: AtomicU64,
}

impl Slots {
    pub(super) fn new() -> Slots {
        Slots { slots: core::array::from_fn(|_| OnceLock::new()), used: AtomicU64::new(0) }
    }

    /// The calling thread's ring, allocated on first use; `None` for a thread without a
    /// slot below [`SLOTS`].
    #[inline]
    pub(super) fn own(&self) -> Option<&Slot> {
        match self.slots.get(cached_thread_slot()).and_then(OnceLock::get) {
            Some(slot) => Some(slot),
            None => self.own_slow(),
        }
    }

    #[cold]
    #[inline(never)]
    fn own_slow(&self) -> Option<&Slot> {
        let i = thread_slot();
        let slot = self.slots.get(i)?.get_or_init(|| Box::new(CachePadded::new(Slot::new())));
        // Ordering: Release — pairs with the Acquire load in `each`; the slot itself is
        // published by its `OnceLock`. Once per thread slot and controller.
        self.used.fetch_or(1 << i, Ordering::Release);
        Some(slot)
    }

    fn each(&self, mut f: impl FnMut(&Slot)) {
        // Ordering: Acquire — pairs with the Release `fetch_or` in `own_slow`.
        let mut used = self.used.load(Ordering::Acquire);
        while used != 0 {
            let i = used.trailing_zeros() as usize;
            used &= used - 1;
            if let Some(slot) = self.slots[i].get() {
                f(slot);
            }
        }
    }

    /// Every sample not folded yet, ring by ring: successes added to `run`, the others
    /// handed to `other` with the run so far (see [`Slot::drain`]). Call it as the folder.
    pub(super) fn drain(&self, run: &mut Run, mut other: impl FnMut(&mut Run, u64)) {
        self.each(|slot| slot.drain(run, &mut other));
    }

    /// Whether some thread asked for a fold of samples not folded yet.
    pub(super) fn wanted(&self) -> bool {
        let mut wanted = false;
        self.each(|slot| wanted |= slot.wanted());
        wanted
    }

    /// Samples dropped on full rings, in all.
    pub(super) fn dropped(&self) -> u64 {
        let mut dropped = 0u64;
        // Ordering: Relaxed — a counter publishes nothing.
        self.each(|slot| dropped = dropped.wrapping_add(slot.dropped.load(Ordering::Relaxed)));
        dropped
    }
}

/// Consecutive successes of one fold, summed up to be fed as one sample.
#[derive(Default)]
pub(super) struct Run {
    count: u64,
    ticks: u64,
    in_flight: u64,
}

impl Run {
    /// The run as one sample (mean latency, converted by `nanos`; highest in-flight) and
    /// how many it stands for; `None` if empty. Leaves the run empty.
    pub(super) fn take(&mut self, nanos: impl Fn(u64) -> u64) -> Option<(Sample, u64)> {
        let run = core::mem::take(self);
        (run.count > 0).then(|| {
            let mean = core::time::Duration::from_nanos(nanos(run.ticks / run.count));
            (Sample::new(mean, run.in_flight as usize, Outcome::Success), run.count)
        })
    }
}

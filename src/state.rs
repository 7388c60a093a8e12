//! The lock-free core: one atomic word, a FIFO waiter queue, and the grant/withdraw protocol.
//!
//! # The state word
//!
//! Everything the fast paths must agree on lives in one `AtomicU64`:
//!
//! | bits    | field       | meaning                                                        |
//! |---------|-------------|----------------------------------------------------------------|
//! | 0       | `WAITERS`   | the waiter queue holds at least one live waiter                |
//! | 1..=30  | limit       | the current `max_concurrent_calls` (unsigned, ≤ 2^30 − 1)      |
//! | 31      | `OBSERVED`  | counters, a listener or `tracing` want to hear of every call   |
//! | 32..=63 | available   | free permits, **signed**: negative after a shrink (a debt)     |
//!
//! Keeping the limit and the listener flag in the word means a rejection reads exactly one
//! atomic and still knows the limit to report and whether to count or emit an event. Adding or
//! removing a permit is adding or subtracting `ONE_PERMIT` (`1 << 32`): wrapping arithmetic
//! on the top half never touches the low half, so the sign of `available` takes care of
//! itself.
//!
//! # Invariants
//!
//! * `in_flight == limit - available` at every instant (a permit granted to a queued waiter
//!   counts as in flight). Permits are never created or lost: `set_limit` moves `limit` and
//!   `available` by the same delta in one CAS, so `limit - available` is unchanged.
//! * Under the queue lock, between critical sections: `WAITERS` is set iff the queue holds a
//!   live waiter, and then `available <= 0` (every free permit went to the oldest waiter).
//! * While `WAITERS` is set no fast path takes a permit: no barging past a queued waiter.
//!
//! # Protocol
//!
//! * **Acquire (fast):** load; if `WAITERS` is clear and `available > 0`, CAS
//!   `available - 1`. A rejection is the single load.
//! * **Release:** `fetch_add(ONE_PERMIT)`. If the previous value had `WAITERS` set, take the
//!   lock and [`drain`](Semaphore::drain): move free permits to the oldest waiters.
//! * **Enqueue (slow acquire):** under the lock, take a permit if the queue is empty and one
//!   is free; otherwise set `WAITERS` (`fetch_or`), push the waiter and drain once, so a
//!   permit released between our load and the `fetch_or` (its releaser saw no flag and took
//!   no lock) is not stranded.
//! * **Grant / withdraw:** a waiter's fate is written under the lock exactly once: `GRANTED`
//!   by a drain (it now owns a permit) or `WITHDRAWN` by the waiter itself (deadline passed,
//!   future dropped). A waiter that comes to withdraw and finds `GRANTED` keeps the permit
//!   (sync: returns it as a success; async drop: releases it, which passes it on).
//!
//! # Synchronizes-with pairs
//!
//! 1. `release`'s `fetch_add` (Release) → the successful acquire CAS (Acquire), in
//!    `try_acquire` or in `drain`: the previous holder's work happens-before the next one's.
//!    The `fetch_or`/`fetch_and` on `WAITERS` and the limit CAS are read-modify-writes, so
//!    they continue that release sequence instead of breaking it.
//! 2. `drain`'s store of `GRANTED` (Release) → the waiter's load of its state (Acquire):
//!    chained with (1), the releaser's work happens-before the woken waiter's.
//! 3. Everything else about the queue is ordered by the queue mutex.
//!
//! # The harmless race
//!
//! A release that finds `WAITERS` set has already added its permit to `available`, so for a
//! moment `available > 0` while a waiter is queued. Nothing can take that permit: fast paths
//! refuse while `WAITERS` is set, and the releaser (or whoever holds the lock first) drains
//! it to the oldest waiter. Metrics read in that window see one available permit.

use core::time::Duration;
use std::collections::VecDeque;
use std::task::Waker;

use crossbeam_utils::CachePadded;

use crate::sync::{
    Arc, AtomicU64, AtomicU8, AtomicUsize, AtomicWaker, Clock, Mutex, Ordering, Thread,
};

const WAITERS: u64 = 1;
const LIMIT_SHIFT: u32 = 1;
const LIMIT_BITS: u32 = 30;
const LIMIT_MASK: u64 = ((1 << LIMIT_BITS) - 1) << LIMIT_SHIFT;
const OBSERVED: u64 = 1 << 31;
const AVAILABLE_SHIFT: u32 = 32;
const ONE_PERMIT: u64 = 1 << AVAILABLE_SHIFT;

/// The largest limit the state word can hold: 2^30 − 1.
pub(crate) const MAX_PERMITS: usize = (1 << LIMIT_BITS) - 1;

/// A decoded view of the state word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Word(u64);

impl Word {
    fn encode(available: i64, limit: usize, flags: u64) -> Word {
        debug_assert!(limit <= MAX_PERMITS);
        debug_assert!(available >= -(MAX_PERMITS as i64) && available <= MAX_PERMITS as i64);
        // `available` is stored two's complement in the top half; the casts are exact.
        Word(((available as u64) << AVAILABLE_SHIFT) | ((limit as u64) << LIMIT_SHIFT) | flags)
    }

    /// Free permits; negative while a shrink's debt is unpaid.
    #[inline]
    pub(crate) fn available(self) -> i64 {
        // Arithmetic shift: keeps the sign of the top half.
        (self.0 as i64) >> AVAILABLE_SHIFT
    }

    /// The current limit.
    #[inline]
    pub(crate) fn limit(self) -> usize {
        ((self.0 & LIMIT_MASK) >> LIMIT_SHIFT) as usize
    }

    /// Whether anyone observes the calls (counters, listeners, `tracing`): see
    /// `observe.rs`.
    #[inline]
    pub(crate) fn is_observed(self) -> bool {
        self.0 & OBSERVED != 0
    }

    #[inline]
    fn has_waiters(self) -> bool {
        self.0 & WAITERS != 0
    }

    /// A permit is free for a newcomer: nobody queued and `available > 0`.
    #[inline]
    fn admits_newcomer(self) -> bool {
        // `WAITERS` clear and available ≥ 1, in one signed comparison: with the flag clear,
        // the word is ≥ ONE_PERMIT exactly when the top half is ≥ 1.
        self.0 & WAITERS == 0 && (self.0 as i64) >= ONE_PERMIT as i64
    }

    /// Calls in flight: `limit - available`, never negative.
    #[inline]
    pub(crate) fn in_flight(self) -> usize {
        let in_flight = self.limit() as i64 - self.available();
        usize::try_from(in_flight).unwrap_or(0)
    }
}

const WAITING: u8 = 0;
const GRANTED: u8 = 1;
const WITHDRAWN: u8 = 2;

/// How a queued waiter is woken.
#[derive(Debug)]
enum Wake {
    Thread(Thread),
    Task(AtomicWaker),
}

/// One queued caller, shared between the caller and the queue.
#[derive(Debug)]
pub(crate) struct Waiter {
    /// `WAITING`, then exactly one of `GRANTED` / `WITHDRAWN`, always written under the
    /// queue lock.
    state: AtomicU8,
    wake: Wake,
}

impl Waiter {
    /// A waiter for the current thread (sync acquire).
    pub(crate) fn thread() -> Arc<Waiter> {
        Arc::new(Waiter {
            state: AtomicU8::new(WAITING),
            wake: Wake::Thread(crate::sync::current_thread()),
        })
    }

    /// A waiter for an async task, its waker registered before it is queued.
    pub(crate) fn task(waker: &Waker) -> Arc<Waiter> {
        let atomic = AtomicWaker::new();
        atomic.register(waker);
        Arc::new(Waiter { state: AtomicU8::new(WAITING), wake: Wake::Task(atomic) })
    }

    /// Re-registers the task's current waker (a no-op for thread waiters).
    pub(crate) fn register(&self, waker: &Waker) {
        if let Wake::Task(atomic) = &self.wake {
            atomic.register(waker);
        }
    }

    /// Whether a drain has granted this waiter a permit.
    #[inline]
    pub(crate) fn is_granted(&self) -> bool {
        // Ordering: Acquire — pairs with the Release store of GRANTED in `drain`, so the
        // previous holder's work happens-before ours once we see the grant.
        self.state.load(Ordering::Acquire) == GRANTED
    }

    fn wake(&self) {
        match &self.wake {
            Wake::Thread(thread) => thread.unpark(),
            Wake::Task(atomic) => atomic.wake(),
        }
    }
}

/// The waiter queue, guarded by the semaphore's mutex.
#[derive(Debug, Default)]
struct Queue {
    /// FIFO; may hold withdrawn entries (tombstones), skipped by `drain` and compacted away.
    waiters: VecDeque<Arc<Waiter>>,
    /// Live (`WAITING`) entries in `waiters`.
    live: usize,
}

impl Queue {
    /// Capacity an empty queue keeps: enough for ordinary bursts without reallocating.
    const RETAINED_CAPACITY: usize = 64;

    /// Empties the queue (only tombstones are left). After a storm of waiters, gives the
    /// memory back instead of keeping the peak size for the life of the bulkhead.
    fn reset(&mut self) {
        if self.waiters.capacity() > Self::RETAINED_CAPACITY {
            self.waiters = VecDeque::new();
        } else {
            self.waiters.clear();
        }
    }
}

/// What `enqueue` decided.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Enqueued {
    /// A permit was free under the lock: the caller owns it and was not queued.
    Acquired,
    /// The caller is queued; wait for its grant, or withdraw.
    Queued,
    /// The queue is at its cap; the caller was not queued.
    TooManyWaiting,
}

/// The counting semaphore under every bulkhead.
#[derive(Debug)]
pub(crate) struct Semaphore {
    /// The state word; see the module docs. Padded so rejections, which only read it, do not
    /// share a cache line with the mutex or the configuration.
    state: CachePadded<AtomicU64>,
    queue: Mutex<Queue>,
    /// `queue.live`, mirrored for lock-free metrics.
    waiting: AtomicUsize,
    /// The clock deadlines are measured on (the model clock under loom and shuttle).
    pub(crate) clock: Clock,
}

impl Semaphore {
    /// A semaphore with `limit` permits, all free. `limit` must be ≤ `MAX_PERMITS`.
    pub(crate) fn new(limit: usize) -> Semaphore {
        Semaphore {
            state: CachePadded::new(AtomicU64::new(Word::encode(limit as i64, limit, 0).0)),
            queue: Mutex::new(Queue::default()),
            waiting: AtomicUsize::new(0),
            clock: Clock::new(),
        }
    }

    /// The current word, for metrics and rejections.
    #[inline]
    pub(crate) fn load(&self) -> Word {
        // Ordering: Relaxed — a snapshot for metrics or a rejection; nothing is published
        // through it and nothing read after it depends on it.
        Word(self.state.load(Ordering::Relaxed))
    }

    /// Live waiters in the queue.
    pub(crate) fn waiting(&self) -> usize {
        // Ordering: Relaxed — a metric; written under the queue lock, read without it.
        self.waiting.load(Ordering::Relaxed)
    }

    /// Takes a permit if one is free for a newcomer. On failure returns the word it saw.
    ///
    /// A rejection is exactly one atomic load. Fails only when no permit is free for a
    /// newcomer, never because another thread changed the word first.
    #[inline]
    pub(crate) fn try_acquire(&self) -> Result<Word, Word> {
        // Ordering: Relaxed — a rejection consumes nothing; a success is decided (and
        // acquires) by the CAS below.
        let mut word = Word(self.state.load(Ordering::Relaxed));
        loop {
            if !word.admits_newcomer() {
                return Err(word);
            }
            // Ordering: Acquire on success — pairs with the Release `fetch_add` in `release`,
            // so the previous holder's work happens-before ours. Relaxed on failure: the
            // value only feeds the retry. The word's atomicity, not the ordering, is what
            // keeps in-flight calls within the limit.
            match self.state.compare_exchange_weak(
                word.0,
                word.0.wrapping_sub(ONE_PERMIT),
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(word),
                Err(actual) => word = Word(actual),
            }
        }
    }

    /// Returns one permit. One read-modify-write when nobody waits; otherwise also hands
    /// the permit to the oldest waiter. Returns the word seen before the release.
    #[inline]
    pub(crate) fn release(&self) -> Word {
        // Ordering: Release — pairs with the Acquire CAS that next takes this permit (in
        // `try_acquire` or `drain`), so our holder's work happens-before the next holder's.
        let prev = Word(self.state.fetch_add(ONE_PERMIT, Ordering::Release));
        if prev.has_waiters() {
            self.release_slow();
        }
        prev
    }

    #[cold]
    #[inline(never)]
    fn release_slow(&self) {
        let mut queue = self.queue.lock();
        self.drain(&mut queue);
    }

    /// Under the lock: hands free permits to the oldest live waiters, drops tombstones from
    /// the front, and clears `WAITERS` once no live waiter is left.
    fn drain(&self, queue: &mut Queue) {
        loop {
            while queue.waiters.front().is_some_and(|w| {
                // Ordering: Relaxed — waiter states are written under the lock we hold.
                w.state.load(Ordering::Relaxed) != WAITING
            }) {
                queue.waiters.pop_front();
            }
            if queue.live == 0 {
                queue.reset();
                self.clear_waiters_flag();
                return;
            }
            // Ordering: Relaxed — only feeds the CAS below, which acquires.
            let mut word = Word(self.state.load(Ordering::Relaxed));
            loop {
                if word.available() <= 0 {
                    return;
                }
                // Ordering: Acquire on success — pairs with the Release `fetch_add` of the
                // release that freed this permit (pair 1). Relaxed on failure: retry only.
                match self.state.compare_exchange_weak(
                    word.0,
                    word.0.wrapping_sub(ONE_PERMIT),
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => break,
                    Err(actual) => word = Word(actual),
                }
            }
            let Some(waiter) = queue.waiters.pop_front() else {
                unreachable!("live > 0 and the front is live");
            };
            queue.live -= 1;
            self.publish_waiting(queue);
            // Ordering: Release — pairs with the Acquire load in `Waiter::is_granted`, so the
            // waiter sees the releaser's work (chained through the CAS above).
            waiter.state.store(GRANTED, Ordering::Release);
            // Waking under the lock is fine: a woken waiter checks its state without the lock.
            waiter.wake();
        }
    }

    fn clear_waiters_flag(&self) {
        // Ordering: Relaxed — publishes nothing (the queue is under the lock); as a
        // read-modify-write it continues the release sequence of earlier releases, so a
        // fast-path acquirer that takes a permit freed before it still synchronizes with
        // that permit's releaser.
        self.state.fetch_and(!WAITERS, Ordering::Relaxed);
    }

    fn publish_waiting(&self, queue: &Queue) {
        // Ordering: Relaxed — a metric mirror of `queue.live`.
        self.waiting.store(queue.live, Ordering::Relaxed);
    }

    /// The slow acquire: under the lock, takes a free permit if nobody is queued, otherwise
    /// queues `waiter` (unless `max_waiting` live waiters are already queued).
    pub(crate) fn enqueue(&self, waiter: &Arc<Waiter>, max_waiting: Option<usize>) -> Enqueued {
        let mut queue = self.queue.lock();
        if self.try_acquire().is_ok() {
            return Enqueued::Acquired;
        }
        if max_waiting.is_some_and(|max| queue.live >= max) {
            return Enqueued::TooManyWaiting;
        }
        // Ordering: Relaxed — the flag publishes nothing by itself: a release that sees it
        // takes the lock we hold, which orders the queue. Being a read-modify-write, it is
        // totally ordered with every release's `fetch_add`: a release either comes before it
        // (its permit is in `available`, which the drain below finds) or sees the flag.
        self.state.fetch_or(WAITERS, Ordering::Relaxed);
        queue.waiters.push_back(Arc::clone(waiter));
        queue.live += 1;
        self.publish_waiting(&queue);
        self.drain(&mut queue);
        if waiter.is_granted() {
            Enqueued::Acquired
        } else {
            Enqueued::Queued
        }
    }

    /// Withdraws a queued waiter (deadline passed, future dropped). Returns `true` when the
    /// waiter had already been granted a permit, which it then owns.
    pub(crate) fn withdraw(&self, waiter: &Waiter) -> bool {
        let mut queue = self.queue.lock();
        // Ordering: Relaxed — written under the lock we hold; the caller that keeps a
        // granted permit re-reads with Acquire through `is_granted` if it needs to.
        match waiter.state.load(Ordering::Relaxed) {
            GRANTED => {
                // Re-read with Acquire so the new owner sees the previous holder's work.
                let granted = waiter.is_granted();
                debug_assert!(granted);
                true
            }
            WAITING => {
                // Ordering: Relaxed — read only under the lock.
                waiter.state.store(WITHDRAWN, Ordering::Relaxed);
                queue.live -= 1;
                self.publish_waiting(&queue);
                if queue.live == 0 {
                    queue.reset();
                    self.clear_waiters_flag();
                } else if queue.waiters.len() > 2 * queue.live + 16 {
                    // Tombstones are dropped lazily; compact when they dominate, so a storm of
                    // timeouts behind one long waiter cannot grow the queue without bound.
                    queue.waiters.retain(|w| w.state.load(Ordering::Relaxed) == WAITING);
                }
                false
            }
            _ => unreachable!("a waiter withdraws at most once"),
        }
    }

    /// Sets a new limit. Never waits for permits: growth adds free permits and serves
    /// queued waiters first; a shrink subtracts (available may go negative, a debt that
    /// releases pay back). `limit` must be ≤ `MAX_PERMITS`.
    pub(crate) fn set_limit(&self, limit: usize) {
        // Ordering: Relaxed — only feeds the CAS.
        let mut word = Word(self.state.load(Ordering::Relaxed));
        let new = loop {
            let delta = limit as i64 - word.limit() as i64;
            let new = Word::encode(word.available() + delta, limit, word.0 & (WAITERS | OBSERVED));
            // Ordering: AcqRel on success — Release so a caller admitted by the new permits
            // (its acquire CAS reads this value) also sees the configuration written before
            // this call; Acquire to build on the latest releases. Relaxed on failure: retry.
            match self.state.compare_exchange_weak(
                word.0,
                new.0,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => break new,
                Err(actual) => word = Word(actual),
            }
        };
        if new.has_waiters() && new.available() > 0 {
            self.release_slow();
        }
    }

    /// Raises the observed flag, for good: nothing clears it.
    pub(crate) fn set_observed(&self) {
        // Ordering: Relaxed — the observers' data is published by their own `OnceLock`s
        // (Release/Acquire); the flag only sends later calls to look. A call that happens
        // after this returns reads the word at or after this read-modify-write (coherence),
        // so it cannot miss the flag; being a read-modify-write, it continues the release
        // sequence of earlier releases (pair 1).
        self.state.fetch_or(OBSERVED, Ordering::Relaxed);
    }

    /// Clock helper: a deadline `wait` after `start`, `None` if unbounded.
    pub(crate) fn deadline(
        &self,
        start: crate::sync::Instant,
        wait: Duration,
    ) -> Option<crate::sync::Instant> {
        self.clock.deadline(start, wait)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_round_trips_negative_available() {
        let w = Word::encode(-3, 5, WAITERS);
        assert_eq!(w.available(), -3);
        assert_eq!(w.limit(), 5);
        assert!(w.has_waiters());
        assert!(!w.is_observed());
        assert_eq!(w.in_flight(), 8);
        let up = Word(w.0.wrapping_add(ONE_PERMIT * 4));
        assert_eq!(up.available(), 1);
        assert_eq!(up.limit(), 5);
    }

    #[test]
    fn word_max_limit_fits() {
        let w = Word::encode(-(MAX_PERMITS as i64), MAX_PERMITS, OBSERVED | WAITERS);
        assert_eq!(w.limit(), MAX_PERMITS);
        assert_eq!(w.available(), -(MAX_PERMITS as i64));
        assert!(w.is_observed());
        assert_eq!(w.in_flight(), 2 * MAX_PERMITS);
    }

    #[test]
    fn admits_newcomer_needs_free_permit_and_no_waiters() {
        assert!(Word::encode(1, 1, 0).admits_newcomer());
        assert!(!Word::encode(0, 1, 0).admits_newcomer());
        assert!(!Word::encode(-1, 1, 0).admits_newcomer());
        assert!(!Word::encode(1, 1, WAITERS).admits_newcomer());
        assert!(Word::encode(1, 1, OBSERVED).admits_newcomer());
    }
}

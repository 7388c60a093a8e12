//! The lock-free core: one atomic word, a FIFO waiter queue, and the grant/withdraw protocol.
//!
//! # The state word
//!
//! Everything the fast paths must agree on lives in one `AtomicU64`:
//!
//! | bits    | field       | meaning                                                        |
//! |---------|-------------|----------------------------------------------------------------|
//! | 0       | `WAITERS`   | releases must take the lock: a waiter is queued, or closed     |
//! | 1       | `CLOSED`    | `close` ran: every acquire is refused, for good                |
//! | 2..=31  | limit       | the current `max_concurrent_calls` (unsigned, ≤ 2^30 − 1)      |
//! | 32      | `OBSERVED`  | counters or a listener want to hear of every call (`tracing` asks its own max level) |
//! | 33..=63 | available   | free permits, **signed**: negative after a shrink (a debt)     |
//!
//! Keeping the limit and the flags in the word means a rejection reads exactly one atomic
//! and still knows the limit to report, whether the refusal is `Closed`, and whether to
//! count or emit an event. The two flags a newcomer must find clear are the two lowest bits,
//! so the fast path tests them with one small immediate. Adding or removing a permit is adding or
//! subtracting `ONE_PERMIT` (`1 << 33`): wrapping arithmetic on the top bits never touches
//! the low ones, and 31 signed bits hold ±(2^30 − 1), so the sign of `available` takes care
//! of itself.
//!
//! # Invariants
//!
//! * `in_flight == limit - available` at every instant (a permit granted to a queued waiter
//!   counts as in flight). Permits are never created or lost: `set_limit` moves `limit` and
//!   `available` by the same delta in one CAS, so `limit - available` is unchanged.
//! * Under the queue lock, between critical sections: `WAITERS` is set iff the queue holds a
//!   live waiter or `CLOSED` is set; with a waiter queued, `available < need` of the oldest
//!   waiter (`available <= 0` when it asks for one permit: every free permit that could
//!   serve it went to it). Once set, `CLOSED` is never cleared, and no waiter is queued
//!   after it.
//! * While `WAITERS` is set no fast path takes a permit: no barging past a queued waiter
//!   (a default caller that the queue would serve first, past a sheddable or lower-class
//!   waiter, takes held-back permits under the lock: `try_acquire_first`).
//! * **Work conservation** (design invariant 7): between critical sections, no queued
//!   waiter could be granted from the permits free (the next one, under its class, weight
//!   and headroom; nobody behind it is served first), and no queued waiter is one that can
//!   never be granted under the current limit. Whoever ends a wait (a drain, `close`, the
//!   waiter itself, the deadline timer, an eviction) leaves the queue so, without relying on
//!   any waiter's future being polled again. `Semaphore::check_work_conservation` checks it
//!   for the model checkers, the fuzzers and the soak.
//!
//! # Weighted requests
//!
//! A caller may ask for `n` permits at once (`need`, stored in its slot). The rules:
//!
//! * **All or nothing.** A waiter is granted its whole request in one CAS of `n` permits,
//!   never part of it. Free permits too few for the head stay in `available` (reserved for
//!   it: `WAITERS` keeps every fast path out) instead of accumulating in its slot, so a
//!   waiter that leaves (deadline, dropped future, `close`) holds nothing to give back, and
//!   no permit can be stranded in a dead slot. The price: metrics show those permits as
//!   available while the head waits for more.
//! * **Strict FIFO.** A drain serves the oldest waiter first and stops at the first one it
//!   cannot satisfy: a head waiting for 3 holds back a later waiter for 1.
//! * **A release of k serves every waiter it can, in order,** and wakes exactly those:
//!   the drain loops while the head's request fits in `available`.
//! * **Above the limit.** A request that can never be granted under its class (a weight
//!   above the limit; for a sheddable one, a weight above the limit less the headroom) is
//!   refused before it queues, under the lock. One that a shrink or a larger headroom left
//!   unable to fit is refused by the next drain wherever it stands in the queue (`Refused`,
//!   reported as `ExceedsLimit`; `Queue::max_required` bounds the queue's largest need, so
//!   the drain looks only when that bound is above the limit); `set_limit` asks for that
//!   drain on every shrink with waiters queued, `set_policy` on every change with waiters,
//!   and an enqueue whose flag-raising read-modify-write sees a limit that shrank after it
//!   looked drains too. Nothing waits behind, or beside, a request that cannot be granted.
//! * **Leaving the head.** When the head withdraws, the new head may fit the permits free
//!   (a weighted head held them back) or be above a shrunk limit: `withdraw` drains then.
//!   So does the deadline timer after it withdrew expired waiters ([`Expire::expire`]: the
//!   core holds the word beside the queue, so the timer reaches both), and a timed-out
//!   waiter that is never polled again owes nothing.
//!
//! # The rule: no foreign code under a lock
//!
//! A waker's `clone`, `wake` and `drop`, a listener, a user closure and a user value's `Drop`
//! are foreign code: they may call back into this semaphore, and with many executors the last
//! waker reference owns the task, its future and a permit inside (tokio's
//! `release_permits_at_drop`). None of them runs while the queue lock (or any lock of the
//! crate) is held. Concretely:
//!
//! * a waiter's [`Wake`] is built (the waker cloned) *before* the lock is taken, and handed
//!   back to be dropped *after* it is released when it was not queued;
//! * a re-poll with another waker clones it outside the lock, swaps it in under the lock,
//!   drops the old one after unlocking, then checks the slot again (the drop may have
//!   released a permit that went to this very waiter);
//! * a slot that is freed or withdrawn gives its wake back (`Queue::free` returns it) to be
//!   dropped after unlocking; grants, `close`, drains and the deadline timer take wakes out
//!   of the slots and call them after unlocking ([`WakeList`]);
//! * callers that hold a lock of their own (the config lock of `change_config`) ask for the
//!   waiters to be served (`serve_waiters`) after releasing it.
//!
//! `tests/reentrant.rs` and `verification/scenarios_reentrant.rs` hold the engine to it with
//! wakers and listeners that re-enter every public method on every queue path.
//!
//! # Protocol
//!
//! * **Acquire (fast):** load; if `WAITERS` is clear and `available >= n`, CAS
//!   `available - n`. A rejection is the single load.
//! * **Release:** `fetch_add(n * ONE_PERMIT)`. If the previous value had `WAITERS` set, take
//!   the lock and [`drain`](Semaphore::drain): move free permits to the oldest waiters.
//! * **Enqueue (slow acquire):** under the lock, take a permit if the queue is empty and one
//!   is free; otherwise set `WAITERS` (`fetch_or`), push the waiter and drain once, so a
//!   permit released between our load and the `fetch_or` (its releaser saw no flag and took
//!   no lock) is not stranded.
//! * **Waiters live in a slab.** A queued caller owns one slot of a `Vec` under the lock,
//!   addressed by index and generation ([`WaitKey`]); the FIFO is a doubly linked list
//!   threaded through the slots by index, so a withdrawal unlinks in O(1) and leaves no
//!   tombstone. Freed slots are reused, so after warm-up a wait allocates nothing; once no
//!   slot is in use the slab is emptied, and its memory returned if a storm grew it.
//! * **Grant / withdraw:** a waiter's fate is written under the lock exactly once: `Granted`
//!   by a drain (it now owns a permit), `Closed` by `close`, or withdrawn by the waiter
//!   itself (deadline passed, future dropped), which frees its slot. A waiter that comes to
//!   withdraw and finds `Granted` keeps the permit (sync: returns it as a success; async
//!   drop: releases it, which passes it on). Only the owner frees its slot.
//! * **Wake after unlock:** a drain collects the wakers (thread handles or task wakers) of
//!   the waiters it granted and calls them after releasing the lock. A task's waker is
//!   stored in its slot under the lock, so "register, then check" is one critical section:
//!   a grant either happened before the check (the poll sees it) or wakes the new waker.
//! * **Deadlines:** a bounded async waiter's deadline is stored in its slot; the queue asks
//!   the deadline timer (`crate::engine::timer`) to fire at its earliest deadline (the head's, while
//!   deadlines are in queue order: `Queue::ordered`), and [`Expire::expire`] withdraws
//!   what expired (`TimedOut`, decided under the lock like any other end of a wait), drains
//!   and re-arms for the next. A grant and an expiry race under the lock: exactly one
//!   happens.
//! * **Foreign panics:** a task's `wake` is called through `foreign::wake_task`, which
//!   contains its panic: whoever wakes (a release, `close`, a drain, the timer thread)
//!   finishes serving everyone else, and the panic is reported, not re-raised.
//! * **Close:** under the lock, `fetch_or(CLOSED | WAITERS)`, then every queued waiter is
//!   marked `Closed` and woken. `WAITERS` stays set, so every later release takes the lock;
//!   the release that leaves no call in flight completes the drain waiters.
//!
//! # Synchronizes-with pairs
//!
//! 1. `release_many`'s `fetch_add` (Release) → the successful acquire CAS (Acquire), in
//!    `try_acquire` or in `drain`: the previous holder's work happens-before the next one's.
//!    The `fetch_or`/`fetch_and` on `WAITERS` and the limit CAS are read-modify-writes, so
//!    they continue that release sequence instead of breaking it.
//! 2. The drain that grants a waiter does so under the queue lock, after its Acquire CAS;
//!    the waiter reads its slot under the same lock: chained with (1), the releaser's work
//!    happens-before the woken waiter's.
//! 3. Everything else about the queue (slots, wakers, `CLOSED` as read by the slow paths) is
//!    ordered by the queue mutex.
//! 4. "Drained": `wait_drained` and the drain that completes drain waiters read the word with
//!    Acquire, pairing with the Release `fetch_add` of the last release (`close`'s
//!    `fetch_or` continues its release sequence); the waiter reads its slot under the lock
//!    after that drain, so every finished call's writes happen-before its next step.
//!
//! # The harmless race
//!
//! A release that finds `WAITERS` set has already added its permit to `available`, so for a
//! moment `available > 0` while a waiter is queued. Nothing can take that permit: fast paths
//! refuse while `WAITERS` is set, and the releaser (or whoever holds the lock first) drains
//! it to the oldest waiter. Metrics read in that window see one available permit. (With a
//! weighted head the window lasts until the head's whole request is free: see above.)
//!
//! # Why one file
//!
//! About 2 000 lines, a quarter of them these docs and the unit tests. The word, the queue
//! and the protocol are one lock protocol: every invariant above names both the word's bits
//! and the queue (`WAITERS` is set iff a waiter is queued; a drain grants in one CAS what the
//! queue's head needs), and every path that changes one reads or writes the other under the
//! same lock, in an order the synchronizes-with pairs fix. Split, a reader checking a path
//! against the invariants would read two files at once, and the `Word`'s bit tricks would
//! be visible to code that is not bound by the protocol. What does stand apart is already
//! apart: the classes and queue order (`policy.rs`), the primitives (`sync.rs`), the deadline
//! timer (`timer.rs`), foreign calls (`foreign.rs`).

use std::sync::{Arc, Weak};
use std::task::Waker;

use crate::engine::pad::CachePadded;

use crate::engine::foreign::wake_task;
use crate::engine::policy::{Criticality, QueueOrder};
use crate::engine::sync::{
    AtomicU64, AtomicUsize, Clock, Instant, Mutex, MutexGuard, Ordering, Thread,
};
use crate::engine::timer::{Binding, Expire};

const WAITERS: u64 = 1;
const CLOSED: u64 = 1 << 1;
const LIMIT_SHIFT: u32 = 2;
const LIMIT_BITS: u32 = 30;
const LIMIT_MASK: u64 = ((1 << LIMIT_BITS) - 1) << LIMIT_SHIFT;
const OBSERVED: u64 = 1 << 32;
const AVAILABLE_SHIFT: u32 = 33;
const ONE_PERMIT: u64 = 1 << AVAILABLE_SHIFT;

/// The largest limit the state word can hold: 2^30 − 1.
pub(crate) const MAX_PERMITS: usize = (1 << LIMIT_BITS) - 1;

/// `n` permits as a delta of the state word. `n ≤ MAX_PERMITS + 1` keeps it in range; every
/// caller has checked `n` against the limit (≤ `MAX_PERMITS`) or holds `n` permits.
#[inline]
const fn permits(n: u32) -> u64 {
    (n as u64) << AVAILABLE_SHIFT
}

/// A decoded view of the state word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Word(u64);

impl Word {
    fn encode(available: i64, limit: usize, flags: u64) -> Word {
        debug_assert!(limit <= MAX_PERMITS);
        debug_assert!(available >= -(MAX_PERMITS as i64) && available <= MAX_PERMITS as i64);
        // `available` is stored two's complement in bits 33..=63 (31 bits hold ±(2^30 − 1));
        // the arithmetic shift in `available()` restores the sign.
        Word(((available as u64) << AVAILABLE_SHIFT) | ((limit as u64) << LIMIT_SHIFT) | flags)
    }

    /// Free permits; negative while a shrink's debt is unpaid.
    #[inline]
    pub(crate) fn available(self) -> i64 {
        // Arithmetic shift: keeps the sign of the top bits.
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

    /// Whether [`Semaphore::close`] ran.
    #[inline]
    pub(crate) fn is_closed(self) -> bool {
        self.0 & CLOSED != 0
    }

    #[inline]
    fn has_waiters(self) -> bool {
        self.0 & WAITERS != 0
    }

    /// Nobody queued and no shrink's debt: the next permit to come back would serve a
    /// caller that queued now (the retry estimate's common case, `observe::retry`).
    #[inline]
    pub(crate) fn serves_next_newcomer(self) -> bool {
        !self.has_waiters() && self.available() >= 0
    }

    /// No permit is free (`available` is zero) and nobody observes: the refusal that needs no
    /// bookkeeping, told apart from every other word by one unsigned comparison (the top 32
    /// bits are `available` and `OBSERVED`).
    #[inline]
    pub(crate) fn is_quiet_full(self) -> bool {
        self.0 < OBSERVED
    }

    /// A permit is free for a newcomer: open, nobody queued and `available > 0`.
    #[inline]
    fn admits_newcomer(self) -> bool {
        // `WAITERS` and `CLOSED` clear and available ≥ 1, in one mask and one signed
        // comparison: the word is ≥ ONE_PERMIT exactly when the top bits are ≥ 1.
        self.lets_newcomers_in() && self.has_free()
    }

    /// Open and nobody queued: a newcomer may take a free permit (with
    /// [`has_free`](Self::has_free), [`admits_newcomer`](Self::admits_newcomer)).
    #[inline]
    fn lets_newcomers_in(self) -> bool {
        self.0 & (WAITERS | CLOSED) == 0
    }

    /// `n` permits (1 ≤ `n` ≤ `MAX_PERMITS`) are free for a newcomer: open, nobody queued
    /// and `available >= n`.
    #[inline]
    fn admits_newcomer_many(self, n: u32) -> bool {
        debug_assert!(n >= 1 && n as usize <= MAX_PERMITS);
        self.0 & (WAITERS | CLOSED) == 0 && (self.0 as i64) >= permits(n) as i64
    }

    /// Whether a request for `n` permits is above the limit: it could never be granted. A
    /// request for 1 never is: a limit of 0 pauses the bulkhead, and plain acquires wait for
    /// growth there.
    #[inline]
    pub(crate) fn exceeds_limit(self, n: u32) -> bool {
        self.cannot_fit(i64::from(n))
    }

    /// Whether a waiter that needs `required` permits free (its request, plus the headroom
    /// for a sheddable one: `Queue::required`) could never be granted under this limit. As
    /// with [`exceeds_limit`](Self::exceeds_limit), needing 1 never is (a limit of 0
    /// pauses: such a waiter waits for growth).
    #[inline]
    fn cannot_fit(self, required: i64) -> bool {
        required > 1 && required > self.limit() as i64
    }

    /// Whether an acquire of `n` found `n` permits free but held back for queued waiters
    /// (a weighted next waiter needing more, a sheddable one leaving the headroom): open,
    /// `WAITERS` set and `available >= n`. A caller served before those waiters may take
    /// them under the lock (`Semaphore::try_acquire_first`).
    #[inline]
    pub(crate) fn holds_back(self, n: u32) -> bool {
        self.0 & (WAITERS | CLOSED) == WAITERS && self.available() >= i64::from(n)
    }

    /// At least one permit is free (`available >= 1`), whatever the flags: one signed
    /// comparison. A refusal that finds this (rare: the waiters flag or `CLOSED` refused it)
    /// looks further out of line ([`Semaphore::try_acquire_held_back`]).
    #[inline]
    pub(crate) fn has_free(self) -> bool {
        (self.0 as i64) >= ONE_PERMIT as i64
    }

    /// Calls in flight: `limit - available`, never negative.
    #[inline]
    pub(crate) fn in_flight(self) -> usize {
        let in_flight = self.limit() as i64 - self.available();
        usize::try_from(in_flight).unwrap_or(0)
    }
}

/// How a waiter is woken.
#[derive(Debug)]
pub(crate) enum Wake {
    Thread(Thread),
    Task(Waker),
}

impl Wake {
    /// The calling thread's wake. Built before the queue lock is taken, as every wake is:
    /// nothing foreign runs under the lock (see the module docs).
    pub(crate) fn thread() -> Wake {
        Wake::Thread(crate::engine::sync::current_thread())
    }

    /// A task's wake: a clone of `waker`, made before the queue lock is taken (a waker's
    /// `clone` is foreign code).
    pub(crate) fn task(waker: &Waker) -> Wake {
        Wake::Task(waker.clone())
    }

    /// Wakes the waiter. A task's `wake` is foreign code: its panic is contained here
    /// ([`wake_task`]), so whoever wakes (a release, `close`, the deadline timer, a drain)
    /// finishes serving everyone else.
    fn wake(self) {
        match self {
            Wake::Thread(thread) => thread.unpark(),
            Wake::Task(waker) => wake_task(waker),
        }
    }
}

/// The wake a drain collected under the queue lock, called after the lock is released so a
/// woken waiter never finds the lock still held by its waker. It holds one: a release grants
/// one waiter, and the rare drain that grants more (a limit raised, a close) unlocks and
/// wakes between grants.
#[derive(Debug, Default)]
struct WakeList {
    wake: Option<Wake>,
}

impl WakeList {
    fn is_full(&self) -> bool {
        self.wake.is_some()
    }

    fn push(&mut self, wake: Option<Wake>) {
        debug_assert!(!self.is_full());
        self.wake = wake;
    }

    /// Takes the wake collected last out, uncalled (the caller's own, found granted): the
    /// caller drops it after unlocking.
    fn take_last(&mut self) -> Option<Wake> {
        self.wake.take()
    }

    fn wake_all(&mut self) {
        if let Some(wake) = self.wake.take() {
            wake.wake();
        }
    }

    /// Calls the wake collected, consuming the list without its drop glue (the list is
    /// empty once its wake is taken, so its `Drop` would have nothing to deliver). Call it
    /// after unlocking.
    fn wake_all_and_forget(mut self) {
        let wake = self.wake.take();
        core::mem::forget(self);
        if let Some(wake) = wake {
            wake.wake();
        }
    }
}

impl Drop for WakeList {
    fn drop(&mut self) {
        // Only reached with a wake left if a panic unwound past `wake_all`: deliver it.
        self.wake_all();
    }
}

/// Releases the queue lock, then drops `garbage` (a wake, a waker: foreign code that may
/// re-enter the semaphore), and returns `value`.
fn unlock_then_drop<T, G>(queue: MutexGuard<'_, Queue>, garbage: G, value: T) -> T {
    drop(queue);
    drop(garbage);
    value
}

/// A slot's index and generation: the waiter's handle to its place in the queue.
///
/// The index is kept plus one, in a `NonZeroU32` (an index is never `NIL`, so it fits): an
/// `Option<WaitKey>` is then 8 bytes, which keeps an acquire future at 56 bytes with the
/// weighted request beside it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WaitKey {
    index_plus_one: core::num::NonZeroU32,
    generation: u32,
}

impl WaitKey {
    fn new(index: u32, generation: u32) -> WaitKey {
        match index.checked_add(1).and_then(core::num::NonZeroU32::new) {
            Some(index_plus_one) => WaitKey { index_plus_one, generation },
            None => unreachable!("a slot index is never NIL"),
        }
    }

    /// The slot's index in the slab.
    #[inline]
    fn index(self) -> u32 {
        self.index_plus_one.get() - 1
    }
}

/// The life of a slot. Only its owner (the waiter) frees it, so a key never outlives its
/// slot; the generation turns a misuse into a panic instead of a silent mix-up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SlotState {
    /// On the free list.
    Free,
    /// In the FIFO waiter list, waiting for a permit.
    Queued,
    /// In the drain list, waiting for a closed bulkhead to have no call in flight.
    DrainWait,
    /// Out of every list: a drain gave it a permit, which its owner now holds.
    Granted,
    /// Out of every list: `close` refused it.
    Closed,
    /// Out of every list: the bulkhead closed and drained.
    Drained,
    /// Out of every list: the deadline timer found its deadline passed.
    TimedOut,
    /// Out of every list: at the head of the queue, it asked for more permits than the
    /// (shrunk) limit.
    Refused,
    /// Out of every list: refused to make room for a newcomer served before it, or, under
    /// adaptive LIFO, older than the target while the queue stood (see `policy.rs`).
    Evicted,
}

impl SlotState {
    /// How the wait in this slot ended, or `None` while it is still waiting (in `waiters` or
    /// `drainers`). Never asked of a free slot (`Queue::slot` refuses those).
    fn outcome(self) -> Option<Outcome> {
        match self {
            SlotState::Queued | SlotState::DrainWait => None,
            SlotState::Granted => Some(Outcome::Granted),
            SlotState::Closed => Some(Outcome::Closed),
            SlotState::Drained => Some(Outcome::Drained),
            SlotState::TimedOut => Some(Outcome::TimedOut),
            SlotState::Refused => Some(Outcome::ExceedsLimit),
            SlotState::Evicted => Some(Outcome::Evicted),
            SlotState::Free => unreachable!("checked by `Queue::slot`"),
        }
    }
}

/// What a finished wait ended with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The waiter owns a permit.
    Granted,
    /// The bulkhead closed while the waiter was queued: no permit.
    Closed,
    /// A drain wait: the bulkhead is closed and no call is in flight.
    Drained,
    /// The deadline timer withdrew the waiter: its deadline passed, no permit.
    TimedOut,
    /// The limit shrank below the waiter's request while it was at the head: no permit.
    ExceedsLimit,
    /// The queue refused the waiter to make room, or for its age (see `QueueOrder`): no
    /// permit.
    Evicted,
}

const NIL: u32 = u32::MAX;

#[derive(Debug)]
struct Slot {
    generation: u32,
    state: SlotState,
    prev: u32,
    next: u32,
    wake: Option<Wake>,
    /// The permits this waiter asked for (≥ 1; `try_acquire` and friends ask for 1).
    need: u32,
    /// Its class: the waiter list it is in.
    class: Criticality,
    /// When it queued, under adaptive LIFO (the only order that ages waiters).
    since: Option<Instant>,
    /// The deadline the bulkhead's timer keeps for this waiter (bounded async waits only;
    /// a thread keeps its own, a custom sleep its own).
    deadline: Option<Instant>,
}

/// A doubly linked list threaded through the slab by index.
#[derive(Clone, Copy, Debug)]
struct List {
    head: u32,
    tail: u32,
}

impl List {
    const EMPTY: List = List { head: NIL, tail: NIL };
}

/// The list of drain waiters, after the three waiter lists (one per [`Criticality`]).
const DRAINERS: usize = Criticality::COUNT;

/// The waiter queue: a slab of slots reused after warm-up (no allocation per waiter), one
/// list of queued waiters per class (each in arrival order: head oldest, tail newest) and
/// the list of drain waiters, threaded through it. Guarded by the semaphore's mutex.
#[derive(Debug)]
struct Queue {
    slots: Vec<Slot>,
    /// Head of the free list (threaded through `next`).
    free: u32,
    /// `lists[c]` holds the queued waiters of class `c`; `lists[DRAINERS]` the drain waiters.
    lists: [List; Criticality::COUNT + 1],
    /// Slots in the waiter lists.
    live: usize,
    /// Slots not on the free list.
    in_use: usize,
    /// Slots in the waiter lists with a timer deadline.
    timed: usize,
    /// Whether the timed slots' deadlines never decrease in arrival order, so the first timed
    /// slot of each list has that list's earliest deadline. True with one max wait; a
    /// `change_config` that shortens the wait can break it until the timed slots are gone.
    ordered: bool,
    /// The latest deadline queued since the queue last had no timed slot.
    max_deadline: Option<Instant>,
    /// The earliest deadline the timer has been asked to fire for this queue, if any.
    armed: Option<Instant>,
    /// The order within a class.
    order: QueueOrder,
    /// Adaptive LIFO: the queue stands (serve newest first, evict waiters past the target).
    standing: bool,
    /// Adaptive LIFO, not standing: since when the oldest waiter has been older than the
    /// target; standing: since when no waiter has been (`None`: one is now).
    above_since: Option<Instant>,
    /// Permits a sheddable waiter must leave free (`sheddable_headroom`).
    headroom: u32,
    /// At least the largest `required` of a queued waiter (an upper bound: not lowered when
    /// waiters leave, only when [`Queue::pop_unfit`] finds nobody to refuse). While it is
    /// above the limit, the drain looks for waiters that can never be granted.
    max_required: i64,
    /// Bit `c` set: `lists[c]` holds a waiter (so finding the next waiter is one
    /// `trailing_zeros`, not a walk over the classes).
    occupied: u8,
    /// Whether the newest of a class is served first now (LIFO, or adaptive LIFO standing):
    /// kept up to date by `set_order` and `set_standing`.
    newest: bool,
    /// Whether the order is adaptive LIFO (`order.is_adaptive()`, kept by `set_order`): the
    /// one order that reads the clock when a waiter queues or a drain runs. A flag, so the
    /// other orders test one byte on the waiting path instead of decoding `order`.
    adaptive: bool,
}

impl Queue {
    /// Slots an empty queue keeps: enough for ordinary bursts without reallocating.
    const RETAINED_CAPACITY: usize = 64;

    const fn new() -> Queue {
        Queue {
            slots: Vec::new(),
            free: NIL,
            lists: [List::EMPTY; Criticality::COUNT + 1],
            live: 0,
            in_use: 0,
            timed: 0,
            ordered: true,
            max_deadline: None,
            armed: None,
            order: QueueOrder::Fifo,
            standing: false,
            above_since: None,
            headroom: 0,
            max_required: 0,
            occupied: 0,
            newest: false,
            adaptive: false,
        }
    }

    fn slot(&mut self, key: WaitKey) -> &mut Slot {
        let slot = &mut self.slots[key.index() as usize];
        assert!(
            slot.generation == key.generation && slot.state != SlotState::Free,
            "a bulkhead wait key outlived its slot"
        );
        slot
    }

    /// Whether the newest of a class is served first now.
    #[inline]
    fn newest_first(&self) -> bool {
        self.newest
    }

    /// Sets the order (and leaves any standing state).
    fn set_order(&mut self, order: QueueOrder) {
        self.order = order;
        self.adaptive = order.is_adaptive();
        self.set_standing(false);
        self.above_since = None;
    }

    /// Adaptive LIFO: the queue stands, or no longer does.
    fn set_standing(&mut self, standing: bool) {
        self.standing = standing;
        self.newest = match self.order {
            QueueOrder::Fifo => false,
            QueueOrder::Lifo => true,
            QueueOrder::AdaptiveLifo { .. } => standing,
        };
    }

    /// The waiter served next: the first of the highest class with anyone queued (oldest or
    /// newest, by the order); `NIL` if none.
    #[inline]
    fn next(&self) -> u32 {
        if self.occupied == 0 {
            return NIL;
        }
        self.next_in(self.first_list())
    }

    /// The list of the highest class with anyone queued. Some waiter must be queued.
    #[inline]
    fn first_list(&self) -> usize {
        debug_assert!(self.occupied != 0);
        self.occupied.trailing_zeros() as usize
    }

    /// The waiter of `list` served first (oldest or newest, by the order).
    #[inline]
    fn next_in(&self, list: usize) -> u32 {
        let list = &self.lists[list];
        if self.newest_first() {
            list.tail
        } else {
            list.head
        }
    }

    /// The waiter served last: the last of the lowest class with anyone queued; `NIL` if
    /// none.
    fn last_served(&self) -> u32 {
        if self.occupied == 0 {
            return NIL;
        }
        let list = &self.lists[7 - self.occupied.leading_zeros() as usize];
        if self.newest_first() {
            list.head
        } else {
            list.tail
        }
    }

    /// Whether a newcomer of `class` would be served before the queued waiter `index`.
    fn served_before(&self, class: Criticality, index: u32) -> bool {
        let queued = self.slots[index as usize].class;
        class < queued || (class == queued && self.newest_first())
    }

    /// A full queue and a newcomer of `class`: refuses the last-served waiter (`Evicted`) if
    /// the newcomer would be served before it, and returns its wake (to be called after
    /// unlocking); `None` if the newcomer is to be refused instead.
    #[cold]
    #[inline(never)]
    fn make_room(&mut self, class: Criticality) -> Option<Option<Wake>> {
        let last = self.last_served();
        if last == NIL || !self.served_before(class, last) {
            return None;
        }
        Some(self.end(last, SlotState::Evicted))
    }

    /// Whether a newcomer of `class` is served before everyone queued: nobody of a higher
    /// class is queued, and nobody of its own unless the newest is served first.
    fn newcomer_first(&self, class: Criticality) -> bool {
        let next = self.next();
        next == NIL || self.served_before(class, next)
    }

    /// The permits a waiter of `class` asking for `need` requires free: a sheddable one
    /// leaves the headroom.
    fn required(&self, need: u32, class: Criticality) -> i64 {
        self.required_in(need, class.index())
    }

    /// [`required`](Self::required) for a waiter of the class whose list is `list`.
    #[inline(always)]
    fn required_in(&self, need: u32, list: usize) -> i64 {
        let sheddable = list == Criticality::Sheddable.index();
        let headroom = if sheddable { self.headroom } else { 0 };
        i64::from(need) + i64::from(headroom)
    }

    /// Takes a slot (from the free list, or a new one) in `state`, linked at the back of
    /// its class's waiter list (`Queued`) or of the drain waiters (`DrainWait`).
    /// `deadline` (queued waiters only) is one the timer keeps. A reused slot keeps the
    /// `since` of its last waiter: only adaptive LIFO reads it, and under adaptive LIFO
    /// `enqueue` sets it for every waiter it queues (and `set_policy` for every slot when
    /// the order becomes adaptive).
    #[inline(always)]
    fn alloc(
        &mut self,
        state: SlotState,
        wake: Wake,
        deadline: Option<Instant>,
        need: u32,
        class: Criticality,
    ) -> WaitKey {
        let index = if self.free != NIL {
            let index = self.free;
            let slot = &mut self.slots[index as usize];
            self.free = slot.next;
            slot.generation = slot.generation.wrapping_add(1);
            slot.state = state;
            slot.wake = Some(wake);
            slot.need = need;
            slot.class = class;
            slot.deadline = deadline;
            index
        } else {
            let index = u32::try_from(self.slots.len())
                .ok()
                .filter(|&i| i != NIL)
                .expect("more than 2^32 - 1 waiters on one bulkhead");
            let slot = Slot {
                generation: 0,
                state,
                prev: NIL,
                next: NIL,
                wake: Some(wake),
                need,
                class,
                since: None,
                deadline,
            };
            self.slots.push(slot);
            index
        };
        self.in_use += 1;
        match state {
            SlotState::Queued => {
                self.link_back(class.index(), index);
                self.live += 1;
                self.max_required = self.max_required.max(self.required(need, class));
                if let Some(deadline) = deadline {
                    self.timed += 1;
                    if self.max_deadline.is_some_and(|latest| deadline < latest) {
                        self.ordered = false;
                    }
                    self.max_deadline = self.max_deadline.max(Some(deadline));
                }
            }
            SlotState::DrainWait => self.link_back(DRAINERS, index),
            _ => unreachable!("a new slot waits in a list"),
        }
        WaitKey::new(index, self.slots[index as usize].generation)
    }

    /// The list a waiting slot is in.
    fn list_of(&self, index: u32) -> usize {
        let slot = &self.slots[index as usize];
        match slot.state {
            SlotState::Queued => slot.class.index(),
            SlotState::DrainWait => DRAINERS,
            _ => unreachable!("only a waiting slot is in a list"),
        }
    }

    fn link_back(&mut self, list: usize, index: u32) {
        let tail = self.lists[list].tail;
        {
            let slot = &mut self.slots[index as usize];
            slot.prev = tail;
            slot.next = NIL;
        }
        if tail == NIL {
            self.lists[list].head = index;
            if list != DRAINERS {
                self.occupied |= 1 << list;
            }
        } else {
            self.slots[tail as usize].next = index;
        }
        self.lists[list].tail = index;
    }

    /// Takes a waiting slot out of its list (its state still says where it was).
    fn unlink(&mut self, index: u32) {
        self.unlink_from(self.list_of(index), index);
    }

    /// Takes a waiting slot out of `list`, the list it is in.
    #[inline]
    fn unlink_from(&mut self, list: usize, index: u32) {
        self.unlink_in(list, index, list != DRAINERS);
    }

    /// [`unlink_from`](Self::unlink_from), told whether `list` is a waiter list (not the
    /// drain waiters): the drain, which knows, tests nothing.
    #[inline(always)]
    fn unlink_in(&mut self, list: usize, index: u32, waiter: bool) {
        debug_assert_eq!(list, self.list_of(index));
        debug_assert_eq!(waiter, list != DRAINERS);
        let (prev, next) = {
            let slot = &self.slots[index as usize];
            (slot.prev, slot.next)
        };
        if prev == NIL {
            self.lists[list].head = next;
            if next == NIL && waiter {
                self.occupied &= !(1 << list);
            }
        } else {
            self.slots[prev as usize].next = next;
        }
        if next == NIL {
            self.lists[list].tail = prev;
        } else {
            self.slots[next as usize].prev = prev;
        }
        if waiter {
            self.live -= 1;
            if self.slots[index as usize].deadline.is_some() {
                self.timed -= 1;
                if self.timed == 0 {
                    self.ordered = true;
                    self.max_deadline = None;
                }
            }
        }
    }

    /// Takes the waiting slot `index` out of its list, sets its final `state` and returns
    /// its wake.
    fn end(&mut self, index: u32, state: SlotState) -> Option<Wake> {
        let list = self.list_of(index);
        self.end_in(list, index, state, list != DRAINERS)
    }

    /// [`end`](Self::end) for a slot known to be in `list` (`waiter`: a waiter list, not
    /// the drain waiters).
    #[inline(always)]
    fn end_in(&mut self, list: usize, index: u32, state: SlotState, waiter: bool) -> Option<Wake> {
        self.unlink_in(list, index, waiter);
        let slot = &mut self.slots[index as usize];
        slot.state = state;
        slot.wake.take()
    }

    /// Takes the first queued waiter whose timer deadline is at or before `now` out of the
    /// list, marks it `TimedOut` and returns its wake; `None` if no deadline has passed.
    fn pop_expired(&mut self, now: Instant) -> Option<Option<Wake>> {
        for list in 0..DRAINERS {
            let mut index = self.lists[list].head;
            while index != NIL {
                let slot = &self.slots[index as usize];
                let next = slot.next;
                match slot.deadline {
                    Some(deadline) if deadline <= now => {
                        return Some(self.end(index, SlotState::TimedOut));
                    }
                    // In order, so no later deadline of this list has passed either.
                    Some(_) if self.ordered => break,
                    _ => {}
                }
                index = next;
            }
        }
        None
    }

    /// The earliest timer deadline of a queued waiter.
    fn earliest_deadline(&self) -> Option<Instant> {
        let mut earliest: Option<Instant> = None;
        for list in &self.lists[..DRAINERS] {
            let mut index = list.head;
            while index != NIL && self.timed > 0 {
                let slot = &self.slots[index as usize];
                if let Some(deadline) = slot.deadline {
                    earliest = Some(earliest.map_or(deadline, |e| e.min(deadline)));
                    if self.ordered {
                        break;
                    }
                }
                index = slot.next;
            }
        }
        earliest
    }

    /// Takes the first slot of a list out of it, sets its final `state` and returns its
    /// wake, or `None` if the list is empty.
    fn pop_front(&mut self, list: usize, state: SlotState) -> Option<Option<Wake>> {
        let index = self.lists[list].head;
        if index == NIL {
            return None;
        }
        Some(self.end(index, state))
    }

    /// Takes the first queued waiter of any class out, as [`pop_front`](Self::pop_front).
    fn pop_any(&mut self, state: SlotState) -> Option<Option<Wake>> {
        (0..DRAINERS).find_map(|list| self.pop_front(list, state))
    }

    /// Takes the first queued waiter that can never be granted under `word`'s limit out of
    /// the queue (`Refused`, reported as `ExceedsLimit`) and returns its wake; `None` when
    /// there is none, after lowering `max_required` to the true largest `required`.
    ///
    /// Work conservation: a waiter that can never be granted (a weight above the limit, or
    /// above the limit less the headroom for a sheddable one) is refused wherever it stands
    /// in the queue, at once, not when it reaches the head; so it never holds up the waiters
    /// behind it, nor keeps `WAITERS` set against newcomers while slots are free.
    #[cold]
    #[inline(never)]
    fn pop_unfit(&mut self, word: Word) -> Option<Option<Wake>> {
        match self.scan_required(Some(word)) {
            (Some(index), _) => Some(self.end(index, SlotState::Refused)),
            (None, largest) => {
                self.max_required = largest;
                None
            }
        }
    }

    /// `max_required` made exact (after the headroom changed).
    fn recompute_max_required(&mut self) {
        self.max_required = self.scan_required(None).1;
    }

    /// Walks every queued waiter: the first (in class, then arrival order) that can never be
    /// granted under `word`'s limit, if a word is given, else none; and the largest
    /// `required` among those walked (all of them when none was found).
    fn scan_required(&self, word: Option<Word>) -> (Option<u32>, i64) {
        let mut largest = 0;
        for list in 0..DRAINERS {
            let mut index = self.lists[list].head;
            while index != NIL {
                let slot = &self.slots[index as usize];
                let required = self.required_in(slot.need, list);
                if word.is_some_and(|word| word.cannot_fit(required)) {
                    return (Some(index), required);
                }
                largest = largest.max(required);
                index = slot.next;
            }
        }
        (None, largest)
    }

    /// Adaptive LIFO, at `now`: samples the age of the oldest waiter (does the queue stand?)
    /// and, while it stands, takes out the first waiter older than the target (`Evicted`),
    /// returning its wake. `None` when nobody is to be evicted (or the order is not
    /// adaptive).
    ///
    /// The queue starts standing once its oldest waiter has stayed older than `target` for
    /// `interval`, and stops once no waiter has been older than `target` for `interval`
    /// (the same test, the other way): a queue that empties now and then under sustained
    /// overload (every waiter past the target refused) stays standing, instead of going
    /// back to FIFO and letting a new standing queue build for an interval.
    fn age(&mut self, now: Instant, clock: &Clock) -> Option<Option<Wake>> {
        let QueueOrder::AdaptiveLifo { target, interval } = self.order else { return None };
        let past = |since: Option<Instant>| {
            since.is_some_and(|since| since < now && clock.between(since, now) >= interval)
        };
        let older_than = |since: Option<Instant>| {
            since.is_some_and(|since| since < now && clock.between(since, now) > target)
        };
        let mut oldest_aged = NIL;
        for list in &self.lists[..DRAINERS] {
            if list.head != NIL && older_than(self.slots[list.head as usize].since) {
                oldest_aged = list.head;
                break;
            }
        }
        if self.standing {
            if oldest_aged == NIL {
                let since = *self.above_since.get_or_insert(now);
                if past(Some(since)) {
                    self.set_standing(false);
                    self.above_since = None;
                }
                return None;
            }
            self.above_since = None;
        } else {
            if oldest_aged == NIL {
                self.above_since = None;
                return None;
            }
            let since = *self.above_since.get_or_insert(now);
            if !past(Some(since)) {
                return None;
            }
            self.set_standing(true);
            self.above_since = None;
        }
        if oldest_aged == self.next() {
            // The only waiter left of the classes served first: served, not refused, so a
            // freed permit never sits idle while someone waits (work conserving).
            return None;
        }
        Some(self.end(oldest_aged, SlotState::Evicted))
    }

    /// The outcome if the wait in `key`'s slot ended (the slot is then freed), `None` while
    /// it is still waiting. Whoever ended the wait (a drain, `close`, the deadline timer) left
    /// the queue served, so a finished waiter owes nothing.
    #[inline(always)]
    fn finish(&mut self, key: WaitKey) -> Option<Outcome> {
        let outcome = self.slot(key).state.outcome()?;
        // A finished slot's wake was taken by whoever finished it.
        let wake = self.free(key);
        debug_assert!(wake.is_none(), "a finished slot keeps no wake");
        Some(outcome)
    }

    /// Returns a slot to the free list, and the wake it still held: the caller drops that
    /// after unlocking (a waker's `drop` is foreign code). Once no slot is in use, the slab is
    /// emptied, and its memory given back if a storm of waiters grew it past
    /// `RETAINED_CAPACITY`.
    #[must_use = "drop the wake after unlocking"]
    #[inline(always)]
    fn free(&mut self, key: WaitKey) -> Option<Wake> {
        let slot = self.slot(key);
        slot.state = SlotState::Free;
        slot.deadline = None;
        let wake = slot.wake.take();
        self.in_use -= 1;
        if self.in_use == 0 {
            if self.slots.capacity() > Self::RETAINED_CAPACITY {
                self.slots = Vec::new();
            } else {
                self.slots.clear();
            }
            self.free = NIL;
        } else {
            self.slots[key.index() as usize].next = self.free;
            self.free = key.index();
        }
        wake
    }
}

/// What `enqueue` decided.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Enqueued {
    /// A permit was free under the lock: the caller owns it and was not queued.
    Acquired,
    /// The caller is queued; wait for its outcome ([`Semaphore::poll_wait`]), or withdraw.
    Queued(WaitKey),
    /// The caller asked for more permits than the limit; it was not queued.
    ExceedsLimit,
    /// The queue is at its cap; the caller was not queued.
    TooManyWaiting,
    /// The semaphore is closed; the caller was not queued.
    Closed,
}

/// The counting semaphore under every bulkhead: a handle to its [`Core`], which the
/// deadline timer reaches through a `Weak` (so a withdrawal by the timer can serve the queue
/// as a withdrawal by the waiter itself would: it needs the state word as much as the queue).
#[derive(Debug)]
pub(crate) struct Semaphore(Arc<Core>);

impl core::ops::Deref for Semaphore {
    type Target = Core;

    #[inline(always)]
    fn deref(&self) -> &Core {
        &self.0
    }
}

/// The state word, the waiter queue and what the deadline timer needs beside them, behind an
/// `Arc` so the timer can hold a `Weak` to it: no strong reference to any bulkhead, and a
/// bulkhead that is dropped while the timer is armed for it costs the timer one failed
/// upgrade.
#[derive(Debug)]
pub(crate) struct Core {
    /// The state word; see the module docs. Padded so rejections, which only read it, do not
    /// share a cache line with the mutex or the configuration.
    state: CachePadded<AtomicU64>,
    /// The waiter queue.
    queue: Mutex<Queue>,
    /// `queue.live`, mirrored for lock-free metrics.
    waiting: AtomicUsize,
    /// The clock deadlines are measured on (the model clock under loom and shuttle).
    pub(crate) clock: Clock,
    /// `Queue::headroom`, mirrored for the sheddable fast path.
    headroom: AtomicUsize,
    /// This core, for the deadline timer (which holds it by a `Weak`).
    this: Weak<Core>,
    /// The timer its deadlines go to: the process's (`None`) or an embedder's. Read only
    /// when a deadline is armed, never on the fast paths.
    timer: Binding,
}

impl Core {
    fn publish_waiting(&self, queue: &Queue) {
        // Ordering: Relaxed — a metric mirror of `queue.live`.
        self.waiting.store(queue.live, Ordering::Relaxed);
    }

    /// After unlocking: asks the timer to fire at `at`, if `arm` said it must.
    fn schedule(&self, at: Option<Instant>) {
        if let Some(at) = at {
            let this: Weak<dyn Expire> = self.this.clone();
            crate::engine::timer::schedule(&self.timer, at, this);
        }
    }

    /// Under the lock: whether the timer must be asked to fire at `deadline` (earlier than
    /// what it already fires at for this queue); records it as armed if so.
    fn arm(queue: &mut Queue, deadline: Option<Instant>) -> Option<Instant> {
        let deadline = deadline?;
        if queue.armed.is_some_and(|armed| armed <= deadline) {
            return None;
        }
        queue.armed = Some(deadline);
        Some(deadline)
    }
}

impl Expire for Core {
    /// The timer fired for this queue at `fired`: withdraws every queued waiter whose timer
    /// deadline is at or before `now`, wakes each after unlocking, serves the queue as the
    /// waiters' own withdrawals would have, and asks the timer to fire again at the earliest
    /// deadline left.
    ///
    /// A waiter withdrawn here is out of the queue, so no drain can grant it; it finds
    /// `TimedOut` when it next polls, and owes nothing then. What its leaving changes is
    /// settled here, without its future: the drain below clears `WAITERS` if the queue is
    /// now empty, grants the new next waiter if the permits a weighted or sheddable head held
    /// back now suffice, and refuses it if it can never be granted (issue 29: a timed-out
    /// weighted head whose future was not polled again left slots idle while others waited).
    fn expire(&self, fired: Instant, now: Instant) {
        let mut queue = self.queue.lock();
        if queue.armed == Some(fired) {
            queue.armed = None;
        }
        let mut expired = false;
        while let Some(wake) = queue.pop_expired(now) {
            expired = true;
            self.publish_waiting(&queue);
            drop(queue);
            if let Some(wake) = wake {
                wake.wake();
            }
            queue = self.queue.lock();
        }
        let earliest = queue.earliest_deadline();
        let rearm = Self::arm(&mut queue, earliest);
        if expired {
            self.drain_and_wake(queue, &mut WakeList::default());
        } else {
            drop(queue);
        }
        self.schedule(rearm);
    }
}

impl Semaphore {
    /// A semaphore with `limit` permits, all free, whose deadlines go to `timer`. `limit`
    /// must be ≤ `MAX_PERMITS`.
    pub(crate) fn new(limit: usize, timer: Binding) -> Semaphore {
        Semaphore(Arc::new_cyclic(|this| Core {
            state: CachePadded::new(AtomicU64::new(Word::encode(limit as i64, limit, 0).0)),
            queue: Mutex::new(Queue::new()),
            waiting: AtomicUsize::new(0),
            clock: Clock::new(),
            headroom: AtomicUsize::new(0),
            this: this.clone(),
            timer,
        }))
    }
}

impl Core {
    /// The current word, for metrics and rejections.
    #[inline]
    pub(crate) fn load(&self) -> Word {
        // Ordering: Relaxed — a snapshot for metrics or a rejection; nothing is published
        // through it and nothing read after it depends on it.
        Word(self.state.load(Ordering::Relaxed))
    }

    /// Nothing in flight and nobody queued (or closed with nothing in flight), read with
    /// Acquire: when this says yes, every
    /// release so far happens-before what the caller does next. A keyed bulkhead evicts an
    /// idle key's semaphore on this answer, and the next caller of that key is admitted by a
    /// new semaphore, so that caller must see the last holder's writes through the eviction.
    ///
    /// A read-modify-write that changes nothing, not a load: a load may return a word older
    /// than the last release, and the word from before the last holder's acquire says
    /// "idle" too, with nothing to synchronize with (loom found this). An RMW reads the
    /// latest word. It runs only when a keyed bulkhead evicts, under the map's lock.
    pub(crate) fn is_idle_acquire(&self) -> bool {
        // Ordering: Acquire — pairs with the Release of `release_many`'s fetch_add (the last
        // holder's), so its protected writes happen-before the eviction and, through the
        // keyed map's lock, the next holder of the key.
        let word = Word(self.state.fetch_or(0, Ordering::Acquire));
        // Closed: `WAITERS` stays set for good, but nobody is queued (close refused them all).
        word.in_flight() == 0 && (!word.has_waiters() || word.is_closed())
    }

    /// Live waiters in the queue.
    pub(crate) fn waiting(&self) -> usize {
        // Ordering: Relaxed — a metric; written under the queue lock, read without it.
        self.waiting.load(Ordering::Relaxed)
    }

    /// Takes a permit if one is free for a newcomer. On failure returns the word it saw.
    ///
    /// A rejection is exactly one atomic load. Fails only when no permit is free for a
    /// newcomer (or the semaphore is closed), never because another thread changed the
    /// word first.
    #[inline]
    pub(crate) fn try_acquire(&self) -> Result<Word, Word> {
        // Ordering: Relaxed — a rejection consumes nothing; a success is decided (and
        // acquires) by the CAS below.
        let mut word = Word(self.state.load(Ordering::Relaxed));
        loop {
            if !word.admits_newcomer() {
                return Err(word);
            }
            // Ordering: Acquire on success — pairs with the Release `fetch_add` in `release_many`,
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

    /// After [`try_acquire`](Self::try_acquire) refused with `word`: takes a permit that is
    /// free but held back for queued waiters a default caller is served before (a sheddable
    /// one leaving the headroom, a lower class's weighted head), under the lock; otherwise
    /// `Err(word)`. For the refusal paths that refuse a non-waiting default caller (a zero
    /// max wait, `try_acquire`): a default call finds the headroom (issue 29). One inline
    /// test on the refusal; the lock only when permits are held back.
    #[inline]
    pub(crate) fn try_acquire_held_back(&self, word: Word) -> Result<Word, Word> {
        if word.has_free() {
            self.try_acquire_held_back_slow(word)
        } else {
            Err(word)
        }
    }

    /// [`try_acquire_held_back`](Self::try_acquire_held_back) for a caller that already saw
    /// a permit free (`Word::has_free`).
    #[cold]
    #[inline(never)]
    pub(crate) fn try_acquire_held_back_slow(&self, word: Word) -> Result<Word, Word> {
        if word.holds_back(1) {
            self.try_acquire_first(1, Criticality::Default)
        } else {
            Err(word)
        }
    }

    /// [`try_acquire`](Self::try_acquire) for a caller that builds a refusal error: the
    /// refusal is `refused(word, quiet)`, built on the path that decided it. `quiet` is true
    /// for the common refusal (no permit free, nobody observes), decided first, by one
    /// unsigned comparison, so that the error is built without testing any flag.
    ///
    /// The trade (callgrind, `benches/callgrind.rs`, issue 21): a refusal with its error
    /// kept costs 16 instructions instead of 24 (tokio's 21), one discarded 13 instead of
    /// 16, and a success 3 more (acquire + release 42 instead of 39; tokio's 125). `acquire`
    /// and `call`, which refuse only after their slow path, keep `try_acquire`.
    #[inline(always)]
    pub(crate) fn try_acquire_with<E>(
        &self,
        refused: impl FnOnce(Word, bool) -> E,
    ) -> Result<Word, E> {
        // Ordering: Relaxed — a rejection consumes nothing; a success is decided (and
        // acquires) by the CAS below.
        let mut word = Word(self.state.load(Ordering::Relaxed));
        if word.is_quiet_full() {
            return Err(refused(word, true));
        }
        loop {
            // `admits_newcomer` in two tests, the free permit first: an observed refusal
            // (no permit free) is then decided by one comparison, and a grant tests the same
            // two things as `admits_newcomer` does (callgrind, issue 33: the counted refusal
            // 65.5 -> 62.5, acquire + release 45 -> 44).
            if !word.has_free() {
                return Err(refused(word, false));
            }
            if !word.lets_newcomers_in() {
                // Free permits held back for queued waiters (a sheddable one leaving the
                // headroom, a weighted one), or closed: a default caller served before
                // those waiters takes one (issue 29: the headroom's docs promise default
                // calls find it); `try_acquire_held_back_slow` refuses a closed word.
                return self.try_acquire_held_back_slow(word).map_err(|word| refused(word, false));
            }
            // Ordering: as in `try_acquire` (Acquire on success pairs with the releases'
            // Release `fetch_add`; Relaxed on failure feeds only the retry).
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

    /// Takes `n` permits (1 ≤ `n` ≤ `MAX_PERMITS`) if they are free for a newcomer: as
    /// [`try_acquire`](Self::try_acquire), all or nothing. A rejection is one atomic load.
    #[inline]
    pub(crate) fn try_acquire_many(&self, n: u32) -> Result<Word, Word> {
        self.try_acquire_many_as(n, Criticality::Default)
    }

    /// [`try_acquire_many`](Self::try_acquire_many) for a caller of `class` (not
    /// sheddable: see [`try_acquire_sheddable`](Self::try_acquire_sheddable)): permits held
    /// back for queued waiters it is served before (a lower class, a sheddable waiter's
    /// headroom) are taken under the lock.
    #[inline]
    pub(crate) fn try_acquire_many_as(&self, n: u32, class: Criticality) -> Result<Word, Word> {
        match self.take_if(n, |word| word.admits_newcomer_many(n)) {
            Err(word) if word.holds_back(n) => self.try_acquire_first(n, class),
            taken => taken,
        }
    }

    /// Takes `n` permits in one CAS if `admits` says the word allows it; otherwise returns
    /// the word seen. A refusal is one load; a CAS that lost a race retries on the new word.
    #[inline(always)]
    fn take_if(&self, n: u32, admits: impl Fn(Word) -> bool) -> Result<Word, Word> {
        // Ordering: Relaxed — a rejection consumes nothing; a success is decided (and
        // acquires) by the CAS below.
        let mut word = Word(self.state.load(Ordering::Relaxed));
        loop {
            if !admits(word) {
                return Err(word);
            }
            // Ordering: Acquire on success — pairs with the Release `fetch_add`s of the
            // releases that freed these permits (pair 1). Relaxed on failure: retry only.
            match self.state.compare_exchange_weak(
                word.0,
                word.0.wrapping_sub(permits(n)),
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(word),
                Err(actual) => word = Word(actual),
            }
        }
    }

    /// Returns the `n` permits of one holder (0 for an empty permit: changes nothing). One
    /// read-modify-write when nobody waits; otherwise also hands the permits to the oldest
    /// waiters, as many as they satisfy, in order. Returns the word seen before the release.
    #[inline]
    pub(crate) fn release_many(&self, n: u32) -> Word {
        // Ordering: Release — pairs with the Acquire CAS that next takes these permits (in
        // `try_acquire` or `drain`), so our holder's work happens-before the next holder's.
        let prev = Word(self.state.fetch_add(permits(n), Ordering::Release));
        if prev.has_waiters() {
            self.release_slow();
        }
        prev
    }

    /// A release that found waiters: drains and wakes. The common case, one round that
    /// grants one waiter, is written out here (no call but the drain's, and no drop glue
    /// for the wake list: [`WakeList::wake_all_and_forget`]); more rounds go to
    /// [`drain_and_wake`](Self::drain_and_wake).
    #[cold]
    #[inline(never)]
    fn release_slow(&self) {
        let mut wakes = WakeList::default();
        let mut queue = self.queue.lock();
        if self.drain(&mut queue, &mut wakes) {
            drop(queue);
            wakes.wake_all();
            return self.drain_and_wake(self.queue.lock(), &mut wakes);
        }
        drop(queue);
        wakes.wake_all_and_forget();
    }

    /// Drains under `queue`, then wakes whom the drain granted after unlocking, as many
    /// rounds as the wake list needs.
    fn drain_and_wake<'a>(&'a self, mut queue: MutexGuard<'a, Queue>, wakes: &mut WakeList) {
        while self.drain(&mut queue, wakes) {
            drop(queue);
            wakes.wake_all();
            queue = self.queue.lock();
        }
        drop(queue);
        wakes.wake_all();
    }

    /// Under the lock: hands free permits to the oldest queued waiters (their wakes go to
    /// `wakes`), and once no waiter is left clears `WAITERS` (open) or, closed and with no
    /// call in flight, completes the drain waiters. Returns `true` if it stopped because
    /// `wakes` is full, with work left.
    fn drain(&self, queue: &mut Queue, wakes: &mut WakeList) -> bool {
        // Adaptive LIFO ages its waiters on this clock reading; the other orders read none.
        let now = queue.adaptive.then(|| self.clock.now());
        loop {
            if queue.live == 0 {
                // `close` sets CLOSED under this lock, so this load sees it if it happened.
                // Ordering: Acquire — pairs with the Release `fetch_add` of the last call's
                // `release_many` (directly, or through the release sequence that `close`'s
                // `fetch_or` continues): a drain waiter completed below sees every write of
                // every finished call, even one that released lock-free before `close`
                // (issue 29: a Relaxed load here let a drain waiter queued before `close`
                // return before the last call's writes were visible).
                let word = Word(self.state.load(Ordering::Acquire));
                if !word.is_closed() {
                    self.clear_waiters_flag();
                    return false;
                }
                if word.in_flight() > 0 {
                    return false;
                }
                while !wakes.is_full() {
                    match queue.pop_front(DRAINERS, SlotState::Drained) {
                        Some(wake) => wakes.push(wake),
                        None => return false,
                    }
                }
                return queue.lists[DRAINERS].head != NIL;
            }
            if wakes.is_full() {
                return true;
            }
            if queue.max_required > 1 {
                if let Some(wake) = self.refuse_unfit(queue) {
                    self.publish_waiting(queue);
                    wakes.push(wake);
                    continue;
                }
            }
            if let Some(now) = now {
                if let Some(wake) = queue.age(now, &self.clock) {
                    // A standing queue refuses a waiter past the target before serving.
                    self.publish_waiting(queue);
                    wakes.push(wake);
                    continue;
                }
            }
            // One class queued, the default (the common case): its list is known, and its
            // waiters leave no headroom.
            const DEFAULT: usize = Criticality::Default.index();
            let served = if queue.occupied == 1 << DEFAULT {
                self.serve_next(queue, DEFAULT)
            } else {
                self.serve_next(queue, queue.first_list())
            };
            let Some(wake) = served else { return false };
            wakes.push(wake);
            self.publish_waiting(queue);
        }
    }

    /// Under the lock, in the drain: the next waiter of `list` (the first list with anyone
    /// queued), its whole request granted at once or not at all (see the module docs); a
    /// sheddable one also leaves the headroom free. Returns its wake once it was granted;
    /// `None` when it cannot be served now (closed, or too few permits free), which stops
    /// the drain: nobody behind it is served first.
    #[inline(always)]
    fn serve_next(&self, queue: &mut Queue, list: usize) -> Option<Option<Wake>> {
        let next = queue.next_in(list);
        let need = queue.slots[next as usize].need;
        let required = queue.required_in(need, list);
        // Ordering: Relaxed — only feeds the CAS below, which acquires.
        let mut word = Word(self.state.load(Ordering::Relaxed));
        // A next waiter that can never fit was refused before this (`refuse_unfit`); one
        // that a shrink racing this drain made unfit cannot fit the free permits either
        // (they are at most the limit), and that shrink's own drain refuses it.
        loop {
            if word.is_closed() {
                return None; // closed: `close` refuses every waiter left, none is granted
            }
            if word.available() < required {
                return None; // in order: nobody behind the next waiter is served first
            }
            // Ordering: Acquire on success — pairs with the Release `fetch_add` of the
            // releases that freed these permits (pair 1). Relaxed on failure: retry only.
            match self.state.compare_exchange_weak(
                word.0,
                word.0.wrapping_sub(permits(need)),
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(actual) => word = Word(actual),
            }
        }
        Some(queue.end_in(list, next, SlotState::Granted, true))
    }

    /// Under the lock, in the drain, while some queued waiter may need more than the limit:
    /// refuses one that can never be granted now (see [`Queue::pop_unfit`]); `None` if none
    /// (or closed: `close` refuses them all).
    #[cold]
    #[inline(never)]
    fn refuse_unfit(&self, queue: &mut Queue) -> Option<Option<Wake>> {
        // Ordering: Relaxed — only the limit is read, under the lock; a `set_limit` whose CAS
        // this misses sees `WAITERS` and has the queue served again after it.
        let word = self.load();
        if word.is_closed() || queue.max_required <= word.limit() as i64 {
            return None;
        }
        queue.pop_unfit(word)
    }

    fn clear_waiters_flag(&self) {
        // Ordering: Relaxed — publishes nothing (the queue is under the lock); as a
        // read-modify-write it continues the release sequence of earlier releases, so a
        // fast-path acquirer that takes a permit freed before it still synchronizes with
        // that permit's releaser.
        self.state.fetch_and(!WAITERS, Ordering::Relaxed);
    }

    /// Under the lock: takes `need` permits for a newcomer that may go before every queued
    /// waiter (see `Queue::newcomer_first`), past the `WAITERS` flag, all or nothing,
    /// leaving `required - need` free. Fails (with the word seen) when closed or too few are
    /// free. The lock keeps the queue as the caller saw it; releases may only add permits
    /// meanwhile, and fast paths take none while `WAITERS` is set.
    fn take_first(&self, need: u32, required: i64) -> Result<Word, Word> {
        self.take_if(need, |word| !word.is_closed() && word.available() >= required)
    }

    /// A non-waiting acquire of a caller that may take permits held back for queued waiters
    /// it goes before (a critical caller, past lower classes): under the lock, takes `need`
    /// permits if it is served before every queued waiter and they are free. Called when the
    /// fast path found `WAITERS` set and `need` permits free.
    #[cold]
    #[inline(never)]
    pub(crate) fn try_acquire_first(&self, need: u32, class: Criticality) -> Result<Word, Word> {
        let queue = self.queue.lock();
        if !queue.newcomer_first(class) {
            return Err(self.load());
        }
        self.take_first(need, queue.required(need, class))
    }

    /// A non-waiting acquire of a sheddable caller: `need` permits if nobody is queued and
    /// the headroom stays free after them. One load on a refusal.
    #[inline]
    pub(crate) fn try_acquire_sheddable(&self, need: u32) -> Result<Word, Word> {
        let required = self.required_unlocked(need, Criticality::Sheddable);
        self.take_if(need, |word| word.0 & (WAITERS | CLOSED) == 0 && word.available() >= required)
    }

    /// [`Queue::required`] without the queue lock: `need`, plus the mirrored headroom for a
    /// sheddable caller.
    #[inline]
    fn required_unlocked(&self, need: u32, class: Criticality) -> i64 {
        let headroom = if class == Criticality::Sheddable {
            // Ordering: Relaxed — a setting, written under the queue lock by `set_policy`; a
            // caller racing a change may use the old or the new headroom.
            self.headroom.load(Ordering::Relaxed) as i64
        } else {
            0
        };
        i64::from(need) + headroom
    }

    /// Whether a request for `need` in `class` could never be granted under `word`'s limit
    /// (the test `enqueue` makes under the lock), for a refusal that is not queued: reads the
    /// mirrored headroom, takes no lock.
    pub(crate) fn request_cannot_fit(&self, word: Word, need: u32, class: Criticality) -> bool {
        word.cannot_fit(self.required_unlocked(need, class))
    }

    /// The slow acquire: under the lock, takes `need` free permits if the caller goes before
    /// everyone queued (see [`Criticality`] and [`QueueOrder`]), otherwise queues the waiter
    /// woken by `wake` (unless the queue is full and the caller would not be served before
    /// its last waiter, or closed). `deadline`, for a bounded async wait, is kept by the
    /// timer: when it passes, the waiter is withdrawn and woken, and finds
    /// [`Outcome::TimedOut`].
    ///
    /// `wake` is built by the caller before the lock is taken, and dropped after it is
    /// released if the caller was not queued: no foreign code runs under the lock. The wake
    /// of a waiter evicted to make room is called after the lock is released.
    #[inline(always)]
    pub(crate) fn enqueue(
        &self,
        wake: Wake,
        max_waiting: Option<usize>,
        deadline: Option<Instant>,
        need: u32,
        class: Criticality,
    ) -> Enqueued {
        debug_assert!(need >= 1);
        let queue = self.queue.lock();
        let required = queue.required(need, class);
        let taken = if queue.newcomer_first(class) {
            self.take_first(need, required)
        } else {
            Err(self.load())
        };
        match taken {
            Ok(_) => return unlock_then_drop(queue, wake, Enqueued::Acquired),
            // `close` sets CLOSED under this lock, so this load sees it.
            Err(word) if word.is_closed() => {
                return unlock_then_drop(queue, wake, Enqueued::Closed);
            }
            // Checked again under the lock: the limit may have shrunk since the caller looked.
            // A sheddable request is tested with the headroom it must leave: a request that
            // can never be granted is refused, never queued.
            Err(word) if word.cannot_fit(required) => {
                return unlock_then_drop(queue, wake, Enqueued::ExceedsLimit);
            }
            Err(_) => {}
        }
        if max_waiting.is_some_and(|max| queue.live >= max) {
            return self.enqueue_full(queue, wake, deadline, need, class);
        }
        self.push_waiter(queue, wake, deadline, need, class, None)
    }

    /// [`enqueue`](Self::enqueue) into a full queue: makes room by evicting its last-served
    /// waiter if the newcomer goes before it (the evicted waiter's wake is called after
    /// unlocking), or refuses the newcomer. Out of line: the common enqueue finds room.
    #[cold]
    #[inline(never)]
    fn enqueue_full(
        &self,
        mut queue: MutexGuard<'_, Queue>,
        wake: Wake,
        deadline: Option<Instant>,
        need: u32,
        class: Criticality,
    ) -> Enqueued {
        match queue.make_room(class) {
            Some(evicted) => self.push_waiter(queue, wake, deadline, need, class, evicted),
            None => unlock_then_drop(queue, wake, Enqueued::TooManyWaiting),
        }
    }

    /// Under the lock, with room in the queue: queues the waiter, and drains if a permit
    /// was free when `WAITERS` went up (or the order is adaptive). `evicted` is the wake of
    /// a waiter evicted to make room, called after unlocking.
    #[inline(always)]
    fn push_waiter(
        &self,
        mut queue: MutexGuard<'_, Queue>,
        wake: Wake,
        deadline: Option<Instant>,
        need: u32,
        class: Criticality,
        evicted: Option<Wake>,
    ) -> Enqueued {
        // Ordering: Relaxed — the flag publishes nothing by itself: a release that sees it
        // takes the lock we hold, which orders the queue. Being a read-modify-write, it is
        // totally ordered with every release's `fetch_add`: a release either comes before it
        // (its permit is in `available`, which the drain below finds) or sees the flag.
        let prev = Word(self.state.fetch_or(WAITERS, Ordering::Relaxed));
        let key = queue.alloc(SlotState::Queued, wake, deadline, need, class);
        self.publish_waiting(&queue);
        if queue.adaptive {
            // Its age, for adaptive LIFO (the only order that reads the clock here).
            queue.slots[key.index() as usize].since = Some(self.clock.now());
        } else if prev.available() <= 0 && !prev.cannot_fit(queue.max_required) {
            // No permit was free when the flag went up (the read-modify-write saw the latest
            // word), and every release from now on sees the flag and drains. (With permits
            // free but too few for the next waiter, the drain below finds that and grants
            // nobody.) Adaptive LIFO drains anyway, to age the queue. A limit that shrank
            // after `enqueue` looked but before the flag went up (its `set_limit` saw no
            // flag, so asks for no drain) shows in `prev`: the drain below refuses then.
            let arm = Core::arm(&mut queue, deadline);
            drop(queue);
            if let Some(evicted) = evicted {
                evicted.wake();
            }
            self.schedule(arm);
            return Enqueued::Queued(key);
        }
        self.drain_newcomer(queue, key, deadline, evicted)
    }

    /// The drain after queuing `key`, still under the lock that queued it (only this drain
    /// can end its wait): what `enqueue` returns.
    #[inline(never)]
    fn drain_newcomer(
        &self,
        mut queue: MutexGuard<'_, Queue>,
        key: WaitKey,
        deadline: Option<Instant>,
        evicted: Option<Wake>,
    ) -> Enqueued {
        let mut wakes = WakeList::default();
        let more = self.drain(&mut queue, &mut wakes);
        let state = queue.slot(key).state;
        // Our own wake, if the drain ended our wait: it is the last one the drain collected.
        // Dropped after unlocking, never called.
        let mut own = None;
        let ended = state.outcome();
        if ended.is_some() {
            own = wakes.take_last();
            let freed = queue.free(key);
            debug_assert!(freed.is_none(), "an ended slot's wake went to the drain");
        }
        let arm = if ended.is_some() { None } else { Core::arm(&mut queue, deadline) };
        if more {
            self.drain_and_wake(queue, &mut wakes);
        } else {
            drop(queue);
            wakes.wake_all();
        }
        if let Some(evicted) = evicted {
            evicted.wake();
        }
        drop(own);
        self.schedule(arm);
        match ended {
            None => Enqueued::Queued(key),
            Some(Outcome::Granted) => Enqueued::Acquired,
            Some(Outcome::ExceedsLimit) => Enqueued::ExceedsLimit,
            // Not `Evicted`: a waiter queued at `now` is never past the target (which is
            // above zero) at `now`, and a full queue evicts before, not after, queuing.
            Some(other) => unreachable!("a drain does not end a new wait with {other:?}"),
        }
    }

    /// Checks a queued wait. `None`: still waiting (`waker`, if given, replaces the task's
    /// registered waker unless it would wake the same task). `Some`: the wait is over and its
    /// slot freed; `Outcome::Granted` means the caller owns a permit.
    ///
    /// A new waker is cloned outside the lock and the one it replaces is dropped outside it:
    /// with many executors the last waker owns the task, its future and a permit inside, so
    /// dropping it may release into this very semaphore (tokio's `release_permits_at_drop`).
    /// After such a drop the slot is checked once more, so a permit that the drop released
    /// and passed to this waiter is seen at once.
    pub(crate) fn poll_wait(&self, key: WaitKey, waker: Option<&Waker>) -> Option<Outcome> {
        let mut queue = self.queue.lock();
        if let Some(done) = queue.finish(key) {
            return Some(unlock_then_drop(queue, (), done));
        }
        let waker = waker?;
        if matches!(&queue.slot(key).wake, Some(Wake::Task(current)) if current.will_wake(waker)) {
            // Registered under the lock that every grant takes: a grant either happened
            // before (seen above) or will wake this waker.
            return None;
        }
        drop(queue);
        let fresh = Wake::task(waker);
        let mut queue = self.queue.lock();
        if let Some(done) = queue.finish(key) {
            return Some(unlock_then_drop(queue, fresh, done));
        }
        let replaced = queue.slot(key).wake.replace(fresh);
        drop(queue);
        // The replaced waker may be the last owner of a permit of this semaphore.
        drop(replaced?);
        let mut queue = self.queue.lock();
        queue.finish(key)
    }

    /// Ends a wait early (deadline passed, future dropped). `None`: the waiter left the
    /// queue. `Some`: the wait had already ended (decided under the same lock); with
    /// `Outcome::Granted` the caller owns a permit and must use or release it.
    pub(crate) fn withdraw(&self, key: WaitKey) -> Option<Outcome> {
        let mut queue = self.queue.lock();
        let (outcome, owed) = match queue.slot(key).state {
            SlotState::Queued => {
                let was_next = queue.next() == key.index();
                queue.unlink(key.index());
                self.publish_waiting(&queue);
                if queue.live == 0 && !self.load().is_closed() {
                    self.clear_waiters_flag();
                }
                // The next waiter leaving: the new next may be served by the permits free (a
                // weighted or sheddable one held them back), or refused (above a shrunk
                // limit).
                (None, was_next && queue.live > 0)
            }
            SlotState::DrainWait => {
                queue.unlink(key.index());
                (None, false)
            }
            // Ended by a drain, `close` or the timer, which served the queue after it.
            ended => (ended.outcome(), false),
        };
        // The wake of a waiter that left on its own is dropped after unlocking.
        let wake = queue.free(key);
        if owed {
            self.drain_and_wake(queue, &mut WakeList::default());
        } else {
            drop(queue);
        }
        drop(wake);
        outcome
    }

    /// Closes the semaphore: from now on every acquire is refused, every queued waiter is
    /// refused and woken, and releases complete the drain waiters once no call is in flight.
    /// Returns `false` if it was already closed.
    pub(crate) fn close(&self) -> bool {
        let mut queue = self.queue.lock();
        // Ordering: Relaxed — publishes nothing: every reader that acts on CLOSED either
        // reads it under the queue lock we hold (enqueue, drain, withdraw) or only refuses
        // (fast paths). WAITERS stays set from now on, so every release takes the lock and
        // can complete the drain.
        let prev = Word(self.state.fetch_or(CLOSED | WAITERS, Ordering::Relaxed));
        if prev.is_closed() {
            return false;
        }
        let mut wakes = WakeList::default();
        loop {
            while !wakes.is_full() {
                match queue.pop_any(SlotState::Closed) {
                    Some(wake) => wakes.push(wake),
                    None => break,
                }
            }
            self.publish_waiting(&queue);
            if queue.live == 0 {
                break;
            }
            drop(queue);
            wakes.wake_all();
            queue = self.queue.lock();
        }
        self.drain_and_wake(queue, &mut wakes);
        true
    }

    /// Waits for the semaphore to be closed with no call in flight: `None` if it already
    /// is (and then every call that finished happens-before the caller's next step),
    /// otherwise the key of a drain wait to poll or withdraw, woken by `wake`.
    pub(crate) fn wait_drained(&self, wake: Wake) -> Option<WaitKey> {
        let mut queue = self.queue.lock();
        // Ordering: Acquire — pairs with the Release `fetch_add` of the last call's
        // `release_many` (and, through the release sequence, of every earlier one): a caller told
        // "drained" sees every write the finished calls made. The lock alone does not give
        // this: the last release takes the lock only after its `fetch_add`.
        let word = Word(self.state.load(Ordering::Acquire));
        if word.is_closed() && word.in_flight() == 0 {
            return unlock_then_drop(queue, wake, None);
        }
        Some(queue.alloc(SlotState::DrainWait, wake, None, 0, Criticality::Default))
    }

    /// Sets a new limit. Never waits for permits: growth adds free permits, which queued
    /// waiters are owed first; a shrink subtracts (available may go negative, a debt that
    /// releases pay back). `limit` must be ≤ `MAX_PERMITS`.
    ///
    /// Returns `true` when the caller must then call [`serve_waiters`](Self::serve_waiters)
    /// (new permits and queued waiters): the caller does so once it holds no lock of its
    /// own, since serving wakes waiters.
    #[must_use = "call `serve_waiters` when it returns true"]
    pub(crate) fn set_limit(&self, limit: usize) -> bool {
        // Ordering: Relaxed — only feeds the CAS.
        let mut word = Word(self.state.load(Ordering::Relaxed));
        let new = loop {
            let delta = limit as i64 - word.limit() as i64;
            let flags = word.0 & (WAITERS | OBSERVED | CLOSED);
            let new = Word::encode(word.available() + delta, limit, flags);
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
        // Growth serves queued waiters; a shrink may leave the head asking for more than the
        // new limit, which the drain refuses.
        new.has_waiters() && (new.available() > 0 || new.limit() < word.limit())
    }

    /// Sets the queue order and the sheddable headroom (≤ `MAX_PERMITS`). Returns `true`
    /// when waiters are queued: the caller then calls
    /// [`serve_waiters`](Self::serve_waiters) once it holds no lock of its own (a new order
    /// or a smaller headroom may let the next waiter in).
    #[must_use = "call `serve_waiters` when it returns true"]
    pub(crate) fn set_policy(&self, order: QueueOrder, headroom: usize) -> bool {
        let mut queue = self.queue.lock();
        if queue.order != order {
            queue.set_order(order);
            if order.is_adaptive() {
                // Waiters queued before have no age: they count from now.
                let now = self.clock.now();
                for slot in &mut queue.slots {
                    slot.since = Some(now);
                }
            }
        }
        queue.headroom = u32::try_from(headroom.min(MAX_PERMITS)).unwrap_or(u32::MAX);
        // A larger headroom may leave a sheddable waiter unable to fit: the drain that the
        // caller asks for refuses it.
        queue.recompute_max_required();
        // Ordering: Relaxed — a setting mirrored for the sheddable fast path; see
        // `try_acquire_sheddable`.
        self.headroom.store(headroom.min(MAX_PERMITS), Ordering::Relaxed);
        queue.live > 0
    }

    /// Hands free permits to queued waiters and wakes them (after a limit was raised).
    pub(crate) fn serve_waiters(&self) {
        self.release_slow();
    }

    /// Checks work conservation (design invariant 7), for a caller that knows nothing is in
    /// motion (no acquire, release, poll or timer fire running): the `WAITERS` flag is set
    /// only while someone waits (or closed), no queued waiter could be granted from the
    /// permits free (the next one, under its class, weight, headroom and the queue order;
    /// nobody behind it is served first), and no queued waiter is one that can never be
    /// granted under the current limit. `Err` describes the first violation found.
    pub(crate) fn check_work_conservation(&self) -> Result<(), String> {
        let queue = self.queue.lock();
        // A checker's read at quiescence: the caller's joins ordered everything before it.
        let word = self.load();
        if word.is_closed() {
            return match queue.live {
                0 => Ok(()),
                live => Err(format!("closed with {live} waiters still queued: {word:?}")),
            };
        }
        if word.has_waiters() != (queue.live > 0) {
            return Err(format!(
                "WAITERS is {} with {} waiters queued (available {}, limit {})",
                word.has_waiters(),
                queue.live,
                word.available(),
                word.limit()
            ));
        }
        if queue.live == 0 {
            return Ok(());
        }
        let next = &queue.slots[queue.next() as usize];
        let (need, class) = (next.need, next.class);
        let required = queue.required(need, class);
        if word.available() >= required {
            return Err(format!(
                "the next waiter (class {class:?}, needs {need}, {required} free with its \
                 headroom) waits while {} of {} permits are free",
                word.available(),
                word.limit()
            ));
        }
        if let (Some(index), required) = queue.scan_required(Some(word)) {
            let slot = &queue.slots[index as usize];
            return Err(format!(
                "a waiter of class {:?} needing {} ({required} with its headroom) is queued \
                 under a limit of {}: it can never be granted",
                slot.class,
                slot.need,
                word.limit()
            ));
        }
        Ok(())
    }

    /// The queue's slots in use: queued waiters and drain waits, and slots whose owner has
    /// not yet collected its outcome. For checkers, at quiescence (then it is the count of
    /// waits still queued).
    pub(crate) fn slots_in_use(&self) -> usize {
        self.queue.lock().in_use
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
        assert!(!Word::encode(1, 1, CLOSED).admits_newcomer());
        assert!(!Word::encode(MAX_PERMITS as i64, MAX_PERMITS, CLOSED).admits_newcomer());
    }

    #[test]
    fn closed_flag_survives_permit_arithmetic() {
        let w = Word::encode(-1, 3, CLOSED | WAITERS);
        assert!(w.is_closed());
        let up = Word(w.0.wrapping_add(ONE_PERMIT * 2));
        assert!(up.is_closed());
        assert_eq!((up.available(), up.limit(), up.in_flight()), (1, 3, 2));
        let down = Word(Word::encode(-(MAX_PERMITS as i64), MAX_PERMITS, 0).0);
        assert!(!down.is_closed());
        assert_eq!(down.available(), -(MAX_PERMITS as i64));
    }

    #[test]
    fn slab_reuses_slots_and_frees_after_a_storm() {
        let mut queue = Queue::new();
        let wake = || Wake::Task(futures_noop_waker());
        let keys: Vec<_> =
            (0..100).map(|_| queue.alloc(SlotState::Queued, wake(), None, 1, DEF)).collect();
        assert_eq!((queue.live, queue.in_use), (100, 100));
        for key in &keys[..99] {
            queue.unlink(key.index());
            drop(queue.free(*key));
        }
        assert_eq!(queue.lists[DEF.index()].head, keys[99].index());
        assert!(queue.slots.capacity() >= 100, "the last waiter keeps the slab");
        let again = queue.alloc(SlotState::Queued, wake(), None, 1, DEF);
        assert!(again.index() < 99, "a freed slot is reused");
        assert_ne!(again, keys[again.index() as usize], "with a new generation");
        for key in [keys[99], again] {
            queue.unlink(key.index());
            drop(queue.free(key));
        }
        assert_eq!((queue.live, queue.in_use, queue.slots.capacity()), (0, 0, 0));
    }

    const DEF: Criticality = Criticality::Default;

    /// Queues a waiter for `need` permits (none must be free for it).
    fn queue_waiter(sem: &Semaphore, need: u32) {
        let wake = Wake::Task(futures_noop_waker());
        assert!(matches!(sem.enqueue(wake, None, None, need, DEF), Enqueued::Queued(_)));
    }

    /// The work-conservation checker that every loom and shuttle scenario, the models and
    /// the soak rely on finds each violation it names, from states an engine bug would leave
    /// (made here by writing the word behind the engine's back); a checker that always
    /// answered `Ok` (cargo-mutants, shard 28/32) passes every test of a correct engine.
    #[test]
    fn the_work_conservation_checker_finds_each_violation() {
        // A waiter waits while its permit is free (a lost wake-up).
        let sem = Semaphore::new(1, None);
        assert!(sem.try_acquire().is_ok());
        queue_waiter(&sem, 1);
        assert_eq!(sem.check_work_conservation(), Ok(()));
        sem.state.fetch_add(ONE_PERMIT, Ordering::Relaxed);
        let err = sem.check_work_conservation().unwrap_err();
        assert!(err.contains("waits while 1 of 1 permits are free"), "{err}");
        // The same queue, closed without refusing its waiter.
        sem.state.fetch_sub(ONE_PERMIT, Ordering::Relaxed);
        sem.state.fetch_or(CLOSED, Ordering::Relaxed);
        let err = sem.check_work_conservation().unwrap_err();
        assert!(err.contains("closed with 1 waiters still queued"), "{err}");

        // The waiters flag up with nobody queued (newcomers held back for no one).
        let idle = Semaphore::new(2, None);
        assert_eq!(idle.check_work_conservation(), Ok(()));
        idle.state.fetch_or(WAITERS, Ordering::Relaxed);
        let err = idle.check_work_conservation().unwrap_err();
        assert!(err.contains("WAITERS is true with 0 waiters queued"), "{err}");

        // A request that a shrink left above the limit, not refused (its drain skipped).
        let shrunk = Semaphore::new(4, None);
        assert!(shrunk.try_acquire_many(4).is_ok());
        queue_waiter(&shrunk, 3);
        assert_eq!(shrunk.check_work_conservation(), Ok(()));
        assert!(shrunk.set_limit(2), "a shrink with a waiter asks for a drain");
        let err = shrunk.check_work_conservation().unwrap_err();
        assert!(
            err.contains("needing 3 (3 with its headroom) is queued under a limit of 2"),
            "{err}"
        );
        shrunk.serve_waiters();
        assert_eq!(shrunk.check_work_conservation(), Ok(()), "the drain refused it");
    }

    fn futures_noop_waker() -> Waker {
        struct Noop;
        impl std::task::Wake for Noop {
            fn wake(self: std::sync::Arc<Self>) {}
        }
        Waker::from(std::sync::Arc::new(Noop))
    }
}

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
//! * While `WAITERS` is set no fast path takes a permit: no barging past a queued waiter.
//!   `WAITERS` may stay set with an empty queue only while `available <= 0`, after the
//!   deadline timer withdrew the last waiter (it does not touch the word): the next release
//!   or growth takes the lock, finds the queue empty and clears it.
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
//! * **Above the limit.** A request above the limit is refused before it queues. A head
//!   whose request a shrink put above the limit is refused by the next drain (`Refused`,
//!   reported as `ExceedsLimit`); `set_limit` asks for that drain on every shrink with
//!   waiters queued, so nothing waits behind a request that cannot be granted.
//! * **Leaving the head.** When the head withdraws, the new head may fit the permits free
//!   (a weighted head held them back) or be above a shrunk limit: `withdraw` drains then.
//!   The deadline timer cannot reach the state word, so the drain owed for a waiter it
//!   withdrew is run by that waiter when it next looks at its slot (`poll_wait`,
//!   `withdraw`: the timer woke it), or by any release or growth before that.
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
//!   deadlines are in queue order: `Queue::ordered`), and [`Waitlist::expire`] withdraws
//!   what expired (`TimedOut`, decided under the lock like any other end of a wait) and
//!   re-arms for the next. A grant and an expiry race under the lock: exactly one happens.
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
//!
//! # The harmless race
//!
//! A release that finds `WAITERS` set has already added its permit to `available`, so for a
//! moment `available > 0` while a waiter is queued. Nothing can take that permit: fast paths
//! refuse while `WAITERS` is set, and the releaser (or whoever holds the lock first) drains
//! it to the oldest waiter. Metrics read in that window see one available permit. (With a
//! weighted head the window lasts until the head's whole request is free: see above.)

use std::sync::Arc;
use std::task::Waker;

use crossbeam_utils::CachePadded;

use crate::engine::sync::{
    AtomicU64, AtomicUsize, Clock, Instant, Mutex, MutexGuard, Ordering, Thread,
};

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

    /// A permit is free for a newcomer: open, nobody queued and `available > 0`.
    #[inline]
    fn admits_newcomer(self) -> bool {
        // `WAITERS` and `CLOSED` clear and available ≥ 1, in one mask and one signed
        // comparison: with `CLOSED` clear, the word is ≥ ONE_PERMIT exactly when the top
        // bits are ≥ 1.
        self.0 & (WAITERS | CLOSED) == 0 && (self.0 as i64) >= ONE_PERMIT as i64
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
        n > 1 && n as usize > self.limit()
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

    fn wake(self) {
        match self {
            Wake::Thread(thread) => thread.unpark(),
            Wake::Task(waker) => waker.wake(),
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

/// The waiter queue: a slab of slots reused after warm-up (no allocation per waiter), the
/// FIFO of queued waiters and the list of drain waiters threaded through it. Guarded by
/// the semaphore's mutex.
#[derive(Debug)]
struct Queue {
    slots: Vec<Slot>,
    /// Head of the free list (threaded through `next`).
    free: u32,
    waiters: List,
    drainers: List,
    /// Slots in `waiters`.
    live: usize,
    /// Slots not on the free list.
    in_use: usize,
    /// Slots in `waiters` with a timer deadline.
    timed: usize,
    /// Whether the timed slots' deadlines never decrease from head to tail, so the first
    /// timed slot has the earliest deadline. True for FIFO with one max wait; a
    /// `change_config` that shortens the wait can break it until the timed slots are gone.
    ordered: bool,
    /// The latest deadline queued since the queue last had no timed slot.
    max_deadline: Option<Instant>,
    /// The earliest deadline the timer has been asked to fire for this queue, if any.
    armed: Option<Instant>,
}

impl Queue {
    /// Slots an empty queue keeps: enough for ordinary bursts without reallocating.
    const RETAINED_CAPACITY: usize = 64;

    const fn new() -> Queue {
        Queue {
            slots: Vec::new(),
            free: NIL,
            waiters: List::EMPTY,
            drainers: List::EMPTY,
            live: 0,
            in_use: 0,
            timed: 0,
            ordered: true,
            max_deadline: None,
            armed: None,
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

    /// Takes a slot (from the free list, or a new one) in `state`, linked at the back of
    /// `waiters` or `drainers`.
    /// `deadline` (queued waiters only) is one the timer keeps.
    fn alloc(
        &mut self,
        state: SlotState,
        wake: Wake,
        deadline: Option<Instant>,
        need: u32,
    ) -> WaitKey {
        let index = if self.free != NIL {
            let index = self.free;
            let slot = &mut self.slots[index as usize];
            self.free = slot.next;
            slot.generation = slot.generation.wrapping_add(1);
            slot.state = state;
            slot.wake = Some(wake);
            slot.need = need;
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
                deadline,
            };
            self.slots.push(slot);
            index
        };
        self.in_use += 1;
        match state {
            SlotState::Queued => {
                self.link_back(true, index);
                self.live += 1;
                if let Some(deadline) = deadline {
                    self.timed += 1;
                    if self.max_deadline.is_some_and(|latest| deadline < latest) {
                        self.ordered = false;
                    }
                    self.max_deadline = self.max_deadline.max(Some(deadline));
                }
            }
            SlotState::DrainWait => self.link_back(false, index),
            _ => unreachable!("a new slot waits in a list"),
        }
        WaitKey::new(index, self.slots[index as usize].generation)
    }

    fn list(&mut self, waiters: bool) -> &mut List {
        if waiters {
            &mut self.waiters
        } else {
            &mut self.drainers
        }
    }

    fn link_back(&mut self, waiters: bool, index: u32) {
        let tail = self.list(waiters).tail;
        {
            let slot = &mut self.slots[index as usize];
            slot.prev = tail;
            slot.next = NIL;
        }
        if tail == NIL {
            self.list(waiters).head = index;
        } else {
            self.slots[tail as usize].next = index;
        }
        self.list(waiters).tail = index;
    }

    fn unlink(&mut self, waiters: bool, index: u32) {
        let (prev, next) = {
            let slot = &self.slots[index as usize];
            (slot.prev, slot.next)
        };
        if prev == NIL {
            self.list(waiters).head = next;
        } else {
            self.slots[prev as usize].next = next;
        }
        if next == NIL {
            self.list(waiters).tail = prev;
        } else {
            self.slots[next as usize].prev = prev;
        }
        if waiters {
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

    /// Takes the first queued waiter whose timer deadline is at or before `now` out of the
    /// list, marks it `TimedOut` and returns its wake; `None` if no deadline has passed.
    fn pop_expired(&mut self, now: Instant) -> Option<Option<Wake>> {
        let mut index = self.waiters.head;
        while index != NIL {
            let slot = &self.slots[index as usize];
            let next = slot.next;
            match slot.deadline {
                Some(deadline) if deadline <= now => {
                    self.unlink(true, index);
                    let slot = &mut self.slots[index as usize];
                    slot.state = SlotState::TimedOut;
                    return Some(slot.wake.take());
                }
                // In order, so no later deadline has passed either.
                Some(_) if self.ordered => return None,
                _ => {}
            }
            index = next;
        }
        None
    }

    /// The earliest timer deadline of a queued waiter.
    fn earliest_deadline(&self) -> Option<Instant> {
        let mut earliest = None;
        let mut index = self.waiters.head;
        while index != NIL && self.timed > 0 {
            let slot = &self.slots[index as usize];
            if let Some(deadline) = slot.deadline {
                if self.ordered {
                    return Some(deadline);
                }
                earliest = Some(earliest.map_or(deadline, |e: Instant| e.min(deadline)));
            }
            index = slot.next;
        }
        earliest
    }

    /// Takes the first slot of a list out of it, sets its final `state` and returns its
    /// wake, or `None` if the list is empty.
    fn pop_front(&mut self, waiters: bool, state: SlotState) -> Option<Option<Wake>> {
        let index = self.list(waiters).head;
        if index == NIL {
            return None;
        }
        self.unlink(waiters, index);
        let slot = &mut self.slots[index as usize];
        slot.state = state;
        Some(slot.wake.take())
    }

    /// The request of the oldest queued waiter. The waiter list must not be empty.
    fn head_need(&self) -> u32 {
        debug_assert!(self.waiters.head != NIL);
        self.slots[self.waiters.head as usize].need
    }

    /// The outcome if the wait in `key`'s slot ended (the slot is then freed), `None` while
    /// it is still waiting; and whether the queue owes a drain: a waiter that the timer
    /// withdrew may have been the head, and the timer (it cannot reach the state word) left
    /// the new head unserved (a weighted head may have held back permits free for it) or
    /// unrefused (above a shrunk limit), and `WAITERS` set if the queue is empty.
    fn finish(&mut self, key: WaitKey) -> Option<(Outcome, bool)> {
        let outcome = self.slot(key).state.outcome()?;
        let owed = outcome == Outcome::TimedOut;
        // A finished slot's wake was taken by whoever finished it.
        let wake = self.free(key);
        debug_assert!(wake.is_none(), "a finished slot keeps no wake");
        Some((outcome, owed))
    }

    /// Returns a slot to the free list, and the wake it still held: the caller drops that
    /// after unlocking (a waker's `drop` is foreign code). Once no slot is in use, the slab is
    /// emptied, and its memory given back if a storm of waiters grew it past
    /// `RETAINED_CAPACITY`.
    #[must_use = "drop the wake after unlocking"]
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

/// The counting semaphore under every bulkhead.
#[derive(Debug)]
pub(crate) struct Semaphore {
    /// The state word; see the module docs. Padded so rejections, which only read it, do not
    /// share a cache line with the mutex or the configuration.
    state: CachePadded<AtomicU64>,
    /// The waiter queue, shared with the deadline timer (which holds it by a `Weak`).
    list: Arc<Waitlist>,
    /// The clock deadlines are measured on (the model clock under loom and shuttle).
    pub(crate) clock: Clock,
}

/// The queue and what the deadline timer needs beside it, behind an `Arc` so the timer can
/// hold a `Weak` to it: no strong reference to any bulkhead, and a bulkhead that is dropped
/// while the timer is armed for it costs the timer one failed upgrade.
#[derive(Debug)]
pub(crate) struct Waitlist {
    queue: Mutex<Queue>,
    /// `queue.live`, mirrored for lock-free metrics.
    waiting: AtomicUsize,
}

impl Waitlist {
    fn publish_waiting(&self, queue: &Queue) {
        // Ordering: Relaxed — a metric mirror of `queue.live`.
        self.waiting.store(queue.live, Ordering::Relaxed);
    }

    /// The timer fired for this queue at `fired`: withdraws every queued waiter whose timer
    /// deadline is at or before `now`, wakes each after unlocking, and asks the timer to fire
    /// again at the earliest deadline left.
    ///
    /// A waiter withdrawn here is out of the queue, so no drain can grant it; it finds
    /// `TimedOut` when it next polls. If it was the last waiter, `WAITERS` stays set (the
    /// timer does not reach the state word): harmless, because with a waiter queued
    /// `available <= 0`, so no permit is free for a fast path to miss, and the next release
    /// or growth takes the lock, finds the queue empty and clears the flag. A weighted waiter
    /// withdrawn here may leave permits free (fewer than it asked for) with `WAITERS` set:
    /// every waiter withdrawn here runs the drain it owes when it finds `TimedOut` (see
    /// "Weighted requests").
    pub(crate) fn expire(self: &Arc<Self>, fired: Instant, now: Instant) {
        let mut queue = self.queue.lock();
        if queue.armed == Some(fired) {
            queue.armed = None;
        }
        while let Some(wake) = queue.pop_expired(now) {
            self.publish_waiting(&queue);
            drop(queue);
            if let Some(wake) = wake {
                wake.wake();
            }
            queue = self.queue.lock();
        }
        let earliest = queue.earliest_deadline();
        let rearm = Self::arm(&mut queue, earliest);
        drop(queue);
        self.schedule(rearm);
    }

    /// After unlocking: asks the timer to fire at `at`, if `arm` said it must.
    fn schedule(self: &Arc<Self>, at: Option<Instant>) {
        if let Some(at) = at {
            crate::engine::timer::schedule(at, Arc::downgrade(self));
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

impl Semaphore {
    /// A semaphore with `limit` permits, all free. `limit` must be ≤ `MAX_PERMITS`.
    pub(crate) fn new(limit: usize) -> Semaphore {
        Semaphore {
            state: CachePadded::new(AtomicU64::new(Word::encode(limit as i64, limit, 0).0)),
            list: Arc::new(Waitlist {
                queue: Mutex::new(Queue::new()),
                waiting: AtomicUsize::new(0),
            }),
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

    /// Nothing in flight and nobody queued, read with Acquire: when this says yes, every
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
        word.in_flight() == 0 && !word.has_waiters()
    }

    /// Live waiters in the queue.
    pub(crate) fn waiting(&self) -> usize {
        // Ordering: Relaxed — a metric; written under the queue lock, read without it.
        self.list.waiting.load(Ordering::Relaxed)
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

    /// Takes `n` permits (1 ≤ `n` ≤ `MAX_PERMITS`) if they are free for a newcomer: as
    /// [`try_acquire`](Self::try_acquire), all or nothing. A rejection is one atomic load.
    #[inline]
    pub(crate) fn try_acquire_many(&self, n: u32) -> Result<Word, Word> {
        // Ordering: Relaxed — a rejection consumes nothing; a success is decided (and
        // acquires) by the CAS below.
        let mut word = Word(self.state.load(Ordering::Relaxed));
        loop {
            if !word.admits_newcomer_many(n) {
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

    #[cold]
    #[inline(never)]
    fn release_slow(&self) {
        let mut wakes = WakeList::default();
        self.drain_and_wake(self.list.queue.lock(), &mut wakes);
    }

    /// Drains under `queue`, then wakes whom the drain granted after unlocking, as many
    /// rounds as the wake list needs.
    fn drain_and_wake<'a>(&'a self, mut queue: MutexGuard<'a, Queue>, wakes: &mut WakeList) {
        while self.drain(&mut queue, wakes) {
            drop(queue);
            wakes.wake_all();
            queue = self.list.queue.lock();
        }
        drop(queue);
        wakes.wake_all();
    }

    /// Under the lock: hands free permits to the oldest queued waiters (their wakes go to
    /// `wakes`), and once no waiter is left clears `WAITERS` (open) or, closed and with no
    /// call in flight, completes the drain waiters. Returns `true` if it stopped because
    /// `wakes` is full, with work left.
    fn drain(&self, queue: &mut Queue, wakes: &mut WakeList) -> bool {
        loop {
            if queue.live == 0 {
                // `close` sets CLOSED under this lock, so this load sees it if it happened.
                let word = self.load();
                if !word.is_closed() {
                    self.clear_waiters_flag();
                    return false;
                }
                if word.in_flight() > 0 {
                    return false;
                }
                while !wakes.is_full() {
                    match queue.pop_front(false, SlotState::Drained) {
                        Some(wake) => wakes.push(wake),
                        None => return false,
                    }
                }
                return queue.drainers.head != NIL;
            }
            if wakes.is_full() {
                return true;
            }
            // The head's whole request, granted at once or not at all (see the module docs).
            let need = queue.head_need();
            // Ordering: Relaxed — only feeds the CAS below, which acquires.
            let mut word = Word(self.state.load(Ordering::Relaxed));
            let end = loop {
                if word.is_closed() {
                    return false; // closed: `close` refuses every waiter left, none is granted
                }
                if word.exceeds_limit(need) {
                    // A shrink left the head asking for more than the limit: refused, so it
                    // does not hold the queue up until the limit grows back.
                    break SlotState::Refused;
                }
                if word.available() < i64::from(need) {
                    return false; // FIFO: nobody behind the head is served before it
                }
                // Ordering: Acquire on success — pairs with the Release `fetch_add` of the
                // releases that freed these permits (pair 1). Relaxed on failure: retry only.
                match self.state.compare_exchange_weak(
                    word.0,
                    word.0.wrapping_sub(permits(need)),
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => break SlotState::Granted,
                    Err(actual) => word = Word(actual),
                }
            };
            let Some(wake) = queue.pop_front(true, end) else {
                unreachable!("live > 0, so the waiter list is not empty");
            };
            self.list.publish_waiting(queue);
            wakes.push(wake);
        }
    }

    fn clear_waiters_flag(&self) {
        // Ordering: Relaxed — publishes nothing (the queue is under the lock); as a
        // read-modify-write it continues the release sequence of earlier releases, so a
        // fast-path acquirer that takes a permit freed before it still synchronizes with
        // that permit's releaser.
        self.state.fetch_and(!WAITERS, Ordering::Relaxed);
    }

    /// The slow acquire: under the lock, takes a free permit if nobody is queued, otherwise
    /// queues the waiter woken by `wake` (unless `max_waiting` live waiters are already
    /// queued, or closed). `deadline`, for a bounded async wait, is kept by the timer: when
    /// it passes, the waiter is withdrawn and woken, and finds [`Outcome::TimedOut`].
    ///
    /// `wake` is built by the caller before the lock is taken, and dropped after it is
    /// released if the caller was not queued: no foreign code runs under the lock.
    pub(crate) fn enqueue(
        &self,
        wake: Wake,
        max_waiting: Option<usize>,
        deadline: Option<Instant>,
        need: u32,
    ) -> Enqueued {
        debug_assert!(need >= 1);
        let mut queue = self.list.queue.lock();
        match self.try_acquire_many(need) {
            Ok(_) => return unlock_then_drop(queue, wake, Enqueued::Acquired),
            // `close` sets CLOSED under this lock, so the load in `try_acquire` sees it.
            Err(word) if word.is_closed() => {
                return unlock_then_drop(queue, wake, Enqueued::Closed);
            }
            // Checked again under the lock: the limit may have shrunk since the caller looked.
            Err(word) if word.exceeds_limit(need) => {
                return unlock_then_drop(queue, wake, Enqueued::ExceedsLimit);
            }
            Err(_) => {}
        }
        if max_waiting.is_some_and(|max| queue.live >= max) {
            return unlock_then_drop(queue, wake, Enqueued::TooManyWaiting);
        }
        // Ordering: Relaxed — the flag publishes nothing by itself: a release that sees it
        // takes the lock we hold, which orders the queue. Being a read-modify-write, it is
        // totally ordered with every release's `fetch_add`: a release either comes before it
        // (its permit is in `available`, which the drain below finds) or sees the flag.
        let prev = Word(self.state.fetch_or(WAITERS, Ordering::Relaxed));
        let key = queue.alloc(SlotState::Queued, wake, deadline, need);
        self.list.publish_waiting(&queue);
        if prev.available() <= 0 {
            // No permit was free when the flag went up (the read-modify-write saw the latest
            // word), and every release from now on sees the flag and drains. (With permits
            // free but too few for the head, the drain below finds that and grants nobody.)
            let arm = Waitlist::arm(&mut queue, deadline);
            drop(queue);
            self.list.schedule(arm);
            return Enqueued::Queued(key);
        }
        let mut wakes = WakeList::default();
        let more = self.drain(&mut queue, &mut wakes);
        let granted = queue.slot(key).state == SlotState::Granted;
        // Our own wake, if the drain granted us: we are last in line, so it is the last one
        // the drain collected. Dropped after unlocking, never called.
        let mut own = None;
        if granted {
            own = wakes.take_last();
            let freed = queue.free(key);
            debug_assert!(freed.is_none(), "a granted slot's wake went to the drain");
        }
        let arm = if granted { None } else { Waitlist::arm(&mut queue, deadline) };
        if more {
            self.drain_and_wake(queue, &mut wakes);
        } else {
            drop(queue);
            wakes.wake_all();
        }
        drop(own);
        self.list.schedule(arm);
        if granted {
            Enqueued::Acquired
        } else {
            Enqueued::Queued(key)
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
        let mut queue = self.list.queue.lock();
        if let Some(done) = queue.finish(key) {
            return Some(self.finished(queue, done));
        }
        let waker = waker?;
        if matches!(&queue.slot(key).wake, Some(Wake::Task(current)) if current.will_wake(waker)) {
            // Registered under the lock that every grant takes: a grant either happened
            // before (seen above) or will wake this waker.
            return None;
        }
        drop(queue);
        let fresh = Wake::task(waker);
        let mut queue = self.list.queue.lock();
        if let Some(done) = queue.finish(key) {
            let outcome = self.finished(queue, done);
            drop(fresh);
            return Some(outcome);
        }
        let replaced = queue.slot(key).wake.replace(fresh);
        drop(queue);
        // The replaced waker may be the last owner of a permit of this semaphore.
        drop(replaced?);
        let mut queue = self.list.queue.lock();
        let done = queue.finish(key)?;
        Some(self.finished(queue, done))
    }

    /// A finished wait, found under `queue`: unlocks, after serving the waiters behind a
    /// weighted waiter that the timer withdrew (`owed`), and returns the outcome.
    fn finished(&self, queue: MutexGuard<'_, Queue>, (outcome, owed): (Outcome, bool)) -> Outcome {
        if owed {
            self.drain_and_wake(queue, &mut WakeList::default());
        } else {
            drop(queue);
        }
        outcome
    }

    /// Ends a wait early (deadline passed, future dropped). `None`: the waiter left the
    /// queue. `Some`: the wait had already ended (decided under the same lock); with
    /// `Outcome::Granted` the caller owns a permit and must use or release it.
    pub(crate) fn withdraw(&self, key: WaitKey) -> Option<Outcome> {
        let mut queue = self.list.queue.lock();
        let (outcome, owed) = match queue.slot(key).state {
            SlotState::Queued => {
                let was_head = queue.waiters.head == key.index();
                queue.unlink(true, key.index());
                self.list.publish_waiting(&queue);
                if queue.live == 0 && !self.load().is_closed() {
                    self.clear_waiters_flag();
                }
                // The head leaving: the new head may be served by the permits free (a
                // weighted head held them back), or refused (above a shrunk limit).
                (None, was_head && queue.live > 0)
            }
            SlotState::DrainWait => {
                queue.unlink(false, key.index());
                (None, false)
            }
            ended => (ended.outcome(), ended == SlotState::TimedOut),
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
        let mut queue = self.list.queue.lock();
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
                match queue.pop_front(true, SlotState::Closed) {
                    Some(wake) => wakes.push(wake),
                    None => break,
                }
            }
            self.list.publish_waiting(&queue);
            if queue.live == 0 {
                break;
            }
            drop(queue);
            wakes.wake_all();
            queue = self.list.queue.lock();
        }
        self.drain_and_wake(queue, &mut wakes);
        true
    }

    /// Waits for the semaphore to be closed with no call in flight: `None` if it already
    /// is (and then every call that finished happens-before the caller's next step),
    /// otherwise the key of a drain wait to poll or withdraw, woken by `wake`.
    pub(crate) fn wait_drained(&self, wake: Wake) -> Option<WaitKey> {
        let mut queue = self.list.queue.lock();
        // Ordering: Acquire — pairs with the Release `fetch_add` of the last call's
        // `release_many` (and, through the release sequence, of every earlier one): a caller told
        // "drained" sees every write the finished calls made. The lock alone does not give
        // this: the last release takes the lock only after its `fetch_add`.
        let word = Word(self.state.load(Ordering::Acquire));
        if word.is_closed() && word.in_flight() == 0 {
            return unlock_then_drop(queue, wake, None);
        }
        Some(queue.alloc(SlotState::DrainWait, wake, None, 0))
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

    /// Hands free permits to queued waiters and wakes them (after a limit was raised).
    pub(crate) fn serve_waiters(&self) {
        self.release_slow();
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
            (0..100).map(|_| queue.alloc(SlotState::Queued, wake(), None, 1)).collect();
        assert_eq!((queue.live, queue.in_use), (100, 100));
        for key in &keys[..99] {
            queue.unlink(true, key.index());
            drop(queue.free(*key));
        }
        assert_eq!(queue.waiters.head, keys[99].index());
        assert!(queue.slots.capacity() >= 100, "the last waiter keeps the slab");
        let again = queue.alloc(SlotState::Queued, wake(), None, 1);
        assert!(again.index() < 99, "a freed slot is reused");
        assert_ne!(again, keys[again.index() as usize], "with a new generation");
        for key in [keys[99], again] {
            queue.unlink(true, key.index());
            drop(queue.free(key));
        }
        assert_eq!((queue.live, queue.in_use, queue.slots.capacity()), (0, 0, 0));
    }

    fn futures_noop_waker() -> Waker {
        struct Noop;
        impl std::task::Wake for Noop {
            fn wake(self: std::sync::Arc<Self>) {}
        }
        Waker::from(std::sync::Arc::new(Noop))
    }
}

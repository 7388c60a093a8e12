//! The waiter queue of a bulkhead with queue order and criticality (issue 20), as both
//! sequential reference models see it: the `ops` fuzz model (`model.rs`) and the proptest
//! model (`verification/reference_model.rs`), which include this file with `#[path]`.
//!
//! One list in arrival order holds every queued caller; a class's list is its subsequence.
//! The rules are the engine's (`src/engine/policy.rs`, `Queue` and `Semaphore::enqueue` in
//! `src/engine/state.rs`):
//!
//! * the **next** waiter is the first of the highest class queued (critical, then default,
//!   then sheddable): its oldest under FIFO, its newest under LIFO;
//! * the **last-served** waiter is the last of the lowest class queued: its newest under FIFO,
//!   its oldest under LIFO;
//! * a newcomer of class c is **served before** a queued waiter of class q iff c < q, or
//!   c == q under LIFO;
//! * a request for n in the sheddable class **requires** n + headroom free, others n;
//! * a request whose requirement is above the limit (and above 1: a limit of 0 pauses) **can
//!   never fit**: refused `ExceedsLimit` before it queues, and, once queued, by the drain
//!   that follows any change of the limit or the headroom, wherever it stands (issue 29);
//! * a default or critical newcomer served before everyone queued takes the permits held
//!   back for them (a sheddable waiter's headroom, a lower class): `try_admits`;
//! * a non-waiting request that is refused on an open bulkhead is told `ExceedsLimit` if it
//!   can never fit, `Reserved` if it is sheddable and found its n free with nobody queued
//!   (only the headroom held it back), `Full` otherwise: `try_refusal` (issue 31).
//!
//! Adaptive LIFO is not modelled: it switches between the two orders on the real clock.
#![allow(dead_code)] // each including model uses its own part

use bulkhead::{Criticality, RejectReason};

/// A queued caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Waiter {
    pub id: u64,
    /// Permits asked for (at least 1: an empty request never queues).
    pub need: u32,
    pub class: Criticality,
}

/// What a waiting acquire gets: granted at once, refused (with the reason), or queued after
/// evicting the waiter with the given id, if any.
#[derive(Debug, PartialEq, Eq)]
pub enum Enqueue {
    Granted,
    Refused(RejectReason),
    Queued(Option<u64>),
}

/// How a drain step ended the next waiter's wait.
#[derive(Debug, PartialEq, Eq)]
pub enum Served {
    /// Its whole request fitted: `need` permits are now its own.
    Granted,
    /// It asked for more than the limit: refused (`ExceedsLimit`).
    Exceeded,
}

/// The queue, its order and the sheddable headroom.
#[derive(Debug, Default)]
pub struct ClassQueue {
    /// Every queued caller, in arrival order.
    pub waiters: Vec<Waiter>,
    /// LIFO (newest first within a class); FIFO otherwise.
    pub lifo: bool,
    /// `sheddable_headroom`.
    pub headroom: u32,
}

impl ClassQueue {
    pub fn len(&self) -> usize {
        self.waiters.len()
    }

    pub fn is_empty(&self) -> bool {
        self.waiters.is_empty()
    }

    /// The indices of the waiters of the class `pick` chooses among the classes queued (the
    /// highest or the lowest), oldest first.
    fn of_class(&self, pick: fn(Criticality, Criticality) -> Criticality) -> Vec<usize> {
        let Some(class) = self.waiters.iter().map(|w| w.class).reduce(pick) else {
            return Vec::new();
        };
        (0..self.waiters.len()).filter(|&i| self.waiters[i].class == class).collect()
    }

    /// The index of the waiter served next.
    pub fn next(&self) -> Option<usize> {
        let top = self.of_class(Ord::min);
        if self.lifo {
            top.last().copied()
        } else {
            top.first().copied()
        }
    }

    /// The index of the waiter served last (the one a full queue evicts).
    pub fn last_served(&self) -> Option<usize> {
        let bottom = self.of_class(Ord::max);
        if self.lifo {
            bottom.first().copied()
        } else {
            bottom.last().copied()
        }
    }

    /// Whether a newcomer of `class` is served before queued waiter `i`.
    pub fn served_before(&self, class: Criticality, i: usize) -> bool {
        let queued = self.waiters[i].class;
        class < queued || (class == queued && self.lifo)
    }

    /// Whether a newcomer of `class` is served before everyone queued.
    pub fn newcomer_first(&self, class: Criticality) -> bool {
        self.next().map_or(true, |i| self.served_before(class, i))
    }

    /// The permits that must be free to grant `n` in `class`.
    pub fn required(&self, n: u32, class: Criticality) -> i64 {
        let headroom = if class == Criticality::Sheddable { self.headroom } else { 0 };
        i64::from(n) + i64::from(headroom)
    }

    /// Whether a request of `n` in `class` can never be granted at `limit`.
    pub fn cannot_fit(&self, n: u32, class: Criticality, limit: i64) -> bool {
        let required = self.required(n, class);
        required > 1 && required > limit
    }

    /// Whether a non-waiting `try_acquire_many(Request::permits(n).criticality(class))` on an
    /// open bulkhead is granted: an empty request always; a critical or default one needs n
    /// free and to be served before everyone queued; a sheddable one nobody queued and its
    /// requirement free.
    pub fn try_admits(&self, available: i64, n: u32, class: Criticality) -> bool {
        if n == 0 {
            return true;
        }
        let free = available >= self.required(n, class);
        match class {
            Criticality::Sheddable => free && self.is_empty(),
            _ => free && self.newcomer_first(class),
        }
    }

    /// The reason a non-waiting request of `n` (> 0) in `class` that
    /// [`try_admits`](Self::try_admits) refused on an open bulkhead is given.
    pub fn try_refusal(
        &self,
        available: i64,
        limit: i64,
        n: u32,
        class: Criticality,
    ) -> RejectReason {
        if self.cannot_fit(n, class, limit) {
            RejectReason::ExceedsLimit
        } else if class == Criticality::Sheddable && available >= i64::from(n) && self.is_empty() {
            RejectReason::Reserved
        } else {
            RejectReason::Full
        }
    }

    /// Under the queue lock, a waiting acquire of `n` (> 0, within the limit) in `class` on an
    /// open bulkhead: granted if served before everyone queued with its requirement free;
    /// at the cap, it evicts the last-served waiter if served before it, else it is refused
    /// `TooManyWaiting`; otherwise it queues. Changes nothing.
    pub fn enqueue(
        &self,
        available: i64,
        limit: i64,
        cap: Option<usize>,
        n: u32,
        class: Criticality,
    ) -> Enqueue {
        if self.newcomer_first(class) && available >= self.required(n, class) {
            return Enqueue::Granted;
        }
        if self.cannot_fit(n, class, limit) {
            return Enqueue::Refused(RejectReason::ExceedsLimit);
        }
        if cap.is_some_and(|cap| self.len() >= cap) {
            return match self.last_served() {
                Some(last) if self.served_before(class, last) => {
                    Enqueue::Queued(Some(self.waiters[last].id))
                }
                _ => Enqueue::Refused(RejectReason::TooManyWaiting),
            };
        }
        Enqueue::Queued(None)
    }

    /// Takes waiter `id` out of the queue; `true` if it was the next waiter (the caller then
    /// drains: the new next may fit, or be above the limit).
    pub fn remove(&mut self, id: u64) -> bool {
        let was_next = self.next().is_some_and(|i| self.waiters[i].id == id);
        self.waiters.retain(|w| w.id != id);
        was_next
    }

    /// One step of a drain with `available` free at `limit`: takes out a waiter that can never
    /// fit (refused, wherever it stands), else the next waiter if it is served (its whole
    /// request fits); `None` when nobody is queued or the next waiter must wait.
    pub fn drain_step(&mut self, available: i64, limit: i64) -> Option<(Waiter, Served)> {
        if let Some(i) = self.waiters.iter().position(|w| self.cannot_fit(w.need, w.class, limit)) {
            return Some((self.waiters.remove(i), Served::Exceeded));
        }
        let i = self.next()?;
        let waiter = self.waiters[i];
        let served = if available >= self.required(waiter.need, waiter.class) {
            Served::Granted
        } else {
            return None;
        };
        self.waiters.remove(i);
        Some((waiter, served))
    }

    /// The model's invariant after every step (work conservation): the next waiter cannot
    /// be served, and no queued waiter is one that can never fit.
    pub fn next_waits(&self, available: i64, limit: i64) -> bool {
        let none_unfit = self.waiters.iter().all(|w| !self.cannot_fit(w.need, w.class, limit));
        none_unfit
            && self.next().map_or(true, |i| {
                let Waiter { need, class, .. } = self.waiters[i];
                available < self.required(need, class)
            })
    }
}

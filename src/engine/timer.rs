//! The deadline timer of bounded async waits: the bulkhead keeps its own deadlines, on any
//! executor, with or without a tokio runtime.
//!
//! # How it works
//!
//! A bounded [`acquire_async`](crate::Bulkhead::acquire_async) that has to queue stores its
//! deadline in its queue slot. With FIFO and one `max_wait_duration` per bulkhead, deadlines
//! expire in queue order, so only the earliest deadline of each queue needs a timer: the
//! queue asks this module to fire at its head's deadline, and asks again only when that
//! fire finds a later head (re-armed lazily: a head that leaves early costs one fire that
//! expires nothing). When it fires, the queue withdraws every waiter whose deadline passed
//! and wakes it, after unlocking; the woken future returns
//! [`RejectReason::WaitTimedOut`](crate::RejectReason::WaitTimedOut). A `change_config`
//! that shortens the wait breaks the order; the queue notices (it tracks whether deadlines
//! are still in order) and then scans every waiter, and asks for an earlier fire when a
//! new deadline comes before the armed one. No timer is armed per waiter, and a wait costs
//! no allocation.
//!
//! One process-wide thread, named `bulkhead-timer`, sleeps until the earliest deadline of
//! every queue (a binary heap of deadlines, each with a weak reference to its queue: it holds
//! no strong reference to any bulkhead). It is started by the first bounded async wait that
//! queues, never before; it parks with no timeout while nothing waits with a bound. Its
//! precision is the operating system's timed park (tens of microseconds on Linux), not a
//! runtime's 1 ms tick.
//!
//! # Without the thread
//!
//! A thread is a cost some users cannot pay: targets without threads, processes that fork,
//! teams that count threads. Call [`disable_thread`] before the first bounded wait and no
//! thread is ever started. Then either
//!
//! - drive the deadlines from your own timer: [`fire_expired`] withdraws and wakes every
//!   wait whose deadline passed and returns the next deadline to sleep until; or
//! - bound each wait with your runtime's timer:
//!   [`Bulkhead::acquire_async_with_sleep`](crate::Bulkhead::acquire_async_with_sleep).
//!
//! Without either, a bounded wait still ends when its future is polled after its deadline,
//! but nothing wakes it to be polled.
//!
//! A process that forks after the thread started has no timer thread in the child (threads
//! do not survive `fork`), while the child's copy of this module believes it runs: call
//! [`disable_thread`] before the first bounded wait in a program that forks, and drive
//! [`fire_expired`] yourself, or fork before any bounded wait queues.
//!
//! A bulkhead dropped while the timer is armed for it keeps its queue's allocation (not its
//! contents: no waiter, no waker) until that deadline passes and the timer drops its `Weak`.
//!
//! Under the model checkers (`--cfg bulkhead_loom`, `--cfg bulkhead_shuttle`) there is no
//! thread: the model clock is the timer, and advancing it fires the deadlines it passes
//! (see `bulkhead::model`).

use std::sync::Weak;

use crate::engine::sync::Instant;

/// What the timer fires: a queue that withdraws the waits whose deadline passed. The timer
/// (and the model clock) need only this, not the queue's type.
pub(crate) trait Expire: Send + Sync {
    /// The timer fired at `fired` (an instant this queue asked for); `now` is the clock's
    /// reading. Withdraws and wakes every wait due by `now`, serves the queue as the
    /// waiters' own withdrawals would, and asks for the next fire. Takes its own locks; the
    /// caller holds none of the crate's.
    fn expire(&self, fired: Instant, now: Instant);
}

/// Asks the timer to call `list.expire` once `at` has passed.
pub(crate) fn schedule(at: Instant, list: Weak<dyn Expire>) {
    #[cfg(any(bulkhead_loom, bulkhead_shuttle))]
    crate::engine::sync::model_clock().schedule(at, list);
    #[cfg(not(any(bulkhead_loom, bulkhead_shuttle)))]
    imp::schedule(at, list);
}

#[cfg(not(any(bulkhead_loom, bulkhead_shuttle)))]
pub use imp::{disable_thread, fire_expired};

#[cfg(not(any(bulkhead_loom, bulkhead_shuttle)))]
mod imp {
    use std::cmp::{Ordering as CmpOrdering, Reverse};
    use std::collections::BinaryHeap;
    use std::sync::Weak;

    use super::Expire;
    use crate::engine::sync::{Clock, Instant, Mutex, OnceLock, Thread};

    /// A deadline and the queue it belongs to. Ordered by deadline, then by arrival.
    struct Entry {
        at: Instant,
        seq: u64,
        list: Weak<dyn Expire>,
    }

    impl PartialEq for Entry {
        fn eq(&self, other: &Self) -> bool {
            (self.at, self.seq) == (other.at, other.seq)
        }
    }

    impl Eq for Entry {}

    impl PartialOrd for Entry {
        fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
            Some(self.cmp(other))
        }
    }

    impl Ord for Entry {
        fn cmp(&self, other: &Self) -> CmpOrdering {
            (self.at, self.seq).cmp(&(other.at, other.seq))
        }
    }

    #[derive(Default)]
    struct Heap {
        entries: BinaryHeap<Reverse<Entry>>,
        seq: u64,
    }

    struct Timer {
        /// Every armed deadline. Only `Weak`s and instants: nothing foreign runs or drops
        /// under this lock (a dead `Weak` dropped here frees no bulkhead).
        heap: Mutex<Heap>,
        /// The timer thread, once started; `None` if [`disable_thread`] came first or the
        /// thread could not be spawned.
        thread: OnceLock<Option<Thread>>,
    }

    fn timer() -> &'static Timer {
        static TIMER: OnceLock<Timer> = OnceLock::new();
        TIMER.get_or_init(|| Timer { heap: Mutex::new(Heap::default()), thread: OnceLock::new() })
    }

    pub(super) fn schedule(at: Instant, list: Weak<dyn Expire>) {
        let timer = timer();
        let mut heap = timer.heap.lock();
        let earliest = heap.entries.peek().map_or(true, |Reverse(top)| at < top.at);
        let seq = heap.seq;
        heap.seq += 1;
        heap.entries.push(Reverse(Entry { at, seq, list }));
        drop(heap);
        let thread = timer.thread.get_or_init(spawn);
        if earliest {
            if let Some(thread) = thread {
                // It may be asleep until a later deadline, or with none.
                thread.unpark();
            }
        }
    }

    fn spawn() -> Option<Thread> {
        std::thread::Builder::new()
            .name("bulkhead-timer".into())
            .spawn(run)
            .ok()
            .map(|handle| handle.thread().clone())
    }

    fn run() {
        let clock = Clock::new();
        loop {
            // A deadline armed after `fire_expired` looked unparks this thread, so the park
            // returns at once (the token is kept) and the loop looks again. A panic of foreign
            // code is contained where the engine calls it (a waker's `wake`), so none reaches
            // here; this catch is the last line that keeps every other bulkhead's deadlines
            // alive if one ever did: the entry that panicked is gone, the rest are fired.
            match std::panic::catch_unwind(fire_expired) {
                Ok(next) => clock.park_until(next),
                Err(payload) => crate::engine::foreign::contained(payload, "the deadline timer"),
            }
        }
    }

    /// Starts no timer thread, ever, if called before the first bounded async wait queues
    /// (returns `true`); returns `false` if the thread already runs (it keeps running).
    ///
    /// Then bounded `acquire_async` waits end when [`fire_expired`] finds their deadline
    /// passed (call it from your own timer), or when their future is polled after the
    /// deadline; `acquire_async_with_sleep` bounds a wait with any sleep future instead.
    ///
    /// # Examples
    ///
    /// ```
    /// // At start-up, in a process that must not start threads of its own:
    /// bulkhead::timer::disable_thread();
    /// ```
    pub fn disable_thread() -> bool {
        let timer = timer();
        timer.thread.set(None).is_ok() || timer.thread.get().is_some_and(Option::is_none)
    }

    /// Withdraws and wakes every bounded async wait whose deadline has passed, on every
    /// bulkhead, and returns the earliest deadline still armed (`None`: none is). The timer
    /// thread runs exactly this; with [`disable_thread`], call it from your own timer, and
    /// sleep until the instant it returns (a deadline armed later is earlier than that only
    /// after a `change_config` shortened a wait, or when a new bulkhead starts waiting:
    /// poll again at your timer's tick to catch those).
    ///
    /// The woken waits run when their executor polls them; nothing of theirs runs here, and
    /// no lock is held while a waker is called.
    ///
    /// # Examples
    ///
    /// A bounded wait on an executor that is not tokio (here `futures`' `block_on`): it ends
    /// at its deadline although nothing but the bulkhead's timer wakes it. With the thread
    /// disabled, a loop of your own would call `fire_expired` instead.
    ///
    /// ```
    /// use std::time::Duration;
    /// use bulkhead::{Bulkhead, BulkheadConfig, RejectReason};
    ///
    /// let config = BulkheadConfig::builder()
    ///     .max_concurrent_calls(1)
    ///     .max_wait_duration(Duration::from_millis(5))
    ///     .build()?;
    /// let bulkhead = Bulkhead::new("bank", config);
    /// let _held = bulkhead.try_acquire()?;
    /// let refused = futures::executor::block_on(bulkhead.acquire_async()).unwrap_err();
    /// assert_eq!(refused.reason(), RejectReason::WaitTimedOut);
    /// // Nothing is due now (the wait above was withdrawn at its deadline).
    /// bulkhead::timer::fire_expired();
    /// assert_eq!(bulkhead.metrics().waiting_calls(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn fire_expired() -> Option<Instant> {
        let timer = timer();
        let clock = Clock::new();
        loop {
            let mut heap = timer.heap.lock();
            let now = clock.now();
            match heap.entries.peek() {
                Some(Reverse(top)) if top.at <= now => {}
                Some(Reverse(top)) => return Some(top.at),
                None => return None,
            }
            let Some(Reverse(entry)) = heap.entries.pop() else {
                unreachable!("peeked above");
            };
            drop(heap);
            // Upgraded outside our lock, and the strong reference dropped outside it too: if
            // the bulkhead went away meanwhile, this drop frees its queue here.
            if let Some(list) = entry.list.upgrade() {
                list.expire(entry.at, now);
            }
        }
    }
}

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
//! # A timer the runtime owns
//!
//! A runtime (or a library embedding the bulkhead) with a timer wheel of its own binds its
//! bulkheads to a [`Timer`] handle: their deadlines go to that handle's heap, the runtime is
//! told through the handle's callback whenever the earliest deadline moves earlier, and it
//! calls [`Timer::fire_expired`] at that instant. Nothing polls, no thread is started, and
//! nothing process-wide changes: other bulkheads of the process keep the thread (or the
//! process-wide switch below). See [`Timer`] for the contract.
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

use std::cmp::{Ordering as CmpOrdering, Reverse};
use std::collections::BinaryHeap;
use std::sync::{Arc, Weak};

pub(crate) use crate::engine::sync::Expire;
use crate::engine::sync::{Clock, Instant, Mutex};

/// Which timer a queue's deadlines go to: `None` is the process's (the `bulkhead-timer`
/// thread, or the model clock under the checkers), `Some` an embedder's [`Timer`]. Set when
/// the semaphore is made and never changed, so the fast paths never read it.
pub(crate) type Binding = Option<Arc<Shared>>;

/// Asks the queue's timer to call `list.expire` once `at` has passed. The caller holds no
/// lock of ours (an embedder's timer calls its callback from here).
pub(crate) fn schedule(binding: &Binding, at: Instant, list: Weak<dyn Expire>) {
    if let Some(own) = binding {
        own.schedule(at, list);
        return;
    }
    #[cfg(any(bulkhead_loom, bulkhead_shuttle))]
    crate::engine::sync::model_clock().schedule(at, list);
    #[cfg(not(any(bulkhead_loom, bulkhead_shuttle)))]
    imp::schedule(at, list);
}

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

/// Every armed deadline of one timer (the process's or an embedder's). Only `Weak`s and
/// instants: nothing foreign runs or drops under the lock that guards it (a dead `Weak`
/// dropped there frees no bulkhead).
#[derive(Default)]
struct Heap {
    entries: BinaryHeap<Reverse<Entry>>,
    seq: u64,
}

impl Heap {
    /// Arms `at` for `list`; returns whether it is now the earliest deadline armed.
    fn push(&mut self, at: Instant, list: Weak<dyn Expire>) -> bool {
        let earliest = self.entries.peek().map_or(true, |Reverse(top)| at < top.at);
        let seq = self.seq;
        self.seq += 1;
        self.entries.push(Reverse(Entry { at, seq, list }));
        earliest
    }

    fn next(&self) -> Option<Instant> {
        self.entries.peek().map(|Reverse(top)| top.at)
    }
}

/// Fires every entry of `heap` due by now, one at a time and each outside the lock, and
/// returns the earliest deadline left.
fn fire(heap: &Mutex<Heap>) -> Option<Instant> {
    let clock = Clock::new();
    loop {
        let mut locked = heap.lock();
        let now = clock.now();
        match locked.next() {
            Some(at) if at <= now => {}
            next => return next,
        }
        let Some(Reverse(entry)) = locked.entries.pop() else {
            unreachable!("peeked above");
        };
        drop(locked);
        // Upgraded outside our lock, and the strong reference dropped outside it too: if
        // the bulkhead went away meanwhile, this drop frees its queue here.
        if let Some(list) = entry.list.upgrade() {
            list.expire(entry.at, now);
        }
    }
}

/// What an embedder's [`Timer`] shares with the bulkheads bound to it.
pub(crate) struct Shared {
    heap: Mutex<Heap>,
    /// The embedder's callback: foreign code, called after unlocking, its panic contained.
    on_earlier: Box<dyn Fn(Instant) + Send + Sync>,
}

impl Shared {
    fn schedule(&self, at: Instant, list: Weak<dyn Expire>) {
        let earliest = self.heap.lock().push(at, list);
        if earliest {
            let call = std::panic::AssertUnwindSafe(|| (self.on_earlier)(at));
            if let Err(payload) = std::panic::catch_unwind(call) {
                crate::engine::foreign::contained(payload, "a timer's callback");
            }
        }
    }
}

impl core::fmt::Debug for Shared {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let heap = self.heap.lock();
        let (armed, next) = (heap.entries.len(), heap.next());
        drop(heap);
        f.debug_struct("Timer").field("armed", &armed).field("next", &next).finish()
    }
}

/// A deadline timer that belongs to whoever embeds the bulkhead (a runtime with a timer
/// wheel of its own), instead of the process-wide `bulkhead-timer` thread.
///
/// Bind bulkheads to it when they are made
/// ([`Bulkhead::with_timer`](crate::Bulkhead::with_timer),
/// [`KeyedBulkheadBuilder::timer`](crate::keyed::KeyedBulkheadBuilder::timer),
/// [`BulkheadRegistryBuilder::timer`](crate::registry::BulkheadRegistryBuilder::timer)).
/// Their bounded async waits then arm their deadlines here, and never start or touch the
/// process thread or the process-wide [`fire_expired`](crate::timer::fire_expired) (which
/// keeps serving every unbound bulkhead, as does `disable_thread`).
///
/// The contract with the runtime:
///
/// - The callback given to [`Timer::new`] is called with an instant whenever the earliest
///   deadline armed on this timer moves earlier (a first deadline, or one before every
///   other). Call [`fire_expired`](Timer::fire_expired) at or after that instant.
/// - `fire_expired` withdraws and wakes every wait due and returns the next deadline:
///   call it again at that instant. Keep the earliest of every instant you were given (a
///   callback may come while `fire_expired` runs, with an instant earlier than the one it
///   then returns); a fire earlier than needed costs little and expires nothing.
/// - Nothing needs polling: between those instants no deadline of this timer is due.
///
/// The callback is foreign code: it runs on the thread that armed the deadline (a task
/// polling its wait, a release, or `fire_expired` re-arming), after that thread left every
/// lock of ours, so it may call back into the bulkhead or this timer (even `fire_expired`).
/// A panic in it is contained (reported under the `tracing` feature, never re-raised):
/// the deadline stays armed and is fired by the next `fire_expired`. It should be quick
/// (record the instant, wake the runtime's timer): it delays the task that armed it.
///
/// `Timer` is a cheap handle (`Clone` shares it). The bulkheads bound to it keep it alive;
/// it holds no strong reference to any of them. A callback that owns an `Arc` of a bound
/// bulkhead makes a cycle that is never freed: capture a `Weak` or the runtime's handle.
/// If the runtime stops calling `fire_expired`, a bounded wait still ends when its future
/// is polled after its deadline, but nothing wakes it to be polled.
///
/// # Examples
///
/// A runtime's timer reduced to a list of instants: the callback records each, and the
/// runtime fires the handle when the earliest has passed.
///
/// ```
/// use std::future::Future;
/// use std::sync::{Arc, Mutex};
/// use std::time::{Duration, Instant};
/// use bulkhead::timer::Timer;
/// use bulkhead::{Bulkhead, BulkheadConfig, RejectReason};
///
/// let wakeups = Arc::new(Mutex::new(Vec::<Instant>::new()));
/// let timer = Timer::new({
///     let wakeups = Arc::clone(&wakeups);
///     move |at| wakeups.lock().unwrap().push(at)
/// });
/// let config = BulkheadConfig::builder()
///     .max_concurrent_calls(1)
///     .max_wait_duration(Duration::from_millis(2))
///     .build()?;
/// let bulkhead = Bulkhead::with_timer("bank", config, &timer);
/// let _held = bulkhead.try_acquire()?;
///
/// let mut wait = Box::pin(bulkhead.acquire_async());
/// let waker = futures::task::noop_waker();
/// let mut cx = std::task::Context::from_waker(&waker);
/// assert!(wait.as_mut().poll(&mut cx).is_pending()); // queued: its deadline is armed
/// let at = wakeups.lock().unwrap()[0];               // the callback said when
///
/// std::thread::sleep(at.saturating_duration_since(Instant::now()));
/// assert_eq!(timer.fire_expired(), None);            // the wait expired; nothing else armed
/// let refused = match wait.as_mut().poll(&mut cx) {
///     std::task::Poll::Ready(result) => result.unwrap_err(),
///     std::task::Poll::Pending => unreachable!("withdrawn by the fire"),
/// };
/// assert_eq!(refused.reason(), RejectReason::WaitTimedOut);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Timer {
    shared: Arc<Shared>,
}

impl core::fmt::Debug for Timer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.shared.fmt(f)
    }
}

impl Timer {
    /// A timer with no deadline armed; `on_earlier` is called with the new earliest
    /// deadline whenever one is armed before every other (see [`Timer`] for the contract).
    ///
    /// # Examples
    ///
    /// ```
    /// let timer = bulkhead::timer::Timer::new(|at| println!("fire me at {at:?}"));
    /// assert_eq!(timer.next_deadline(), None);
    /// ```
    pub fn new(on_earlier: impl Fn(Instant) + Send + Sync + 'static) -> Timer {
        Timer {
            shared: Arc::new(Shared {
                heap: Mutex::new(Heap::default()),
                on_earlier: Box::new(on_earlier),
            }),
        }
    }

    /// Withdraws and wakes every bounded async wait of the bulkheads bound to this timer
    /// whose deadline has passed, and returns the earliest deadline still armed (`None`:
    /// none is; the callback says when one is armed again).
    ///
    /// The woken waits run when their executor polls them; nothing of theirs runs here, and
    /// no lock is held while a waker or the callback is called (a waker's panic is
    /// contained). Safe to call at any time, from any thread, also from the callback.
    ///
    /// # Examples
    ///
    /// ```
    /// let timer = bulkhead::timer::Timer::new(|_| {});
    /// assert_eq!(timer.fire_expired(), None); // nothing armed: nothing to do
    /// ```
    pub fn fire_expired(&self) -> Option<Instant> {
        fire(&self.shared.heap)
    }

    /// The earliest deadline armed on this timer, without firing anything.
    ///
    /// # Examples
    ///
    /// ```
    /// let timer = bulkhead::timer::Timer::new(|_| {});
    /// assert_eq!(timer.next_deadline(), None);
    /// ```
    pub fn next_deadline(&self) -> Option<Instant> {
        self.shared.heap.lock().next()
    }

    /// The binding a semaphore made for this timer keeps.
    pub(crate) fn binding(&self) -> Binding {
        Some(Arc::clone(&self.shared))
    }
}

#[cfg(not(any(bulkhead_loom, bulkhead_shuttle)))]
pub use imp::{disable_thread, fire_expired};

#[cfg(not(any(bulkhead_loom, bulkhead_shuttle)))]
mod imp {
    use std::sync::Weak;

    use super::{Expire, Heap};
    use crate::engine::sync::{Clock, Instant, Mutex, OnceLock, Thread};

    struct Process {
        /// Every armed deadline. Only `Weak`s and instants: nothing foreign runs or drops
        /// under this lock (a dead `Weak` dropped here frees no bulkhead).
        heap: Mutex<Heap>,
        /// The timer thread, once started; `None` if [`disable_thread`] came first or the
        /// thread could not be spawned.
        thread: OnceLock<Option<Thread>>,
    }

    fn timer() -> &'static Process {
        static TIMER: OnceLock<Process> = OnceLock::new();
        TIMER.get_or_init(|| Process { heap: Mutex::new(Heap::default()), thread: OnceLock::new() })
    }

    pub(super) fn schedule(at: Instant, list: Weak<dyn Expire>) {
        let timer = timer();
        let earliest = timer.heap.lock().push(at, list);
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
        super::fire(&timer().heap)
    }
}

#[cfg(all(test, not(any(bulkhead_loom, bulkhead_shuttle))))]
mod tests {
    use super::*;
    use crate::engine::sync::Expire;

    struct Nobody;

    impl Expire for Nobody {
        fn expire(&self, _fired: Instant, _now: Instant) {}
    }

    fn nobody() -> Weak<dyn Expire> {
        Weak::<Nobody>::new()
    }

    /// `push` says "earliest" only for a deadline before every other armed one: a first
    /// deadline, or a strictly earlier one. A deadline equal to the earliest moves nothing,
    /// so the runtime is not told again (the contract: only when the earliest moves
    /// earlier; cargo-mutants, engine 29/32: `at < top.at` made `<=` went unseen, since two
    /// real waits practically never get the same instant).
    #[test]
    fn only_a_strictly_earlier_deadline_is_the_new_earliest() {
        let now = Clock::new().now();
        let later = now + std::time::Duration::from_millis(5);
        let mut heap = Heap::default();
        assert!(heap.push(later, nobody()), "the first deadline");
        assert!(!heap.push(later, nobody()), "the same instant again");
        assert!(!heap.push(later + std::time::Duration::from_millis(1), nobody()), "a later one");
        assert!(heap.push(now, nobody()), "an earlier one");
        assert!(!heap.push(now, nobody()), "the earliest again");
        assert_eq!(heap.next(), Some(now));
        assert_eq!(heap.entries.len(), 5);
    }
}

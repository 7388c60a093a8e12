//! The async slow path: futures that queue, wait for a grant or their deadline, and withdraw
//! on drop. Nothing here allocates: the waiter is a slot of the semaphore's slab, addressed
//! by a [`WaitKey`]. The deadline of `acquire_async` is kept by the bulkhead's own timer
//! (`crate::engine::timer`), which withdraws and wakes the waiter when it passes, on any executor;
//! `acquire_async_with_sleep` pins the caller's sleep inside its future instead.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;
use std::sync::Arc;

use pin_project_lite::pin_project;

use crate::bulkhead::error::BulkheadFull;
use crate::bulkhead::permit::Mark;
use crate::bulkhead::permit::OwnedPermit;
use crate::bulkhead::permit::Permit;
use crate::bulkhead::request::{wait_within, Request};
use crate::bulkhead::Bulkhead;
use crate::engine::policy::Criticality;
use crate::engine::state::MAX_PERMITS;
use crate::engine::state::{Enqueued, Outcome, WaitKey, Wake, Word};
use crate::engine::sync::Instant;
use crate::observe::reason::RejectReason;

/// The sleep of a future whose deadline the bulkhead's timer keeps: none. Uninhabited, so
/// `Timer<EngineTimer>` takes no space.
pub(crate) enum EngineTimer {}

impl Future for EngineTimer {
    type Output = ();

    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        match *self {}
    }
}

/// `acquire_async` arms no sleep: its deadline goes to the queue, and the timer keeps it.
pub(crate) fn engine_timer(_wait: Duration) -> Option<EngineTimer> {
    None
}

pin_project! {
    /// The timer of a queued wait, armed in place (never boxed).
    #[project = TimerProj]
    pub(crate) enum Timer<S> {
        Off,
        On { #[pin] sleep: S },
    }
}

/// The unpinned state every acquire future shares: first poll tries the fast path, then
/// queues; later polls check the slot, then the timer; drop withdraws.
pub(crate) struct Core {
    /// The queued wait, while there is one.
    key: Option<WaitKey>,
    /// When the wait started (set when queued).
    start: Option<Instant>,
    /// How long it may wait: before it queues, the request's own max wait (`None` when it
    /// sets none); once queued, the effective one (the smaller of that and the bulkhead's).
    /// The deadline is `start + wait` (see [`Core::deadline`]): kept as a duration, not an
    /// instant, so the plain future stays small.
    wait: Option<Duration>,
    done: bool,
    /// Whether the bulkhead's timer keeps the deadline (`acquire_async`), or a sleep of the
    /// caller's does (`acquire_async_with_sleep`).
    engine_timer: bool,
    /// What was asked for, packed (see [`Core::pack`]): exactly 1 for the plain acquires,
    /// so their first poll tells them apart from a weighted or classed one in one compare.
    request: u32,
}

impl Core {
    pub(crate) const fn new(engine_timer: bool, request: Request) -> Self {
        Core {
            key: None,
            start: None,
            wait: request.own_wait(),
            done: false,
            engine_timer,
            request: Self::pack(request),
        }
    }

    /// One permit in the default class packs to 1. Otherwise: in the default class, the
    /// permits, clamped to `MAX_PERMITS + 1` (2^30: any count above the engine's maximum is
    /// refused as above the limit, whatever it was); in another class, the permits (1 to
    /// `MAX_PERMITS`) in bits 0..=29 and the class in bits 30..=31, which makes the value
    /// above 2^30. A request for none or for more than `MAX_PERMITS` ignores its class (it
    /// is granted empty, or refused, whatever the class), so it packs as a default one.
    const fn pack(request: Request) -> u32 {
        const ABOVE: u32 = MAX_PERMITS as u32 + 1;
        let permits = request.num_permits();
        if permits == 0 || permits > MAX_PERMITS as u32 {
            return if permits > ABOVE { ABOVE } else { permits };
        }
        let class: u32 = match request.class() {
            Criticality::Default => 0,
            Criticality::Critical => 1,
            Criticality::Sheddable => 2,
        };
        permits | class << 30
    }

    /// The permits asked for.
    #[inline]
    pub(crate) fn permits(&self) -> u32 {
        if self.request > 1 << 30 {
            self.request & ((1 << 30) - 1)
        } else {
            self.request
        }
    }

    /// The class asked in.
    fn class(&self) -> Criticality {
        match self.request {
            r if r <= 1 << 30 => Criticality::Default,
            r if r >> 30 == 1 => Criticality::Critical,
            _ => Criticality::Sheddable,
        }
    }

    /// When the wait gives up; `None` before it queued and for an unbounded wait.
    fn deadline(&self, bulkhead: &Bulkhead) -> Option<Instant> {
        let (start, wait) = (self.start?, self.wait?);
        bulkhead.sem().clock.deadline(start, wait)
    }

    /// Whether this is the plain acquire: one permit, default class.
    #[inline]
    fn is_plain(&self) -> bool {
        self.request == 1
    }

    /// Called on drop: a queued future leaves the queue; a permit granted to it but never
    /// returned is released, which hands it to the next waiter.
    #[inline]
    pub(crate) fn cancel(&mut self, bulkhead: &Bulkhead) {
        if let Some(key) = self.key {
            Self::withdraw(key, bulkhead, self.permits());
        }
    }

    #[cold]
    #[inline(never)]
    fn withdraw(key: WaitKey, bulkhead: &Bulkhead, permits: u32) {
        // Not granted (still queued, closed, timed out): the slot is gone, nothing is owned.
        if bulkhead.sem().withdraw(key) == Some(Outcome::Granted) {
            // Never handed to the caller, so no `CallPermitted`/`CallFinished` pair. Every
            // permit of the request goes back (a grant is always the whole request).
            bulkhead.sem().release_many(permits);
        }
    }

    /// A poll. The first one is out of line ([`poll_first`](Self::poll_first)), so the
    /// zero-wait acquire's refusal keeps the caller's code small; a queued future's re-poll
    /// checks its slot inline, and only a wait still pending goes out of line.
    #[inline(always)]
    pub(crate) fn poll<S: Future>(
        &mut self,
        timer: Pin<&mut Timer<S>>,
        bulkhead: &Bulkhead,
        cx: &mut Context<'_>,
        arm: impl FnOnce(Duration) -> Option<S>,
    ) -> Poll<Result<Mark, BulkheadFull>> {
        let Some(key) = self.key else {
            return self.poll_first(timer, bulkhead, cx, arm);
        };
        match bulkhead.sem().poll_wait(key, Some(cx.waker())) {
            Some(outcome) => {
                self.key = None;
                let done = self.finish(bulkhead, outcome);
                Self::disarm(timer);
                done
            }
            None => self.poll_pending(timer, bulkhead, cx),
        }
    }

    /// The first poll (or a poll after completion, which panics): the plain acquire's two
    /// common ends, decided here with nothing else live (an unobserved grant, and the
    /// refusal of a zero-wait bulkhead that nobody observes: what `permitted` and `refuse`
    /// give for those words); every other case goes to
    /// [`poll_first_rest`](Self::poll_first_rest). Callgrind, issue 33 (see
    /// benches/results/NOTES.md): the zero-wait refusal no longer saves the registers the
    /// queueing path needs.
    #[inline(never)]
    fn poll_first<S: Future>(
        &mut self,
        timer: Pin<&mut Timer<S>>,
        bulkhead: &Bulkhead,
        cx: &mut Context<'_>,
        arm: impl FnOnce(Duration) -> Option<S>,
    ) -> Poll<Result<Mark, BulkheadFull>> {
        assert!(!self.done, "a bulkhead acquire future was polled after it completed");
        if !self.is_plain() {
            return self.poll_first_rest(None, timer, bulkhead, cx, arm);
        }
        let tried = bulkhead.sem().try_acquire();
        match tried {
            Ok(word) if !word.is_observed() => self.done_with(Ok(Mark::NONE)),
            Err(word)
                if word.is_quiet_full()
                    && (word.is_closed() || bulkhead.max_wait_is_zero())
                    && !crate::observe::trace::interested() =>
            {
                self.done_with(Err(bulkhead.refuse_unobserved(word)))
            }
            // No permit for a caller that may wait: straight to the queue.
            Err(word) if !word.is_closed() && !bulkhead.max_wait_is_zero() => {
                self.queue(timer, bulkhead, cx, arm)
            }
            _ => self.poll_first_rest(Some(tried), timer, bulkhead, cx, arm),
        }
    }

    /// [`poll_first`](Self::poll_first)'s other cases: `tried` is the plain acquire's
    /// attempt (`None` for a weighted or classed request, which makes its own). An observed
    /// grant, a held-back permit, an observed or closed refusal, or a weighted request's
    /// wait.
    #[inline(never)]
    fn poll_first_rest<S: Future>(
        &mut self,
        tried: Option<Result<Word, Word>>,
        timer: Pin<&mut Timer<S>>,
        bulkhead: &Bulkhead,
        cx: &mut Context<'_>,
        arm: impl FnOnce(Duration) -> Option<S>,
    ) -> Poll<Result<Mark, BulkheadFull>> {
        match tried {
            None => {
                if let Some(done) = self.first_poll_many(bulkhead) {
                    return done;
                }
            }
            Some(Ok(word)) => {
                let mark = bulkhead.permitted(word);
                return self.done_with(Ok(mark));
            }
            Some(Err(word)) => {
                if word.is_closed() || bulkhead.max_wait_is_zero() {
                    if word.has_free() {
                        return self.done_with(bulkhead.take_held_back_or_refuse(word));
                    }
                    // As `acquire`: the refusal `try_acquire` makes for this word.
                    return self.done_with(Err(bulkhead.refuse_from(word, word.is_quiet_full())));
                }
            }
        }
        self.queue(timer, bulkhead, cx, arm)
    }

    /// A re-poll that found the wait still pending: has it run out?
    #[inline(never)]
    fn poll_pending<S: Future>(
        &mut self,
        timer: Pin<&mut Timer<S>>,
        bulkhead: &Bulkhead,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Mark, BulkheadFull>> {
        self.check_expiry(timer, bulkhead, cx, false)
    }

    /// Done: disarms the timer now, not when the future is dropped.
    #[inline(always)]
    fn disarm<S: Future>(mut timer: Pin<&mut Timer<S>>) {
        if matches!(timer.as_mut().project(), TimerProj::On { .. }) {
            timer.set(Timer::Off);
        }
    }

    /// The first poll of a weighted acquire (`permits != 1`): the fast path, or a refusal
    /// that needs no queue (closed, no wait allowed, above the limit); `None` to queue. An
    /// empty request (0) is granted unless closed and never queues. Out of line, so the
    /// plain acquire's first poll keeps its code.
    #[cold]
    #[inline(never)]
    fn first_poll_many(&mut self, bulkhead: &Bulkhead) -> Option<Poll<Result<Mark, BulkheadFull>>> {
        let permits = self.permits();
        let request = Request::permits(permits).criticality(self.class());
        let word = match bulkhead.try_acquire_request(request) {
            Ok(word) => {
                let mark = bulkhead.permitted(word);
                return Some(self.done_with(Ok(mark)));
            }
            Err(word) => word,
        };
        if word.is_closed()
            || bulkhead.max_wait_is_zero()
            || self.wait == Some(Duration::ZERO)
            || word.exceeds_limit(permits)
            || permits == 0
        {
            return Some(self.done_with(Err(bulkhead.refuse_many(word, request))));
        }
        None
    }

    /// A wait still queued (it was queued by this very poll, with this waker, or its slot
    /// was just checked): has it run out? With a sleep, when it fires. With the engine's
    /// timer, the timer withdraws the waiter itself (seen by the slot check as `TimedOut`); a
    /// re-poll after the deadline (the timer thread disabled, or not yet there) gives up too.
    /// A custom sleep that was not armed checks on every poll. Inlined into both callers.
    #[inline(always)]
    fn check_expiry<S: Future>(
        &mut self,
        mut timer: Pin<&mut Timer<S>>,
        bulkhead: &Bulkhead,
        cx: &mut Context<'_>,
        just_queued: bool,
    ) -> Poll<Result<Mark, BulkheadFull>> {
        let sem = bulkhead.sem();
        let expired = match timer.as_mut().project() {
            TimerProj::On { sleep } => sleep.poll(cx).is_ready(),
            TimerProj::Off if self.engine_timer && just_queued => false,
            TimerProj::Off => self.deadline(bulkhead).is_some_and(|deadline| {
                if !self.engine_timer {
                    sem.clock.wake_at_deadline(cx.waker());
                }
                sem.clock.now() >= deadline
            }),
        };
        if !expired {
            return Poll::Pending;
        }
        let Some(key) = self.key.take() else {
            unreachable!("a queued future has a wait key");
        };
        // The grant and the withdrawal are decided under the queue lock: exactly one happens.
        let done = match sem.withdraw(key) {
            Some(outcome) => self.finish(bulkhead, outcome),
            None => {
                let waited = self.waited(bulkhead);
                let err = bulkhead.reject(sem.load(), RejectReason::WaitTimedOut, waited);
                self.done_with(Err(err))
            }
        };
        Self::disarm(timer);
        done
    }

    /// The first poll found no free permit and may wait: queues, arms the timer, and checks
    /// the wait. Out of line, so the first poll's fast path and refusal save no more
    /// registers than they use.
    #[inline(never)]
    fn queue<S: Future>(
        &mut self,
        mut timer: Pin<&mut Timer<S>>,
        bulkhead: &Bulkhead,
        cx: &mut Context<'_>,
        arm: impl FnOnce(Duration) -> Option<S>,
    ) -> Poll<Result<Mark, BulkheadFull>> {
        let sem = bulkhead.sem();
        // The request's own max wait (none for the plain acquire) caps the bulkhead's.
        let wait = wait_within(self.wait, bulkhead.max_wait());
        if wait.is_zero() {
            // The max wait was set to zero by a concurrent `change_config` (a request's own
            // zero wait was refused by the first poll).
            return self.done_with(Err(bulkhead.reject(sem.load(), RejectReason::Full, wait)));
        }
        // An unbounded wait reads the clock only if someone observes the calls (one more
        // load of the word): the wait histogram and `tracing` want its length. Unobserved,
        // only a timeout reports how long it waited, and an unbounded wait has none. (A
        // bulkhead that becomes observed while this waits does not time it: the histogram
        // counts that wait as a zero wait.)
        let start = (wait != Duration::MAX
            || sem.load().is_observed()
            || crate::observe::trace::interested())
        .then(|| sem.clock.now());
        let deadline = start.and_then(|start| sem.clock.deadline(start, wait));
        let timed = if self.engine_timer { deadline } else { None };
        // The plain acquire's request in constants, not unpacked.
        let (permits, class) = if self.is_plain() {
            (1, Criticality::Default)
        } else {
            (self.permits(), self.class())
        };
        let key = match sem.enqueue(
            Wake::task(cx.waker()),
            bulkhead.max_waiting(),
            timed,
            permits,
            class,
        ) {
            Enqueued::Queued(key) => key,
            Enqueued::Acquired => {
                let mark = bulkhead.permitted_after(sem.load(), start);
                return self.done_with(Ok(mark));
            }
            Enqueued::TooManyWaiting => {
                let reason = RejectReason::TooManyWaiting;
                let err = bulkhead.reject(sem.load(), reason, Duration::ZERO);
                return self.done_with(Err(err));
            }
            Enqueued::Closed => return self.done_with(Err(bulkhead.refuse(sem.load()))),
            // Above the limit, or (sheddable) above the limit less the headroom: it could
            // never be granted, whatever the word says now.
            Enqueued::ExceedsLimit => {
                let err = bulkhead.reject(sem.load(), RejectReason::ExceedsLimit, Duration::ZERO);
                return self.done_with(Err(err));
            }
        };
        self.key = Some(key);
        self.start = start;
        self.wait = Some(wait);
        if deadline.is_some() && !self.engine_timer {
            if let Some(sleep) = arm(wait) {
                timer.set(Timer::On { sleep });
            }
        }
        self.check_expiry(timer, bulkhead, cx, true)
    }

    fn done_with(
        &mut self,
        result: Result<Mark, BulkheadFull>,
    ) -> Poll<Result<Mark, BulkheadFull>> {
        self.done = true;
        Poll::Ready(result)
    }

    /// How long the wait has lasted so far (a wait ended early: evicted).
    fn waited_so_far(&self, bulkhead: &Bulkhead) -> Duration {
        self.start.map_or(Duration::ZERO, |start| bulkhead.sem().clock.since(start))
    }

    /// How long the wait lasted; for a timed-out wait, at least the wait it was allowed
    /// (a custom sleep, or tokio's paused clock, may end it early in real time).
    fn waited(&self, bulkhead: &Bulkhead) -> Duration {
        let Some(start) = self.start else { return Duration::ZERO };
        let clock = &bulkhead.sem().clock;
        let allowed = self
            .deadline(bulkhead)
            .map_or(Duration::ZERO, |deadline| clock.between(start, deadline));
        self.waited_so_far(bulkhead).max(allowed)
    }

    /// The wait ended with `outcome`, decided under the queue lock. Out of line, with a
    /// grant (the common end of a wait) finished here and every other outcome's error built
    /// by a tail call, so a grant saves no registers.
    #[inline(never)]
    fn finish(
        &mut self,
        bulkhead: &Bulkhead,
        outcome: Outcome,
    ) -> Poll<Result<Mark, BulkheadFull>> {
        if outcome == Outcome::Granted {
            let mark = bulkhead.permitted_after(bulkhead.sem().load(), self.start);
            return self.done_with(Ok(mark));
        }
        self.finish_refused(bulkhead, outcome)
    }

    /// [`finish`](Self::finish) for every outcome but a grant: the error.
    #[cold]
    #[inline(never)]
    fn finish_refused(
        &mut self,
        bulkhead: &Bulkhead,
        outcome: Outcome,
    ) -> Poll<Result<Mark, BulkheadFull>> {
        let sem = bulkhead.sem();
        match outcome {
            Outcome::Granted => unreachable!("a grant is finished by `finish`"),
            Outcome::Closed => {
                let err = bulkhead.reject(sem.load(), RejectReason::Closed, Duration::ZERO);
                self.done_with(Err(err))
            }
            Outcome::ExceedsLimit => {
                let err = bulkhead.reject(sem.load(), RejectReason::ExceedsLimit, Duration::ZERO);
                self.done_with(Err(err))
            }
            Outcome::TimedOut => {
                let waited = self.waited(bulkhead);
                let err = bulkhead.reject(sem.load(), RejectReason::WaitTimedOut, waited);
                self.done_with(Err(err))
            }
            Outcome::Evicted => {
                let waited = self.waited_so_far(bulkhead);
                let err = bulkhead.reject(sem.load(), RejectReason::Evicted, waited);
                self.done_with(Err(err))
            }
            Outcome::Drained => unreachable!("an acquire is not a drain wait"),
        }
    }
}

impl fmt::Debug for Core {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Acquire")
            .field("queued", &self.key.is_some())
            .field("done", &self.done)
            .finish()
    }
}

pin_project! {
    /// The future returned by [`Bulkhead::acquire_async`].
    ///
    /// It holds its place in the queue and its timer inline, so waiting allocates nothing;
    /// like tokio's acquire futures it is not `Unpin` (`.await` it, or pin it with
    /// [`std::pin::pin!`] or `Box::pin` to poll it by hand).
    ///
    /// # Cancel safety
    ///
    /// Dropping it at any point loses nothing: see [`Bulkhead::acquire_async`].
    #[must_use = "futures do nothing unless polled"]
    pub struct Acquire<'a> {
        bulkhead: &'a Bulkhead,
        core: Core,
        #[pin]
        timer: Timer<EngineTimer>,
    }

    impl PinnedDrop for Acquire<'_> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            this.core.cancel(this.bulkhead);
        }
    }
}

impl<'a> Acquire<'a> {
    #[inline]
    pub(crate) fn new(bulkhead: &'a Bulkhead) -> Self {
        Acquire { bulkhead, core: Core::new(true, Request::permits(1)), timer: Timer::Off }
    }

    /// `acquire_many_async(permits)`.
    pub(crate) fn many(bulkhead: &'a Bulkhead, request: Request) -> Self {
        Acquire { bulkhead, core: Core::new(true, request), timer: Timer::Off }
    }
}

impl<'a> Future for Acquire<'a> {
    type Output = Result<Permit<'a>, BulkheadFull>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let bulkhead: &'a Bulkhead = this.bulkhead;
        let permits = this.core.permits();
        this.core
            .poll(this.timer, bulkhead, cx, engine_timer)
            .map(|r| r.map(|mark| Permit::with_permits(bulkhead, permits, mark)))
    }
}

impl fmt::Debug for Acquire<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.core.fmt(f)
    }
}

pin_project! {
    /// The future returned by [`Bulkhead::acquire_async_with_sleep`].
    ///
    /// Not `Unpin` when the sleep is not: the sleep is pinned inside it.
    ///
    /// # Cancel safety
    ///
    /// Dropping it at any point loses nothing: see [`Bulkhead::acquire_async`].
    #[must_use = "futures do nothing unless polled"]
    pub struct AcquireWithSleep<'a, M, S> {
        bulkhead: &'a Bulkhead,
        make_sleep: Option<M>,
        core: Core,
        #[pin]
        timer: Timer<S>,
    }

    impl<M, S> PinnedDrop for AcquireWithSleep<'_, M, S> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            this.core.cancel(this.bulkhead);
        }
    }
}

impl<'a, M, S> AcquireWithSleep<'a, M, S>
where
    M: FnOnce(Duration) -> S,
    S: Future,
{
    pub(crate) fn new(bulkhead: &'a Bulkhead, make_sleep: M) -> Self {
        AcquireWithSleep {
            bulkhead,
            make_sleep: Some(make_sleep),
            core: Core::new(false, Request::permits(1)),
            timer: Timer::Off,
        }
    }
}

impl<'a, M, S> Future for AcquireWithSleep<'a, M, S>
where
    M: FnOnce(Duration) -> S,
    S: Future,
{
    type Output = Result<Permit<'a>, BulkheadFull>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let bulkhead: &'a Bulkhead = this.bulkhead;
        let make_sleep = this.make_sleep;
        let arm = |wait| make_sleep.take().map(|make| make(wait));
        this.core
            .poll(this.timer, bulkhead, cx, arm)
            .map(|r| r.map(|mark| Permit::new(bulkhead, mark)))
    }
}

impl<M, S> fmt::Debug for AcquireWithSleep<'_, M, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.core.fmt(f)
    }
}

pin_project! {
    /// The future returned by [`Bulkhead::acquire_owned_async`]: `Send + 'static`.
    ///
    /// Not `Unpin`, like [`Acquire`]: its timer is pinned inside it.
    ///
    /// # Cancel safety
    ///
    /// Dropping it at any point loses nothing: see [`Bulkhead::acquire_async`].
    #[must_use = "futures do nothing unless polled"]
    pub struct AcquireOwned {
        bulkhead: Arc<Bulkhead>,
        core: Core,
        #[pin]
        timer: Timer<EngineTimer>,
    }

    impl PinnedDrop for AcquireOwned {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            this.core.cancel(this.bulkhead);
        }
    }
}

impl AcquireOwned {
    pub(crate) fn new(bulkhead: Arc<Bulkhead>) -> Self {
        AcquireOwned { bulkhead, core: Core::new(true, Request::permits(1)), timer: Timer::Off }
    }

    /// `acquire_many_owned_async(permits)`.
    pub(crate) fn many(bulkhead: Arc<Bulkhead>, request: Request) -> Self {
        AcquireOwned { bulkhead, core: Core::new(true, request), timer: Timer::Off }
    }
}

impl Future for AcquireOwned {
    type Output = Result<OwnedPermit, BulkheadFull>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let bulkhead = this.bulkhead;
        let permits = this.core.permits();
        this.core
            .poll(this.timer, bulkhead, cx, engine_timer)
            .map(|r| r.map(|mark| OwnedPermit::with_permits(Arc::clone(bulkhead), permits, mark)))
    }
}

impl fmt::Debug for AcquireOwned {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.core.fmt(f)
    }
}

/// The future returned by [`Bulkhead::drained`]: completes when the bulkhead is closed and
/// no call is in flight.
///
/// # Cancel safety
///
/// Dropping it at any point leaves the drain wait and changes nothing else.
#[must_use = "futures do nothing unless polled"]
pub struct Drained<'a> {
    bulkhead: &'a Bulkhead,
    wait: DrainWait,
}

impl<'a> Drained<'a> {
    pub(crate) fn new(bulkhead: &'a Bulkhead) -> Self {
        Drained { bulkhead, wait: DrainWait::new() }
    }
}

impl Future for Drained<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        this.wait.poll(this.bulkhead, cx)
    }
}

impl Drop for Drained<'_> {
    fn drop(&mut self) {
        self.wait.cancel(self.bulkhead);
    }
}

/// A drain wait's state, apart from the bulkhead it waits on: [`Drained`]'s, and the keyed
/// bulkhead's, which waits on several bulkheads in turn.
#[derive(Debug)]
pub(crate) struct DrainWait {
    key: Option<WaitKey>,
    done: bool,
}

impl DrainWait {
    pub(crate) const fn new() -> Self {
        DrainWait { key: None, done: false }
    }

    /// Ready once `bulkhead` is closed and no call is in flight.
    pub(crate) fn poll(&mut self, bulkhead: &Bulkhead, cx: &mut Context<'_>) -> Poll<()> {
        assert!(!self.done, "a bulkhead drained future was polled after it completed");
        let sem = bulkhead.sem();
        let drained = match self.key {
            // Registered under the lock that completes drain waits: a drain either came
            // before (seen here) or wakes this waker.
            Some(key) => sem.poll_wait(key, Some(cx.waker())).is_some(),
            None => match sem.wait_drained(Wake::task(cx.waker())) {
                Some(key) => {
                    self.key = Some(key);
                    false
                }
                None => true,
            },
        };
        if drained {
            self.key = None;
            self.done = true;
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }

    /// Leaves the wait on `bulkhead`, if one is queued (on drop).
    pub(crate) fn cancel(&mut self, bulkhead: &Bulkhead) {
        if let Some(key) = self.key.take() {
            // A drain wait owns no permit: whatever it ended with, nothing is left to do.
            let _ = bulkhead.sem().withdraw(key);
        }
    }
}

impl fmt::Debug for Drained<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Drained")
            .field("waiting", &self.wait.key.is_some())
            .field("done", &self.wait.done)
            .finish()
    }
}

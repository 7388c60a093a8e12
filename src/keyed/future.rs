//! The keyed bulkhead's borrowed futures, named so that a runtime author can store them in a
//! struct without boxing (issue 30): [`AcquireKeyed`] (`acquire_async`,
//! `acquire_many_async`), [`AcquireKeyedWithSleep`] (`acquire_async_with_sleep`) and
//! [`KeyedDrained`] (`drained`); and the owned one, [`AcquireOwnedKeyed`]
//! (`acquire_owned_async`, `acquire_many_owned_async`).
//!
//! Each acquire waits at two levels in turn, the key's bulkhead (held by `Arc`: the key may
//! be evicted from the map while its caller waits) and then the total (borrowed from the
//! keyed bulkhead), with one [`Core`] and one pinned timer reused from the first level to the
//! second. Nothing is allocated per wait.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{ready, Context, Poll};
use core::time::Duration;
use std::sync::Arc;

use pin_project_lite::pin_project;

use super::permit::{KeyedPermit, OwnedKeyedPermit};
use super::{share, KeyedBulkhead};
use crate::bulkhead::error::BulkheadFull;
use crate::bulkhead::future::{engine_timer, AcquireOwned, Core, DrainWait, EngineTimer, Timer};
use crate::bulkhead::permit::{OwnedPermit, Permit};
use crate::bulkhead::request::Request;
use crate::bulkhead::Bulkhead;

/// Where a two-level wait stands.
enum Stage<'a> {
    /// The look-up refused (too many keys, no fallback key; or a request above the total's
    /// limit): reported on the first poll.
    Refused(Option<BulkheadFull>),
    /// Waiting for the key's slots; then the total's, if there is one. `guarantee`: the
    /// key's guaranteed share, with shares (`share.rs`): the total is asked in the share's
    /// class, read once the key's slots are held.
    Key {
        key: Arc<Bulkhead>,
        total: Option<&'a Bulkhead>,
        request: Request,
        guarantee: Option<u32>,
    },
    /// Holding the key's slots, waiting for the total's.
    Total {
        total: &'a Bulkhead,
        permit: Option<KeyedPermit<'a>>,
    },
    Done,
}

pin_project! {
    /// The two levels' wait, over the timer of either future: the bulkheads' own (`S` is
    /// [`EngineTimer`]) or a caller's sleep.
    struct TwoLevel<'a, S> {
        stage: Stage<'a>,
        core: Core,
        engine_timed: bool,
        #[pin]
        timer: Timer<S>,
    }

    impl<S> PinnedDrop for TwoLevel<'_, S> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            // A queued wait leaves its queue (a slot granted meanwhile is passed on); key
            // slots already held go with the permit in `Stage::Total`.
            match this.stage {
                Stage::Key { key, .. } => this.core.cancel(key),
                Stage::Total { total, .. } => this.core.cancel(total),
                Stage::Refused(_) | Stage::Done => {}
            }
        }
    }
}

impl<S> TwoLevel<'_, S> {
    fn stage(&self) -> &'static str {
        match self.stage {
            Stage::Refused(_) => "refused",
            Stage::Key { .. } => "key",
            Stage::Total { .. } => "total",
            Stage::Done => "done",
        }
    }
}

impl<'a, S: Future> TwoLevel<'a, S> {
    fn new(
        looked_up: Result<Arc<Bulkhead>, BulkheadFull>,
        total: Option<&'a Bulkhead>,
        request: Request,
        engine_timed: bool,
        guarantee: Option<u32>,
    ) -> Self {
        let stage = match looked_up {
            Ok(key) => Stage::Key { key, total, request, guarantee },
            Err(refused) => Stage::Refused(Some(refused)),
        };
        TwoLevel { stage, core: Core::new(engine_timed, request), engine_timed, timer: Timer::Off }
    }

    fn poll_with(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut arm: impl FnMut(Duration) -> Option<S>,
    ) -> Poll<Result<KeyedPermit<'a>, BulkheadFull>> {
        let mut this = self.project();
        loop {
            let done = match this.stage {
                Stage::Refused(refused) => Err(refused.take().expect("reported once")),
                Stage::Key { key, .. } => {
                    match ready!(this.core.poll(this.timer.as_mut(), key, cx, &mut arm)) {
                        Err(refused) => Err(refused),
                        Ok(mark) => {
                            let permits = this.core.permits();
                            let Stage::Key { key, total, request, guarantee } =
                                core::mem::replace(this.stage, Stage::Done)
                            else {
                                unreachable!("matched above")
                            };
                            // The slots move to the key's part of the permit, on the same
                            // `Arc`: no release in between.
                            let permit = KeyedPermit::key_slots(key, permits, mark);
                            match total {
                                None => Ok(permit),
                                Some(total) => {
                                    // The same request of the total as of the key (in the
                                    // share's class, with shares), with a fresh wait (the
                                    // key's is over).
                                    let request = match guarantee {
                                        None => request,
                                        Some(g) => share::at_total(g, &permit.key, request),
                                    };
                                    *this.core = Core::new(*this.engine_timed, request);
                                    this.timer.set(Timer::Off);
                                    *this.stage = Stage::Total { total, permit: Some(permit) };
                                    continue;
                                }
                            }
                        }
                    }
                }
                Stage::Total { total, permit } => {
                    let total: &'a Bulkhead = total;
                    let answer = ready!(this.core.poll(this.timer.as_mut(), total, cx, &mut arm));
                    let permits = this.core.permits();
                    let permit =
                        permit.take().expect("the key's slots are held until the total answers");
                    permit.with_total(Some(
                        answer.map(|mark| Permit::with_permits(total, permits, mark)),
                    ))
                }
                Stage::Done => panic!("a keyed acquire future was polled after it completed"),
            };
            *this.stage = Stage::Done;
            return Poll::Ready(done);
        }
    }
}

pin_project! {
    /// The future returned by [`KeyedBulkhead::acquire_async`] and
    /// [`KeyedBulkhead::acquire_many_async`]: waits for its slots of the key, then as many
    /// of the total, each up to its bulkhead's max wait (kept by the bulkheads' own
    /// timers), each granted whole.
    ///
    /// Not `Unpin`, like [`Acquire`](crate::Acquire): its timer is pinned inside it. It
    /// allocates nothing.
    ///
    /// # Cancel safety
    ///
    /// Dropping it at any point loses nothing: a queued wait leaves its queue (a slot
    /// granted meanwhile is passed on), and the key slots already taken are released.
    #[must_use = "futures do nothing unless polled"]
    pub struct AcquireKeyed<'a> {
        #[pin]
        inner: TwoLevel<'a, EngineTimer>,
    }
}

impl<'a> AcquireKeyed<'a> {
    pub(super) fn new(
        looked_up: Result<Arc<Bulkhead>, BulkheadFull>,
        total: Option<&'a Bulkhead>,
        request: Request,
        guarantee: Option<u32>,
    ) -> Self {
        AcquireKeyed { inner: TwoLevel::new(looked_up, total, request, true, guarantee) }
    }
}

impl<'a> Future for AcquireKeyed<'a> {
    type Output = Result<KeyedPermit<'a>, BulkheadFull>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project().inner.poll_with(cx, engine_timer)
    }
}

impl fmt::Debug for AcquireKeyed<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AcquireKeyed").field("waiting_for", &self.inner.stage()).finish()
    }
}

pin_project! {
    /// The future returned by [`KeyedBulkhead::acquire_async_with_sleep`]: as
    /// [`AcquireKeyed`], each level's wait bounded by a sleep that `make_sleep` builds (at
    /// most one per level), none of the crate's timers.
    ///
    /// Not `Unpin` when the sleep is not: the sleep is pinned inside it.
    ///
    /// # Cancel safety
    ///
    /// As [`AcquireKeyed`].
    #[must_use = "futures do nothing unless polled"]
    pub struct AcquireKeyedWithSleep<'a, M, F> {
        make_sleep: M,
        #[pin]
        inner: TwoLevel<'a, F>,
    }
}

impl<'a, M, F> AcquireKeyedWithSleep<'a, M, F>
where
    M: FnMut(Duration) -> F,
    F: Future,
{
    pub(super) fn new(
        looked_up: Result<Arc<Bulkhead>, BulkheadFull>,
        total: Option<&'a Bulkhead>,
        make_sleep: M,
        guarantee: Option<u32>,
    ) -> Self {
        let inner = TwoLevel::new(looked_up, total, Request::permits(1), false, guarantee);
        AcquireKeyedWithSleep { make_sleep, inner }
    }
}

impl<'a, M, F> Future for AcquireKeyedWithSleep<'a, M, F>
where
    M: FnMut(Duration) -> F,
    F: Future,
{
    type Output = Result<KeyedPermit<'a>, BulkheadFull>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let make_sleep = this.make_sleep;
        this.inner.poll_with(cx, |wait| Some(make_sleep(wait)))
    }
}

impl<M, F> fmt::Debug for AcquireKeyedWithSleep<'_, M, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AcquireKeyedWithSleep").field("waiting_for", &self.inner.stage()).finish()
    }
}

/// The future returned by [`KeyedBulkhead::drained`]: completes once the keyed bulkhead is
/// closed and no call is in flight at any key or at the total.
///
/// # Cancel safety
///
/// Dropping it at any point leaves the drain wait it is in and changes nothing else.
#[must_use = "futures do nothing unless polled"]
pub struct KeyedDrained<'a, K, S> {
    keyed: &'a KeyedBulkhead<K, S>,
    /// The keys' bulkheads as `close` left them, once the close signal drained; `None`
    /// before.
    keys: Option<Vec<Arc<Bulkhead>>>,
    /// The bulkhead waited on: an index into `keys`, then `keys.len()` for the total.
    next: usize,
    wait: DrainWait,
}

impl<'a, K, S> KeyedDrained<'a, K, S> {
    pub(super) fn new(keyed: &'a KeyedBulkhead<K, S>) -> Self {
        KeyedDrained { keyed, keys: None, next: 0, wait: DrainWait::new() }
    }
}

/// [`KeyedDrained`]'s bulkhead at `next`: the close signal until `keys` is known, then each
/// key's, then the total (if any).
fn current<'a, 'k, K, S>(
    keyed: &'a KeyedBulkhead<K, S>,
    keys: Option<&'k [Arc<Bulkhead>]>,
    next: usize,
) -> Option<&'k Bulkhead>
where
    'a: 'k,
{
    match keys {
        None => Some(&keyed.close_signal),
        Some(keys) => match keys.get(next) {
            Some(key) => Some(key),
            None if next == keys.len() => keyed.total.as_deref(),
            None => None,
        },
    }
}

impl<K, S> Future for KeyedDrained<'_, K, S> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        while let Some(bulkhead) = current(this.keyed, this.keys.as_deref(), this.next) {
            ready!(this.wait.poll(bulkhead, cx));
            this.wait = DrainWait::new();
            match this.keys {
                // Closed (the signal drained): close every key and the total, then wait on
                // each in turn.
                None => this.keys = Some(this.keyed.close_keys()),
                Some(_) => this.next += 1,
            }
        }
        Poll::Ready(())
    }
}

impl<K, S> Drop for KeyedDrained<'_, K, S> {
    fn drop(&mut self) {
        if let Some(bulkhead) = current(self.keyed, self.keys.as_deref(), self.next) {
            self.wait.cancel(bulkhead);
        }
    }
}

impl<K, S> fmt::Debug for KeyedDrained<'_, K, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedDrained")
            .field("closed", &self.keys.is_some())
            .field("keys_drained", &self.next)
            .finish()
    }
}

pin_project! {
    /// The future returned by [`KeyedBulkhead::acquire_owned_async`] and
    /// [`KeyedBulkhead::acquire_many_owned_async`]: waits for its slots of the key, then as
    /// many of the total (each up to its bulkhead's max wait, each granted whole).
    /// `Send + 'static`.
    ///
    /// # Cancel safety
    ///
    /// Dropping it at any point loses nothing: a queued wait leaves its queue, and the key
    /// slots already taken are released.
    #[must_use = "futures do nothing unless polled"]
    pub struct AcquireOwnedKeyed {
        #[pin]
        state: OwnedState,
    }
}

pin_project! {
    #[project = OwnedStateProj]
    enum OwnedState {
        // The look-up refused (too many keys, no fallback key).
        Refused { refused: Option<BulkheadFull> },
        Key {
            #[pin]
            acquire: AcquireOwned,
            total: Option<Arc<Bulkhead>>,
            // The request, kept for the total (the key's acquire has its own copy).
            request: Request,
            // The key's guaranteed share, with shares (`share.rs`): the total is asked in
            // the share's class, read once the key's slots are held.
            guarantee: Option<u32>,
        },
        Total {
            #[pin]
            acquire: AcquireOwned,
            key: Option<OwnedPermit>,
        },
        Done,
    }
}

impl AcquireOwnedKeyed {
    /// Waits for `permits` slots of the looked-up key's bulkhead, then as many of `total`
    /// (in the class of the key's `guarantee`, with shares).
    pub(crate) fn new(
        looked_up: Result<Arc<Bulkhead>, BulkheadFull>,
        total: Option<Arc<Bulkhead>>,
        request: Request,
        guarantee: Option<u32>,
    ) -> Self {
        let state = match looked_up {
            Ok(bulkhead) => {
                let acquire = AcquireOwned::many(bulkhead, request);
                OwnedState::Key { acquire, total, request, guarantee }
            }
            Err(refused) => OwnedState::Refused { refused: Some(refused) },
        };
        AcquireOwnedKeyed { state }
    }
}

impl Future for AcquireOwnedKeyed {
    type Output = Result<OwnedKeyedPermit, BulkheadFull>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            let next = match state.as_mut().project() {
                OwnedStateProj::Refused { refused } => {
                    Err(refused.take().expect("a refusal is reported once"))
                }
                OwnedStateProj::Key { acquire, total, request, guarantee } => {
                    match ready!(acquire.poll(cx)) {
                        Err(refused) => Err(refused),
                        Ok(key) => match total.take() {
                            None => OwnedKeyedPermit::both(key, None),
                            Some(total) => {
                                // The same request of the total as of the key, in the share's
                                // class with shares.
                                let request = match *guarantee {
                                    None => *request,
                                    Some(g) => share::at_total(g, key.bulkhead(), *request),
                                };
                                let acquire = AcquireOwned::many(total, request);
                                state.set(OwnedState::Total { acquire, key: Some(key) });
                                continue;
                            }
                        },
                    }
                }
                OwnedStateProj::Total { acquire, key } => {
                    let acquired = ready!(acquire.poll(cx));
                    let key = key.take().expect("the key's slot is held until the total answers");
                    OwnedKeyedPermit::both(key, Some(acquired))
                }
                OwnedStateProj::Done => panic!("AcquireOwnedKeyed polled after completion"),
            };
            state.set(OwnedState::Done);
            return Poll::Ready(next);
        }
    }
}

impl fmt::Debug for AcquireOwnedKeyed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let stage = match &self.state {
            OwnedState::Refused { .. } => "refused",
            OwnedState::Key { .. } => "key",
            OwnedState::Total { .. } => "total",
            OwnedState::Done => "done",
        };
        f.debug_struct("AcquireOwnedKeyed").field("waiting_for", &stage).finish()
    }
}

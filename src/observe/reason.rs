//! Why a call was refused: what the refusal error, the events, the counters and `tracing`
//! all report.

use core::fmt;

/// Why a call was refused.
///
/// ```
/// use bulkhead::{Bulkhead, BulkheadConfig, RejectReason};
/// let bulkhead = Bulkhead::new("bank", BulkheadConfig::builder().max_concurrent_calls(0).build()?);
/// assert_eq!(bulkhead.try_acquire().unwrap_err().reason(), RejectReason::Full);
/// # Ok::<(), bulkhead::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RejectReason {
    /// No slot was free and the caller was not allowed to wait (max wait zero, or
    /// `try_acquire`).
    Full,
    /// The caller waited its whole max wait and no slot freed.
    WaitTimedOut,
    /// No slot was free and `max_waiting_calls` callers were already waiting.
    TooManyWaiting,
    /// The bulkhead was closed ([`Bulkhead::close`](crate::Bulkhead::close)): it refuses
    /// every call, and refused this caller while it waited, if it did.
    Closed,
    /// A [`KeyedBulkhead`](crate::keyed::KeyedBulkhead) refused a key it had no room for:
    /// the key was not live, `max_keys` keys were and none was idle, and there is no
    /// fallback key. The error names the key (`"{name}/{key}"`) and gives `max_keys` as its
    /// [`max_concurrent_calls`](crate::BulkheadFull::max_concurrent_calls).
    TooManyKeys,
    /// The caller asked for more permits at once than the limit
    /// ([`Bulkhead::try_acquire_many`](crate::Bulkhead::try_acquire_many) and the other
    /// weighted acquires): refused at once, without waiting, since no release could satisfy
    /// it; or, while it waited, a shrink put the limit below its request when it was at the
    /// head of the queue.
    ExceedsLimit,
    /// The caller was queued and the queue refused it while it waited (see
    /// [`QueueOrder`](crate::QueueOrder) and [`Criticality`](crate::Criticality)): a full
    /// queue made room for a newcomer served before it (LIFO: the oldest waiter; any order:
    /// a waiter of a lower class), or, under adaptive LIFO, the queue stood and it was older
    /// than the target.
    Evicted,
    /// A sheddable call that did not wait was held back by
    /// [`sheddable_headroom`](crate::BulkheadConfigBuilder::sheddable_headroom) while slots
    /// were free: nobody was queued and its permits were free, but not its permits plus the
    /// headroom, which is kept for default and critical calls (see
    /// [`Criticality`](crate::Criticality)). Given by
    /// [`try_acquire_many`](crate::Bulkhead::try_acquire_many) with
    /// [`Criticality::Sheddable`](crate::Criticality::Sheddable), and by the waiting weighted
    /// acquires under a zero max wait; a sheddable caller allowed to wait queues for the
    /// headroom instead. A sheddable request that could never be granted (its permits plus
    /// the headroom above the limit) is [`ExceedsLimit`](Self::ExceedsLimit); one refused
    /// while others are queued, or with fewer than its permits free, is [`Full`](Self::Full).
    ///
    /// ```
    /// use bulkhead::{Bulkhead, BulkheadConfig, Criticality, RejectReason};
    /// let config = BulkheadConfig::builder().max_concurrent_calls(4).sheddable_headroom(2).build()?;
    /// let search = Bulkhead::new("search", config);
    /// let prefetch = search.try_acquire_many(Criticality::Sheddable)?;
    /// let _other = search.try_acquire_many(Criticality::Sheddable)?;
    /// // 2 free, both kept for calls that are not sheddable:
    /// let refused = search.try_acquire_many(Criticality::Sheddable).unwrap_err();
    /// assert_eq!(refused.reason(), RejectReason::Reserved);
    /// assert_eq!(search.metrics().available_concurrent_calls(), 2);
    /// # drop(prefetch);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    Reserved,
}

impl RejectReason {
    /// Every reason, in declaration order: `ALL[r.index()] == r`. Per-reason counters are
    /// arrays of this length, so a new reason is one more entry here (and its label below).
    pub(crate) const ALL: [RejectReason; 8] = [
        RejectReason::Full,
        RejectReason::WaitTimedOut,
        RejectReason::TooManyWaiting,
        RejectReason::Closed,
        RejectReason::TooManyKeys,
        RejectReason::ExceedsLimit,
        RejectReason::Evicted,
        RejectReason::Reserved,
    ];

    /// The position of this reason in [`ALL`](Self::ALL).
    #[inline]
    pub(crate) const fn index(self) -> usize {
        self as usize
    }

    /// The index of a fast path's refusal: `Closed` if `closed`, else `Full`, without a branch.
    #[inline]
    pub(crate) const fn refused_index(closed: bool) -> usize {
        closed as usize * RejectReason::Closed.index()
            + !closed as usize * RejectReason::Full.index()
    }

    /// A stable, lower-case, machine-friendly name: the `reason` label of the exported
    /// rejection counter and the `reason` field of `tracing` events.
    ///
    /// ```
    /// use bulkhead::RejectReason;
    /// assert_eq!(RejectReason::Full.label(), "full");
    /// assert_eq!(RejectReason::WaitTimedOut.label(), "wait_timed_out");
    /// assert_eq!(RejectReason::TooManyWaiting.label(), "too_many_waiting");
    /// assert_eq!(RejectReason::Closed.label(), "closed");
    /// assert_eq!(RejectReason::TooManyKeys.label(), "too_many_keys");
    /// assert_eq!(RejectReason::ExceedsLimit.label(), "exceeds_limit");
    /// assert_eq!(RejectReason::Evicted.label(), "evicted");
    /// assert_eq!(RejectReason::Reserved.label(), "reserved");
    /// ```
    pub const fn label(self) -> &'static str {
        match self {
            RejectReason::Full => "full",
            RejectReason::WaitTimedOut => "wait_timed_out",
            RejectReason::TooManyWaiting => "too_many_waiting",
            RejectReason::Closed => "closed",
            RejectReason::TooManyKeys => "too_many_keys",
            RejectReason::ExceedsLimit => "exceeds_limit",
            RejectReason::Evicted => "evicted",
            RejectReason::Reserved => "reserved",
        }
    }

    /// What the bulkhead did, as the refusal's message says it after the bulkhead's name
    /// (`Bulkhead 'NAME' ...`): each reason its own sentence; `Full` keeps Resilience4j's.
    pub(crate) const fn sentence(self) -> &'static str {
        match self {
            RejectReason::Full => "is full and does not permit further calls",
            RejectReason::WaitTimedOut => "stayed full for the call's whole max wait",
            RejectReason::TooManyWaiting => {
                "is full and already has as many callers waiting as it allows"
            }
            RejectReason::Closed => "is closed and permits no further calls",
            RejectReason::TooManyKeys => "has no room for another key",
            RejectReason::ExceedsLimit => "cannot grant this request under its current limit",
            RejectReason::Evicted => "evicted the call from its queue to serve another first",
            RejectReason::Reserved => {
                "keeps its remaining free permits for calls that are not sheddable"
            }
        }
    }
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RejectReason::Full => "full",
            RejectReason::WaitTimedOut => "wait timed out",
            RejectReason::TooManyWaiting => "too many waiting",
            RejectReason::Closed => "closed",
            RejectReason::TooManyKeys => "too many keys",
            RejectReason::ExceedsLimit => "request exceeds the limit",
            RejectReason::Evicted => "evicted from the queue",
            RejectReason::Reserved => "held back by the sheddable headroom",
        })
    }
}

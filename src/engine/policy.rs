//! What the queue does under overload: the order it serves waiters in ([`QueueOrder`]) and
//! the class a caller asks in ([`Criticality`]). The engine (`state.rs`) applies both under
//! its queue lock; the fast paths of a bulkhead that uses neither are unchanged.

use core::fmt;
use core::time::Duration;

/// The order in which a bulkhead serves its queued callers, and whom it refuses to make
/// room. Set with [`BulkheadConfigBuilder::queue_order`](crate::BulkheadConfigBuilder::queue_order),
/// changed at run time with [`Bulkhead::change_config`](crate::Bulkhead::change_config), or
/// in a config file as `queue-order` (see the crate's config-file docs).
///
/// Whatever the order, [`Criticality`] comes first: a queued critical caller is served before
/// any default one, and a default one before any sheddable one. The order decides within a
/// class.
///
/// | order | serves | a full queue (`max_waiting_calls`) | use it when |
/// |---|---|---|---|
/// | `Fifo` (default) | oldest first | refuses the newcomer (`TooManyWaiting`) | load is below capacity with bursts: everyone is served in turn |
/// | `Lifo` | newest first | refuses its *oldest* waiter ([`RejectReason::Evicted`](crate::RejectReason::Evicted)) to queue the newcomer | callers give up soon: the newest still has time to use an answer |
/// | `AdaptiveLifo` | oldest first until the queue stands, then newest first | as the current mode | sustained overload with short client deadlines: the best of both |
///
/// # Adaptive LIFO
///
/// FIFO while the queue drains in time. Once the oldest waiter has been older than `target`
/// for a whole `interval` (CoDel's test: the *minimum* queueing delay over an interval
/// exceeds the target), the queue counts as standing: it serves the newest first and
/// refuses, with [`RejectReason::Evicted`](crate::RejectReason::Evicted), every waiter older
/// than `target` it finds when it next serves or queues, except the one it serves next (a
/// freed permit never idles while anyone waits). It returns to FIFO once no waiter has been
/// older than `target` for a whole `interval`; a queue that empties now and then under
/// sustained overload stays standing. Ages are measured on the bulkhead's clock when a
/// waiter queues; checks happen when a permit is released or a caller queues (so a waiter
/// may outlive `target` by the time to the next of those, and never its own max wait).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use bulkhead::{BulkheadConfig, QueueOrder};
/// let config = BulkheadConfig::builder()
///     .max_concurrent_calls(16)
///     .max_wait_duration(Duration::from_millis(500))
///     .queue_order(QueueOrder::AdaptiveLifo {
///         target: Duration::from_millis(10),
///         interval: Duration::from_millis(100),
///     })
///     .build()?;
/// assert!(matches!(config.queue_order(), QueueOrder::AdaptiveLifo { .. }));
/// # Ok::<(), bulkhead::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum QueueOrder {
    /// Oldest first; a full queue refuses the newcomer.
    #[default]
    Fifo,
    /// Newest first; a full queue refuses its oldest waiter to make room.
    Lifo,
    /// FIFO while the queue drains in time; LIFO, refusing waiters older than `target`, once
    /// the oldest waiter has stayed older than `target` for `interval`, until no waiter has
    /// been for `interval`.
    AdaptiveLifo {
        /// The queueing delay the queue should stay under (CoDel's target; 5–20 ms is usual,
        /// well under the callers' own deadline).
        target: Duration,
        /// How long the oldest waiter must stay older than `target` before the queue counts
        /// as standing (CoDel's interval; about the callers' round trip, e.g. 100 ms).
        interval: Duration,
    },
}

impl QueueOrder {
    /// Whether the order reads the clock when a caller queues: only adaptive LIFO does.
    pub(crate) fn is_adaptive(self) -> bool {
        matches!(self, QueueOrder::AdaptiveLifo { .. })
    }

    /// The name used in config files: `fifo`, `lifo` or `adaptive-lifo`.
    ///
    /// ```
    /// use bulkhead::QueueOrder;
    /// assert_eq!(QueueOrder::Lifo.label(), "lifo");
    /// ```
    pub const fn label(self) -> &'static str {
        match self {
            QueueOrder::Fifo => "fifo",
            QueueOrder::Lifo => "lifo",
            QueueOrder::AdaptiveLifo { .. } => "adaptive-lifo",
        }
    }
}

impl fmt::Display for QueueOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueueOrder::AdaptiveLifo { target, interval } => {
                write!(f, "adaptive-lifo (target {target:?}, interval {interval:?})")
            }
            other => f.write_str(other.label()),
        }
    }
}

/// How much a call matters when the bulkhead is overloaded. Given per call in a
/// [`Request`](crate::Request); a call that gives none is [`Default`](Criticality::Default).
///
/// What is guaranteed, exactly:
///
/// * **Queue priority.** A queued critical caller is served before every queued default one,
///   and a default one before every sheddable one, whatever the [`QueueOrder`] (which orders
///   each class). A waiting caller queues behind nobody of a lower class: if permits are free
///   and nobody of its class or above is queued (or its order serves it first), it is
///   admitted at once.
/// * **Eviction.** A full queue (`max_waiting_calls`) makes room for a newcomer that would be
///   served before its last-served waiter, and refuses that waiter with
///   [`RejectReason::Evicted`](crate::RejectReason::Evicted): a critical newcomer evicts a
///   sheddable or default waiter, a default one a sheddable waiter. Otherwise the newcomer
///   is refused (`TooManyWaiting`).
/// * **Headroom.** A sheddable call is admitted only if
///   [`sheddable_headroom`](crate::BulkheadConfigBuilder::sheddable_headroom) permits stay
///   free after it: those permits are for critical and default calls alone. With sheddable
///   traffic alone saturating the bulkhead, critical and default calls still find that many
///   permits, waiting or not, sheddable callers queued or not. A sheddable request that
///   could never be granted (its permits plus the headroom above the limit) is refused with
///   [`RejectReason::ExceedsLimit`](crate::RejectReason::ExceedsLimit), before it queues or,
///   queued, as soon as a smaller limit or a larger headroom leaves it no room.
/// * **No barging within a class; none by sheddable calls.** A non-waiting call
///   (`try_acquire`, a zero max wait) takes what a waiting call of its class would be
///   granted at once: it is refused while anyone of its class or a higher one is queued
///   (under FIFO), and takes permits free but held back for a queued caller of a lower class
///   (a sheddable one below the headroom, or a lower-class weighted one needing more). A
///   sheddable non-waiting call is refused while anyone is queued (`Full`); one refused
///   only for the headroom, with its permits free and nobody queued, is
///   [`RejectReason::Reserved`](crate::RejectReason::Reserved).
///
/// A bulkhead whose callers never give a criticality pays nothing for it: the default
/// class takes the plain fast paths.
///
/// ```
/// use bulkhead::{Bulkhead, BulkheadConfig, Criticality, RejectReason, Request};
/// let config = BulkheadConfig::builder().max_concurrent_calls(4).sheddable_headroom(2).build()?;
/// let bulkhead = Bulkhead::new("search", config);
/// let batch = bulkhead.try_acquire_many(Request::permits(2).criticality(Criticality::Sheddable))?;
/// // 2 free, but both are kept from sheddable calls:
/// let refused = bulkhead.try_acquire_many(Criticality::Sheddable).unwrap_err();
/// assert_eq!(refused.reason(), RejectReason::Reserved);
/// // a default or critical call takes them:
/// let user = bulkhead.try_acquire_many(Criticality::Critical)?;
/// # drop((batch, user));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Criticality {
    /// Served first; may take permits held back for lower classes; never evicted by them.
    Critical = 0,
    /// The class of every call that gives none.
    #[default]
    Default = 1,
    /// Served last, evicted first, and kept out of the headroom.
    Sheddable = 2,
}

impl Criticality {
    /// The number of classes: one waiter list each.
    pub(crate) const COUNT: usize = 3;

    /// The class's waiter list (its priority: 0 is served first).
    #[inline]
    pub(crate) const fn index(self) -> usize {
        self as usize
    }

    /// The name used in config files and labels: `critical`, `default`, `sheddable`.
    ///
    /// ```
    /// use bulkhead::Criticality;
    /// assert_eq!(Criticality::Sheddable.label(), "sheddable");
    /// ```
    pub const fn label(self) -> &'static str {
        match self {
            Criticality::Critical => "critical",
            Criticality::Default => "default",
            Criticality::Sheddable => "sheddable",
        }
    }
}

impl fmt::Display for Criticality {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

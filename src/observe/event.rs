//! Events emitted to listeners registered with [`Bulkhead::on_event`](crate::Bulkhead::on_event).

use core::fmt;

use crate::observe::name::Name;
use crate::observe::reason::RejectReason;

/// Something that happened to a bulkhead: a call was permitted, rejected or finished.
///
/// # Examples
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use bulkhead::{Bulkhead, BulkheadConfig, BulkheadEventKind};
///
/// let bulkhead = Bulkhead::new("bank", BulkheadConfig::default());
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let sink = Arc::clone(&seen);
/// bulkhead.on_event(move |event| sink.lock().unwrap().push(event.kind()));
/// bulkhead.call(|| ())?;
/// assert_eq!(
///     *seen.lock().unwrap(),
///     [BulkheadEventKind::CallPermitted, BulkheadEventKind::CallFinished]
/// );
/// # Ok::<(), bulkhead::BulkheadFull>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BulkheadEvent {
    name: Name,
    kind: BulkheadEventKind,
}

impl BulkheadEvent {
    pub(crate) fn new(name: Name, kind: BulkheadEventKind) -> Self {
        BulkheadEvent { name, kind }
    }

    /// The name of the bulkhead it happened to.
    pub fn bulkhead_name(&self) -> &str {
        self.name.as_str()
    }

    /// What happened.
    pub fn kind(&self) -> BulkheadEventKind {
        self.kind
    }
}

/// The kind of a [`BulkheadEvent`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BulkheadEventKind {
    /// A caller got a permit.
    CallPermitted,
    /// A caller was refused, and why.
    CallRejected(RejectReason),
    /// A permit was dropped: the call finished (returned, unwound, or was cancelled).
    ///
    /// The permit is already back when this is emitted: a listener may take it at once
    /// (`try_acquire` succeeds), unless a caller was queued, in which case it went to the
    /// oldest waiter, whose `CallPermitted` follows.
    CallFinished,
    /// [`Bulkhead::close`](crate::Bulkhead::close) closed the bulkhead (emitted once).
    Closed,
}

/// What [`Bulkhead::on_event`](crate::Bulkhead::on_event) (and
/// [`AdaptiveControl::on_limit_change`](crate::adaptive::AdaptiveControl::on_limit_change))
/// returns: removes its listener.
/// Dropping the handle leaves the listener registered (most listeners live as long as
/// their bulkhead); clones share the listener.
///
/// # Examples
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
/// use bulkhead::{Bulkhead, BulkheadConfig};
///
/// let bulkhead = Bulkhead::new("bank", BulkheadConfig::for_pool(20));
/// let heard = Arc::new(AtomicUsize::new(0));
/// let counter = Arc::clone(&heard);
/// let handle = bulkhead.on_event(move |_| {
///     counter.fetch_add(1, Ordering::Relaxed);
/// });
/// drop(bulkhead.try_acquire()?); // permitted, finished
/// assert!(handle.remove());
/// drop(bulkhead.try_acquire()?); // not heard
/// assert_eq!(heard.load(Ordering::Relaxed), 2);
/// assert!(!handle.remove(), "removing twice is harmless");
/// # Ok::<(), bulkhead::BulkheadFull>(())
/// ```
#[derive(Clone)]
pub struct ListenerHandle {
    pub(crate) active: std::sync::Arc<crate::engine::sync::AtomicBool>,
}

impl ListenerHandle {
    /// Removes the listener: no event emitted after this returns reaches it (an event
    /// being delivered on another thread at this moment may still finish). Returns whether
    /// it was registered until now; removing twice is harmless. The listener's closure is
    /// kept (not called) until the bulkhead is dropped, and the bulkhead stays observed:
    /// its calls keep checking for listeners.
    pub fn remove(&self) -> bool {
        // Ordering: Relaxed — the flag guards no data: an emit that happens after this
        // returns reads it at or after this store (coherence) and skips the listener.
        self.active.swap(false, crate::engine::sync::Ordering::Relaxed)
    }

    /// Whether the listener is still registered.
    pub fn is_registered(&self) -> bool {
        // Ordering: Relaxed — a snapshot of the flag, which guards no data.
        self.active.load(crate::engine::sync::Ordering::Relaxed)
    }
}

impl fmt::Debug for ListenerHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ListenerHandle").field("registered", &self.is_registered()).finish()
    }
}

//! Events emitted to listeners registered with [`Bulkhead::on_event`](crate::Bulkhead::on_event).

use crate::name::Name;
use crate::RejectReason;

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

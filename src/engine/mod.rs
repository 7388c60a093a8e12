//! The engine: the lock-free semaphore every bulkhead runs on. It knows permits, waiters
//! and deadlines, nothing of names, configurations, observers or algorithms; every other
//! layer stands on it, and it imports none of them.
//!
//! | file | what it holds |
//! |------|---------------|
//! | `state.rs` | the state word, the FIFO waiter queue, the grant/withdraw protocol (start here: its docs are the invariants) |
//! | `policy.rs` | what the queue does under overload: `QueueOrder` and `Criticality` (public) |
//! | `sync.rs` | the only file that names atomics, locks, parkers and the clock: std's, or loom's and shuttle's under their cfgs; and `Expire`, what a deadline fires, which the model clock and the timer both call |
//! | `pad.rs` | `CachePadded`: a hot atomic alone on its cache lines |
//! | `foreign.rs` | calling foreign code the engine must call (a task's `wake`), containing its panics |
//! | `timer.rs` | the process-wide deadline timer of bounded async waits (public: `bulkhead::timer`) |
//! | `model.rs` | the model clock for users who model-check their own code (public under the cfgs: `bulkhead::model`) |
//!
//! The layers above, lowest first: [`observe`](crate::observe) (counters, listeners,
//! events, the refusal reason, names), [`bulkhead`](crate::bulkhead) (the face: `Bulkhead`,
//! its configuration, permits, futures, errors, the limit hook), then
//! [`keyed`](crate::keyed) and [`adaptive`](crate::adaptive), then
//! [`registry`](crate::registry), then [`integrations`](crate::integrations). No file
//! imports from a layer above its own.

pub(crate) mod foreign;
#[cfg(any(bulkhead_loom, bulkhead_shuttle))]
#[cfg_attr(docsrs, doc(cfg(any(bulkhead_loom, bulkhead_shuttle))))]
pub mod model;
pub(crate) mod pad;
pub mod policy;
pub(crate) mod state;
pub(crate) mod sync;
pub mod timer;

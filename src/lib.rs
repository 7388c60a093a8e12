//! A bulkhead caps how many calls to one external system may be in flight at once, and
//! refuses the next one at once: a rejection is a single atomic load.
//!
//! A bulkhead is the layer for the case a timeout and a circuit breaker miss: the downstream
//! answers slowly but is not down, so the breaker stays closed while your threads or tasks
//! pile up waiting on it. Size it below the connection pool ([`BulkheadConfig::for_pool`]
//! gives 80 % of it), let callers wait briefly (100 ms) or not at all, and map
//! [`BulkheadFull`] to "temporarily unavailable" (HTTP 503 or a fallback).
//!
//! It is **not** a rate limiter (it bounds calls in flight, not calls per second), and it
//! never runs your call elsewhere: [`Bulkhead::call`] and [`Bulkhead::call_async`] run it on
//! the caller's own thread or task, so thread-locals and tracing spans stay visible. Use
//! `tokio::sync::Semaphore` instead when you want a bare semaphore as a building block: a
//! `const` static, permits created or destroyed one by one (`add_permits`, `forget`), more
//! than [`BulkheadConfig::MAX_CONCURRENT_CALLS`] permits, and no name, configuration or
//! observers. Both take several permits at once
//! ([`acquire_many`](Bulkhead::acquire_many) and its siblings here) and both close
//! ([`Bulkhead::close`]). Use a bulkhead when you want a named, observable, reconfigurable
//! limit on calls to a downstream, with bounded waits, a fast refusal that says why, and one
//! queue shared by sync and async callers.
//!
//! # Examples
//!
//! ```
//! use bulkhead::{Bulkhead, BulkheadConfig, RejectReason};
//!
//! let bank = Bulkhead::new("bank", BulkheadConfig::for_pool(20)); // 16 calls, 100 ms wait
//! let balance = bank.call(|| "42.00 EUR")?;
//! assert_eq!(balance, "42.00 EUR");
//!
//! let held: Vec<_> = (0..16).map(|_| bank.try_acquire().unwrap()).collect();
//! let err = bank.try_acquire().unwrap_err();
//! assert_eq!(err.reason(), RejectReason::Full);
//! assert!(err.to_string().starts_with("Bulkhead 'bank' is full"));
//! # drop(held);
//! # Ok::<(), bulkhead::BulkheadFull>(())
//! ```
//!
//! # Features
//!
//! | feature | default | what it adds |
//! |---------|---------|--------------|
//! | `tokio` | no      | a blocking acquire on a thread that drives tokio tasks panics (naming `acquire_async`) instead of stalling the runtime. Async waits need no runtime: the bulkhead keeps their deadlines itself ([`timer`]) |
//! | `metrics` | no    | `bulkhead::metrics_export`: Resilience4j-named gauges, call counters and a wait-time histogram through the `metrics` facade, read at scrape time |
//! | `tracing` | no    | `tracing` events (target `bulkhead`) for refused calls (`DEBUG`; `INFO` for a wait that timed out) and waits of 10 ms or more (`DEBUG`), with the bulkhead's name and the reason |
//! | `tower` | no      | `bulkhead::tower::BulkheadLayer`: a bulkhead for outbound tower clients (hyper, tonic), refusing with a boxed [`BulkheadFull`] |
//! | `serde` | no      | `bulkhead::file`: Resilience4j-style `application.yml` / `.toml` files (`resilience4j.bulkhead.*`), the style guide's rules as checks, and `BulkheadRegistry::from_file` |
//! | `macros` | no     | `#[bulkhead(name = "...")]`: a fn or method runs under a named bulkhead of a registry, a refusal mapped into its error type (`From<BulkheadFull>`) or served by a fallback |
//! | `cli`   | no      | the `bulkhead-check` command: prints each instance's effective config and the rules' findings; exits 1 on errors |
//!
//! # Model checking your own code
//!
//! Built with `--cfg bulkhead_loom` or `--cfg bulkhead_shuttle`, the bulkhead runs on loom's
//! or shuttle's primitives and a model clock your test advances, so a crate that embeds it can
//! model-check its own code with the bulkhead inside (`docs/model-checking.md`).
//! The module `bulkhead::model` exists only then; a normal build's API has none of it:
//!
//! ```compile_fail
//! use bulkhead::model as _;
//! ```
//!
//! # Memory ordering
//!
//! Dropping a permit *happens-before* the acquire that next obtains that slot, whether by
//! the fast path or by a hand-off to a queued waiter: whatever the previous holder wrote is
//! visible to the next. Metrics are snapshots and synchronize with nothing.
//!
//! # Minimum supported Rust version
//!
//! Rust 1.75 (`rust-version` in `Cargo.toml`). Requires 64-bit atomics.
#![forbid(unsafe_code)]
#![doc(test(attr(deny(warnings))))]
#![cfg_attr(docsrs, feature(doc_cfg))]

// The layers, lowest first; no module imports from a layer above its own (see
// `engine/mod.rs`).
pub mod adaptive;
pub(crate) mod bulkhead;
pub(crate) mod engine;
pub(crate) mod integrations;

// Its docs are docs/family.md alone (summary line included), so the page says it once.
#[doc = include_str!("../docs/family.md")]
pub mod family {}
pub mod keyed;
pub(crate) mod observe;
pub(crate) mod registry;

pub use crate::bulkhead::config::{BulkheadConfig, BulkheadConfigBuilder, ConfigError};
pub use crate::bulkhead::error::BulkheadFull;
pub use crate::bulkhead::future::{Acquire, AcquireOwned, AcquireWithSleep, Drained};
pub use crate::bulkhead::permit::{Outcome, OwnedPermit, Permit};
pub use crate::bulkhead::request::Request;
pub use crate::bulkhead::Bulkhead;
#[cfg(any(bulkhead_loom, bulkhead_shuttle))]
pub use crate::engine::model;
pub use crate::engine::policy::{Criticality, QueueOrder};
pub use crate::engine::timer;
#[cfg(feature = "serde")]
pub use crate::integrations::file;
#[cfg(feature = "metrics")]
pub use crate::integrations::metrics_export;
#[cfg(feature = "tower")]
pub use crate::integrations::tower;
pub use crate::observe::event::{BulkheadEvent, BulkheadEventKind, ListenerHandle};
pub use crate::observe::metrics::BulkheadMetrics;
pub use crate::observe::reason::RejectReason;
#[doc(hidden)]
pub use crate::registry::global::__private;
pub use crate::registry::{BulkheadRegistry, BulkheadRegistryBuilder, BulkheadSpec, RegistryError};
#[cfg(feature = "macros")]
#[cfg_attr(docsrs, doc(cfg(feature = "macros")))]
pub use bulkhead_macros::bulkhead;

// Runs the README's Rust blocks as doctests, so its examples cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

// The same for the docs/ chapters the README links to (docs/performance.md and
// docs/verification.md have no Rust blocks).
#[cfg(doctest)]
#[doc = include_str!("../docs/overload.md")]
struct OverloadDoctests;
#[cfg(doctest)]
#[doc = include_str!("../docs/config-guide.md")]
struct ConfigGuideDoctests;
#[cfg(doctest)]
#[doc = include_str!("../docs/observability.md")]
struct ObservabilityDoctests;
#[cfg(doctest)]
#[doc = include_str!("../docs/adapters.md")]
struct AdaptersDoctests;
#[cfg(doctest)]
#[doc = include_str!("../docs/family-guide.md")]
struct FamilyGuideDoctests;
#[cfg(doctest)]
#[doc = include_str!("../docs/model-checking.md")]
struct ModelCheckingDoctests;

//! Code a user writes around a bulkhead, model-checked with loom and shuttle.
//!
//! - [`client::PooledClient`]: a blocking client whose bulkhead guards a connection pool,
//!   with a fallback when the bulkhead refuses and a gauge of callers waiting;
//! - [`pipeline::Pipeline`]: a producer admits work with an [`bulkhead::OwnedPermit`] and
//!   sends it, permit and all, over a channel to workers that call the downstream;
//! - [`async_client::AsyncClient`]: an async client with a response cache.
//!
//! Each has a seeded bug behind a cargo feature (see `Cargo.toml`) that `tests/loom.rs` and
//! `tests/shuttle.rs` catch. README.md beside this crate shows the failures.

pub mod async_client;
pub mod client;
pub mod pipeline;
mod sync;

//! The integrations: what connects a bulkhead to the rest of a service. Each stands on the
//! layers below (the face, keyed and adaptive bulkheads, the registry) and none of those
//! imports them.
//!
//! | module | feature | what it adds |
//! |--------|---------|--------------|
//! | [`tower`](crate::tower) | `tower` | `BulkheadLayer` for outbound tower clients |
//! | [`metrics_export`](crate::metrics_export) | `metrics` | one export path through the `metrics` facade for every bulkhead of the family |
//! | [`file`](crate::file) | `serde` | Resilience4j-style config files, the style guide's rules, and building registries and keyed bulkheads from them |

#[cfg(feature = "serde")]
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
pub mod file;
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub mod metrics_export;
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub mod tower;

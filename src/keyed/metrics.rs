//! The keyed bulkhead's metrics: the total's, one key's, and [`KeyedMetrics`], every live
//! key's with bounded cardinality.

use core::fmt;
use core::hash::{BuildHasher, Hash};
use std::sync::Arc;

use super::KeyedBulkhead;
use crate::bulkhead::Bulkhead;
use crate::engine::sync::Ordering;
use crate::observe::metrics::BulkheadMetrics;

/// The metrics of a [`KeyedBulkhead`], with bounded cardinality:
/// [`KeyedBulkhead::metrics`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct KeyedMetrics<K> {
    /// Up to `cap` keys, busiest first, each with its own snapshot.
    pub keys: Vec<(K, BulkheadMetrics)>,
    /// The other live keys, summed (available, max allowed, in flight, waiting).
    pub others: BulkheadMetrics,
    /// How many keys `others` sums.
    pub other_keys: usize,
    /// The shared total, if one is configured.
    pub total: Option<BulkheadMetrics>,
    /// How many calls the keyed level refused with
    /// [`RejectReason::TooManyKeys`](crate::RejectReason::TooManyKeys) since it was built
    /// (counted whether or not [`KeyedBulkhead::enable_counters`] ran).
    pub too_many_keys: u64,
}

impl<K, S> KeyedBulkhead<K, S>
where
    K: Eq + Hash + Clone + fmt::Display,
    S: BuildHasher,
{
    /// A snapshot of the total's metrics, if one is configured.
    pub fn total_metrics(&self) -> Option<BulkheadMetrics> {
        self.total.as_deref().map(Bulkhead::metrics)
    }

    /// A snapshot of `key`'s metrics, if it is live (or is the fallback key). Does not
    /// create the key.
    pub fn key_metrics(&self, key: &K) -> Option<BulkheadMetrics> {
        self.with_live(key, |bulkhead| bulkhead.metrics())
    }

    /// Metrics with a bounded number of labels: the `cap` live keys with the most calls in
    /// flight (then waiting) each on their own, every other live key summed into
    /// [`KeyedMetrics::others`]. Export `others` under one label (say `key="other"`), so a
    /// dashboard has at most `cap + 1` series whatever the number of tenants.
    ///
    /// ```
    /// use bulkhead::keyed::KeyedBulkhead;
    /// let tenants = KeyedBulkhead::<u32>::builder("api").build()?;
    /// let held: Vec<_> = (0..5).map(|t| tenants.try_acquire(&t).unwrap()).collect();
    /// let _two = tenants.try_acquire(&3)?;
    /// let metrics = tenants.metrics(2);
    /// assert_eq!(metrics.keys.len(), 2);
    /// assert_eq!(metrics.keys[0].0, 3); // two in flight
    /// assert_eq!(metrics.other_keys, 3);
    /// assert_eq!(metrics.others.in_flight_calls(), 3);
    /// # drop(held);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn metrics(&self, cap: usize) -> KeyedMetrics<K> {
        // Under each shard's lock the keys are only shared (a reference count): cloning a
        // key is user code, done after the locks, as is dropping the shared handles.
        let shared = self.collect_live(|e| (Arc::clone(&e.key), e.bulkhead.metrics()));
        let mut all: Vec<(K, BulkheadMetrics)> =
            shared.into_iter().map(|(key, m)| (K::clone(&key), m)).collect();
        if let Some((key, bulkhead)) = &self.fallback {
            all.push((key.clone(), bulkhead.metrics()));
        }
        all.sort_by(|(_, a), (_, b)| {
            (b.in_flight_calls(), b.waiting_calls()).cmp(&(a.in_flight_calls(), a.waiting_calls()))
        });
        let rest = all.split_off(cap.min(all.len()));
        let mut others = BulkheadMetrics {
            available: 0,
            max_allowed: 0,
            in_flight: 0,
            waiting: 0,
            closed: false,
            counts: None,
        };
        for (_, m) in &rest {
            others.available += m.available;
            others.max_allowed += m.max_allowed;
            others.in_flight += m.in_flight;
            others.waiting += m.waiting;
        }
        KeyedMetrics {
            keys: all,
            others,
            other_keys: rest.len(),
            total: self.total_metrics(),
            // Ordering: Relaxed — a statistic read for its value alone.
            too_many_keys: self.refused_keys.load(Ordering::Relaxed),
        }
    }
}

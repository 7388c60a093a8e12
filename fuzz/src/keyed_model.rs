//! The sequential model of a keyed bulkhead (issue 13): its live keys with their calls in
//! flight, the fallback key's, the shared total's, and where each held permit is. One model
//! serves the `keyed` fuzz target (`keyed.rs`, also replayed by `tests/fuzz_corpus.rs`) and
//! the proptest reference model (`verification/reference_model.rs`, `mod keyed`), which
//! include this file with `#[path]`.
// Each harness uses part of it.
#![allow(dead_code)]

use std::collections::BTreeMap;

use bulkhead::keyed::KeyedBulkhead;
use bulkhead::BulkheadConfig;

/// A keyed bulkhead's configuration, as the harnesses vary it.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub default_limit: usize,
    /// Key 0's own limit.
    pub key0_limit: usize,
    pub total: Option<usize>,
    pub max_keys: usize,
    /// Whether `fallback_key` (the harness's last key) is the fallback key.
    pub fallback: bool,
}

impl Config {
    /// The keyed bulkhead `name` with this configuration.
    pub fn build(&self, name: &str, fallback_key: u8) -> KeyedBulkhead<u8> {
        let limit = |n| BulkheadConfig::builder().max_concurrent_calls(n).build().unwrap();
        let mut builder = KeyedBulkhead::<u8>::builder(name)
            .default_config(limit(self.default_limit))
            .key_config(0, limit(self.key0_limit))
            .max_keys(self.max_keys);
        if let Some(total) = self.total {
            builder = builder.total(limit(total));
        }
        if self.fallback {
            builder = builder.fallback_key(fallback_key);
        }
        builder.build().expect("a valid keyed config")
    }
}

/// What an acquire gave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Admitted,
    Key,
    Total,
    TooManyKeys,
}

pub struct Model {
    pub config: Config,
    pub fallback_key: u8,
    pub live: BTreeMap<u8, usize>,
    pub fallback_in_flight: usize,
    pub total_in_flight: usize,
    /// Per held permit: `Some(key)` on a live key's bulkhead, `None` on the fallback's.
    pub held: Vec<Option<u8>>,
}

impl Model {
    pub fn new(config: Config, fallback_key: u8) -> Model {
        Model {
            config,
            fallback_key,
            live: BTreeMap::new(),
            fallback_in_flight: 0,
            total_in_flight: 0,
            held: Vec::new(),
        }
    }

    fn limit(&self, key: u8) -> usize {
        if key == 0 {
            self.config.key0_limit
        } else {
            self.config.default_limit
        }
    }

    /// Where a call for `key` goes (`Some(key)`, `None` for the fallback's bulkhead), or
    /// `Err` for too many keys; creates or evicts keys as the real map does.
    fn route(&mut self, key: u8) -> Result<Option<u8>, Outcome> {
        if self.config.fallback && key == self.fallback_key {
            return Ok(None);
        }
        if self.live.contains_key(&key) {
            return Ok(Some(key));
        }
        if self.live.len() >= self.config.max_keys {
            self.evict_idle();
        }
        if self.live.len() < self.config.max_keys {
            self.live.insert(key, 0);
            Ok(Some(key))
        } else if self.config.fallback {
            Ok(None)
        } else {
            Err(Outcome::TooManyKeys)
        }
    }

    pub fn in_flight(&mut self, on: Option<u8>) -> &mut usize {
        match on {
            Some(key) => self.live.get_mut(&key).expect("routed to a live key"),
            None => &mut self.fallback_in_flight,
        }
    }

    /// An acquire of `key`: the outcome, and where the permit is if admitted (not yet
    /// recorded in `held`).
    pub fn acquire(&mut self, key: u8) -> (Outcome, Option<Option<u8>>) {
        let on = match self.route(key) {
            Ok(on) => on,
            Err(outcome) => return (outcome, None),
        };
        let limit = self.limit(on.unwrap_or(self.fallback_key));
        if *self.in_flight(on) >= limit {
            return (Outcome::Key, None);
        }
        if let Some(total) = self.config.total {
            if self.total_in_flight >= total {
                return (Outcome::Total, None);
            }
            self.total_in_flight += 1;
        }
        *self.in_flight(on) += 1;
        (Outcome::Admitted, Some(on))
    }

    /// The end of a call on `on`.
    pub fn release(&mut self, on: Option<u8>) {
        *self.in_flight(on) -= 1;
        if self.config.total.is_some() {
            self.total_in_flight -= 1;
        }
    }

    /// Drops every idle key; returns how many.
    pub fn evict_idle(&mut self) -> usize {
        let before = self.live.len();
        self.live.retain(|_, in_flight| *in_flight > 0);
        before - self.live.len()
    }

    /// Compares the keyed bulkhead's live keys, each of keys `0..keys` in flight and the
    /// total's with the model.
    pub fn check(&self, keyed: &KeyedBulkhead<u8>, keys: u8, step: usize) {
        assert_eq!(keyed.live_keys(), self.live.len(), "step {step}: live keys");
        for key in 0..keys {
            let real = keyed.key_metrics(&key).map(|m| m.in_flight_calls());
            let expected = if self.config.fallback && key == self.fallback_key {
                Some(self.fallback_in_flight)
            } else {
                self.live.get(&key).copied()
            };
            assert_eq!(real, expected, "step {step}: key {key} in flight");
        }
        let total = keyed.total_metrics().map(|m| m.in_flight_calls());
        assert_eq!(total, self.config.total.map(|_| self.total_in_flight), "step {step}: total");
    }
}

/// After the run, with every permit dropped: every slot of the total is back.
pub fn check_total_back(keyed: &KeyedBulkhead<u8>) {
    if let Some(total) = keyed.total_metrics() {
        assert_eq!(total.in_flight_calls(), 0, "every total slot back");
    }
}

//! Reference-model checking for a keyed bulkhead (issue 13), shared by the `keyed` fuzz
//! target and by `tests/fuzz_corpus.rs` (which includes this file with `#[path]`).
//!
//! [`run_keyed_ops`] decodes bytes into a configuration (a default limit, key 0's own limit,
//! an optional shared total, `max_keys`, an optional fallback key) and a sequence of
//! operations: `try_acquire` and a zero-wait `acquire_async` (polled once) of one of eight
//! keys, `call` of a key (whose closure checks the key is in flight), dropping a held permit
//! and `evict_idle`. After every step it compares the outcome (admitted, refused by the key,
//! by the total, or for too many keys, with the refused key named), the live keys, every
//! key's calls in flight and the total's with a sequential model, and panics with the step
//! number on any difference.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use bulkhead::keyed::{KeyedBulkhead, KeyedPermit};
use bulkhead::BulkheadFull;
use bulkhead::RejectReason;

#[path = "keyed_model.rs"]
mod keyed_model;

use keyed_model::{check_total_back, Config, Model, Outcome};

const KEYS: u8 = 8;
/// The fallback key, when the configuration has one.
const FALLBACK: u8 = KEYS - 1;
/// At most this many permits held at once; extra acquires are skipped.
const MAX_HELD: usize = 32;

/// A waker for futures that must be ready on their first poll.
struct NoWake;

impl Wake for NoWake {
    fn wake(self: Arc<Self>) {}
}

fn outcome_of<T>(result: &Result<T, BulkheadFull>, key: u8, step: usize) -> Outcome {
    let Err(full) = result else { return Outcome::Admitted };
    match full.reason() {
        RejectReason::TooManyKeys => {
            let named = format!("fuzz-keyed/{key}");
            assert_eq!(full.bulkhead_name(), named, "step {step}: the refused key is named");
            Outcome::TooManyKeys
        }
        // The total is named like the keyed bulkhead; a key's bulkhead "{name}/{key}". Both
        // refuse fail-fast, and neither is closed.
        RejectReason::Full if full.bulkhead_name() == "fuzz-keyed" => Outcome::Total,
        RejectReason::Full => Outcome::Key,
        other => panic!("step {step}: unexpected refusal {other}: {full}"),
    }
}

/// Decodes `data` and checks the keyed bulkhead against the model after every step.
pub fn run_keyed_ops(data: &[u8]) {
    if data.len() < 3 {
        return;
    }
    let (head, ops) = data.split_at(3);
    let config = Config {
        default_limit: usize::from(head[0] % 4),
        key0_limit: usize::from((head[0] >> 2) % 5),
        total: (head[1] & 1 == 1).then_some(usize::from((head[1] >> 1) % 6)),
        max_keys: usize::from(head[2] % 5),
        fallback: head[2] & 0x80 != 0,
    };
    if config.max_keys == 0 && !config.fallback {
        // The builder refuses it, naming the key.
        let err = KeyedBulkhead::<u8>::builder("fuzz-keyed").max_keys(0).build().unwrap_err();
        assert_eq!(err.key(), "max_keys");
        return;
    }
    let keyed = config.build("fuzz-keyed", FALLBACK);
    let mut model = Model::new(config, FALLBACK);
    let mut held: Vec<KeyedPermit<'_>> = Vec::new();
    let waker = Waker::from(Arc::new(NoWake));
    let mut cx = Context::from_waker(&waker);
    for (step, &byte) in ops.iter().enumerate() {
        let key = (byte >> 3) % KEYS;
        match byte % 8 {
            0..=2 if held.len() < MAX_HELD => {
                let result = keyed.try_acquire(&key);
                let got = outcome_of(&result, key, step);
                let (expected, on) = model.acquire(key);
                assert_eq!(got, expected, "step {step}: try_acquire({key})");
                if let (Ok(permit), Some(on)) = (result, on) {
                    held.push(permit);
                    model.held.push(on);
                }
            }
            3 if held.len() < MAX_HELD => {
                // Every limit here is fail-fast: one poll decides.
                let mut fut = pin!(keyed.acquire_async(&key));
                let Poll::Ready(result) = fut.as_mut().poll(&mut cx) else {
                    panic!("step {step}: a zero-wait acquire_async({key}) is pending")
                };
                let got = outcome_of(&result, key, step);
                let (expected, on) = model.acquire(key);
                assert_eq!(got, expected, "step {step}: acquire_async({key})");
                if let (Ok(permit), Some(on)) = (result, on) {
                    held.push(permit);
                    model.held.push(on);
                }
            }
            4 => {
                let result =
                    keyed.call(&key, || keyed.key_metrics(&key).map(|m| m.in_flight_calls()));
                let got = outcome_of(&result, key, step);
                let (expected, on) = model.acquire(key);
                assert_eq!(got, expected, "step {step}: call({key})");
                if let (Ok(seen), Some(on)) = (result, on) {
                    if on == Some(key) || (on.is_none() && key == FALLBACK) {
                        assert_eq!(seen, Some(*model.in_flight(on)), "step {step}: in call");
                    }
                    model.release(on);
                }
            }
            5 | 6 if !held.is_empty() => {
                let i = usize::from(byte >> 3) % held.len();
                drop(held.remove(i));
                let on = model.held.remove(i);
                model.release(on);
            }
            7 => {
                assert_eq!(keyed.evict_idle(), model.evict_idle(), "step {step}: evicted");
            }
            _ => {}
        }
        model.check(&keyed, KEYS, step);
    }
    drop(held);
    check_total_back(&keyed);
}

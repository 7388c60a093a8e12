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
//!
//! With bit 6 of the third byte and a total, the keys get guaranteed shares (issue 32: a
//! default share and key 0's own, from the first two bytes; no fallback key), checked by
//! the builder against the total as the model predicts, and the total's max wait is long:
//! `acquire_async` may then queue there. Queued futures are polled after every step; the
//! ones served must be exactly those the model handed a returning slot to (owners, the
//! keys within their guarantee when they asked, before borrowers, FIFO within each), the
//! total is never over-admitted, and op 6 drops a queued future first. `call` is then
//! `call_with` a zero max wait (a per-call wait through the share path).

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use bulkhead::keyed::{KeyedBulkhead, KeyedPermit};
use bulkhead::RejectReason;
use bulkhead::{BulkheadFull, Request};

#[path = "keyed_model.rs"]
mod keyed_model;

use keyed_model::{
    check_total_back, serve_queued, Config, Model, Outcome, Queued, Shares, KEY_REFS,
};

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
    let total = (head[1] & 1 == 1).then_some(usize::from((head[1] >> 1) % 6));
    let shares = (head[2] & 0x40 != 0 && total.is_some_and(|t| t > 0)).then(|| Shares {
        default: u32::from(head[0] >> 7),
        key0: (head[1] >> 5 >= 4).then(|| u32::from(head[1] >> 5) - 4),
    });
    // With shares, keys deep enough to hold a borrowed slot and queue for more.
    let deeper = if shares.is_some() { 2 } else { 0 };
    let config = Config {
        default_limit: usize::from(head[0] % 4) + deeper,
        key0_limit: usize::from((head[0] >> 2) % 5) + deeper,
        total,
        max_keys: usize::from(head[2] % 5),
        fallback: head[2] & 0x80 != 0 && shares.is_none(),
        shares,
    };
    if config.max_keys == 0 && !config.fallback {
        // The builder refuses it, naming the key.
        let err = KeyedBulkhead::<u8>::builder("fuzz-keyed").max_keys(0).build().unwrap_err();
        assert_eq!(err.key(), "max_keys");
        return;
    }
    if let Some(shares) = shares.filter(|s| !s.fit(total, config.max_keys)) {
        // Above the total: the builder refuses, naming the shares.
        let Err(err) = config.try_build("fuzz-keyed", FALLBACK) else {
            panic!("shares {shares:?} above the total {total:?} were accepted")
        };
        assert_eq!(err.key(), "guaranteed_share");
        return;
    }
    let keyed = config.build("fuzz-keyed", FALLBACK);
    let mut model = Model::new(config, FALLBACK);
    let mut held: Vec<KeyedPermit<'_>> = Vec::new();
    let mut queued: Vec<(usize, u8, Queued<'_>)> = Vec::new();
    let waker = Waker::from(Arc::new(NoWake));
    let mut cx = Context::from_waker(&waker);
    for (step, &byte) in ops.iter().enumerate() {
        // With shares, three keys: callers of live keys meet at the total more often.
        let key = (byte >> 3) % if shares.is_some() { 3 } else { KEYS };
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
            3 if held.len() + queued.len() < MAX_HELD && shares.is_some() => {
                // The key is fail-fast, the total may queue the caller.
                let mut fut: Queued<'_> =
                    Box::pin(keyed.acquire_async(&KEY_REFS[usize::from(key)]));
                let (expected, on) = model.acquire_waiting(key, step);
                match fut.as_mut().poll(&mut cx) {
                    Poll::Pending => {
                        assert_eq!(
                            (expected, on),
                            (Outcome::Total, Some(Some(key))),
                            "step {step}: queued"
                        );
                        queued.push((step, key, fut));
                    }
                    Poll::Ready(result) => {
                        let got = outcome_of(&result, key, step);
                        assert_eq!(got, expected, "step {step}: acquire_async({key})");
                        assert!(got != Outcome::Total, "step {step}: refused, not queued");
                        if let (Ok(permit), Some(on)) = (result, on) {
                            held.push(permit);
                            model.held.push(on);
                        }
                    }
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
                let in_call = || keyed.key_metrics(&key).map(|m| m.in_flight_calls());
                let result = match shares {
                    None => keyed.call(&key, in_call),
                    Some(_) => {
                        keyed.call_with(&key, Request::default().max_wait(Duration::ZERO), in_call)
                    }
                };
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
            6 if !queued.is_empty() => {
                let i = usize::from(byte >> 3) % queued.len();
                let (id, _, fut) = queued.remove(i);
                drop(fut);
                model.cancel(id);
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
        serve_queued(&mut queued, &mut held, &mut model, step);
        model.check(&keyed, KEYS, step);
    }
    drop(queued);
    drop(held);
    check_total_back(&keyed);
}

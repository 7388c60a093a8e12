//! Random sequences over every feature that shares the queue (issue 29): weights, classes and
//! the sheddable headroom, the three queue orders, a waiter cap, bounded waits that the
//! deadline timer withdraws while their future is not polled, `change_config` both ways,
//! `close` with drain waiters queued before and after it, wakers that panic or re-enter the
//! bulkhead from `wake`, and (in half the sequences) an adaptive limit that moves at every
//! release. No model of the outcomes: after every step the invariants that must hold
//! whatever the outcomes are checked on the engine itself (work conservation, no permit lost
//! or created, no step panics, drain waits end and are woken): the harness is
//! `fuzz/src/junctions.rs`, shared with the `junctions` fuzz target, whose committed corpus
//! and a few hundred pseudo-random inputs are replayed here too.
//!
//! The deadline timer's thread is disabled for this test binary (the harness does it before
//! any bounded wait; hence the `junctions` corpus is replayed here and not in
//! `tests/fuzz_corpus.rs`, whose `ops` checks start the thread): the step `FireExpired` runs
//! `bulkhead::timer::fire_expired()`, the timer's own work, with every waiter's future
//! unpolled. A bounded wait here is 1 ns, so every engine-timed waiter is due.
//! `PROPTEST_CASES` sets the number of sequences (default 1024 here).

#[path = "../fuzz/src/junctions.rs"]
mod junctions;
#[path = "common/replay.rs"]
mod replay;

use junctions::{run, run_junctions, Config, Hostile, Op};
use proptest::prelude::*;
use replay::{replay, xorshift};

fn config_strategy() -> impl Strategy<Value = Config> {
    (0..=4usize, 0..=3usize, 0..3u8, any::<bool>(), prop::option::of(1..=3usize)).prop_map(
        |(limit, headroom, order, bounded, cap)| Config { limit, headroom, order, bounded, cap },
    )
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (1..=3u32, 0..3u8).prop_map(|(n, c)| Op::Try(n, c)),
        5 => (1..=4u32, 0..3u8, 0..3u8)
            .prop_map(|(n, c, h)| Op::Queue(n, c, Hostile::from_byte(h))),
        3 => (0..8usize).prop_map(Op::Poll),
        2 => (0..8usize).prop_map(Op::DropPending),
        4 => (0..8usize).prop_map(Op::DropPermit),
        2 => config_strategy().prop_map(Op::ChangeConfig),
        1 => Just(Op::Close),
        1 => Just(Op::Drain),
        1 => Just(Op::PollDrains),
        3 => Just(Op::FireExpired),
        2 => Just(Op::Record),
    ]
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(1024)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn every_feature_at_once_keeps_the_invariants(
        initial in config_strategy(),
        adaptive in any::<bool>(),
        ops in prop::collection::vec(op_strategy(), 1..40),
    ) {
        run(initial, adaptive, &ops);
    }
}

/// The sequence issue 29 reported, pinned: a weighted head withdrawn by the timer, its
/// future never polled again, in front of a waiter for 1 with 2 slots free.
#[test]
fn a_weighted_head_expired_unpolled_is_pinned() {
    let bounded = Config { limit: 3, headroom: 0, order: 0, bounded: true, cap: None };
    run(
        bounded,
        false,
        &[
            Op::Try(1, 1),
            Op::Queue(3, 1, Hostile::No),
            Op::ChangeConfig(Config { bounded: false, ..bounded }),
            Op::Queue(1, 1, Hostile::No),
            Op::FireExpired,
        ],
    );
}

/// A waiter whose waker re-enters the bulkhead from `wake` (`try_acquire` and drop,
/// `metrics`, `change_config(config())`), woken by a release, by the timer's withdrawal and
/// by `close`: no deadlock, the invariants hold after each step.
#[test]
fn a_reentering_waker_on_every_wake_path() {
    let before = junctions::reentries();
    let config = Config { limit: 1, headroom: 0, order: 0, bounded: true, cap: None };
    run(
        Config { bounded: false, ..config },
        true,
        &[
            Op::Try(1, 1),
            Op::Queue(1, 1, Hostile::Reenters),
            Op::Queue(1, 0, Hostile::Reenters),
            Op::DropPermit(0),
            Op::Poll(0),
            Op::Poll(1),
            Op::ChangeConfig(config),
            Op::Queue(1, 2, Hostile::Reenters),
            Op::FireExpired,
            Op::Queue(1, 1, Hostile::Reenters),
            Op::Drain,
            Op::Close,
            Op::DropPermit(0),
            Op::PollDrains,
        ],
    );
    // Woken by the release, the withdrawal and `close` (other tests only add to the count).
    assert!(junctions::reentries() >= before + 3, "{} re-entries", junctions::reentries() - before);
}

/// Every step kind and every waker kind is reachable from the bytes the fuzzer feeds.
#[test]
fn the_decoder_reaches_every_step_kind() {
    let mut seen = [false; 13];
    for byte in 0..=255u8 {
        let (_, _, ops) = junctions::decode(&[0, 0, 0, byte, 0, 0]);
        let kind = match ops[0] {
            Op::Try(..) => 0,
            Op::Queue(_, _, Hostile::No) => 1,
            Op::Queue(_, _, Hostile::Panics) => 2,
            Op::Queue(_, _, Hostile::Reenters) => 3,
            Op::Poll(_) => 4,
            Op::DropPending(_) => 5,
            Op::DropPermit(_) => 6,
            Op::ChangeConfig(_) => 7,
            Op::Close => 8,
            Op::Drain => 9,
            Op::PollDrains => 10,
            Op::FireExpired => 11,
            Op::Record => 12,
        };
        seen[kind] = true;
    }
    assert_eq!(seen, [true; 13]);
}

#[test]
fn junctions_corpus_keeps_the_invariants() {
    replay("junctions", run_junctions);
}

/// The `junctions` target's check on deterministic pseudo-random inputs, which reach
/// combinations the corpus's coverage-based selection may drop.
#[test]
fn junctions_pseudo_random_sequences_keep_the_invariants() {
    let mut state = 0x6A09_E667_F3BC_C908;
    for len in (0..400).map(|i| 3 + i % 120) {
        let input: Vec<u8> = (0..len).map(|_| xorshift(&mut state)).collect();
        run_junctions(&input);
    }
}

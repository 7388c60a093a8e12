//! The scenarios, shared by `loom.rs` and `shuttle.rs`. Each including file provides a
//! module `crate::rt` with its checker's `spawn` (a thread) and `block_on`.
//!
//! Every scenario creates its bulkheads first, then spawns: see `bulkhead::model`.

use std::sync::Arc;
use std::time::Duration;

use bulkhead::model;
use bulkhead_downstream_example::async_client::AsyncClient;
use bulkhead_downstream_example::client::{PooledClient, Reply};
use bulkhead_downstream_example::pipeline::{Downstream, Pipeline};

use crate::rt;

fn join<T>(handle: rt::JoinHandle<T>) -> T {
    match handle.join() {
        Ok(value) => value,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// Two callers on a client of one connection, waiting as long as it takes: both get a
/// fresh answer (the bulkhead admits one at a time, and an admitted call always finds the
/// connection), and the connection is back in the pool at the end.
pub fn pooled_client_never_runs_dry() {
    let client = Arc::new(PooledClient::new(1, Duration::MAX, usize::MAX));
    let other = {
        let client = Arc::clone(&client);
        rt::spawn(move || client.get("a"))
    };
    let mine = client.get("b");
    let theirs = join(other);
    assert!(
        matches!((&mine, &theirs), (Reply::Fresh(_), Reply::Fresh(_))),
        "an admitted caller found the pool empty: replies {mine:?} and {theirs:?}"
    );
    assert_eq!(client.idle_connections(), 1, "connection lost");
}

/// A caller races a graceful shutdown on a client of one connection: it gets an answer (it
/// was admitted before the close) or the fallback (refused `Closed`), and either way the
/// shutdown closes the one connection: it waited for the call in flight to give it back.
pub fn shutdown_drains_calls_in_flight() {
    let client = Arc::new(PooledClient::new(1, Duration::MAX, usize::MAX));
    let caller = {
        let client = Arc::clone(&client);
        rt::spawn(move || client.get("a"))
    };
    let closed = client.shutdown(Duration::MAX);
    let reply = join(caller);
    assert_eq!(
        closed, 1,
        "shutdown closed the pool while a call still held a connection (reply {reply:?})"
    );
    assert!(client.bulkhead().is_closed());
    assert_eq!(client.get("b"), Reply::Fallback, "a closed client answers with the fallback");
}

/// A caller waits up to 100 ms behind a slow call while the model clock passes 100 ms: it
/// gets the answer or the fallback, and either way the client is left as it was: nobody
/// counted as waiting, and the next caller gets a fresh answer.
pub fn timeout_serves_fallback_then_recovers() {
    let client = Arc::new(PooledClient::new(1, Duration::from_millis(100), 1));
    let slow_call = client.bulkhead().try_acquire().expect("free");
    let caller = {
        let client = Arc::clone(&client);
        rt::spawn(move || client.get("a"))
    };
    let clock = rt::spawn(|| model::advance(Duration::from_millis(100)));
    drop(slow_call);
    let reply = join(caller);
    join(clock);
    assert_eq!(client.waiting(), 0, "the waiting gauge leaked after reply {reply:?}");
    let next = client.get("b");
    assert!(matches!(next, Reply::Fresh(_)), "still shedding after a timeout: {next:?}");
}

/// A producer admits two items through a pipeline of one and two workers call the
/// downstream: the downstream never has more than one call at a time.
pub fn pipeline_caps_downstream_calls() {
    let (pipeline, workers) = Pipeline::new(1, Duration::MAX);
    let (workers, downstream) = (Arc::new(workers), Arc::new(Downstream::new()));
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let (workers, downstream) = (Arc::clone(&workers), Arc::clone(&downstream));
            rt::spawn(move || workers.work_one(&downstream))
        })
        .collect();
    pipeline.submit(1).expect("an unbounded wait is granted");
    pipeline.submit(2).expect("an unbounded wait is granted");
    for handle in handles {
        assert!(join(handle), "a worker found no job");
    }
    assert_eq!(downstream.calls(), 2);
    let peak = downstream.peak();
    assert!(peak <= 1, "{peak} downstream calls at once through a pipeline of 1");
    assert_eq!(pipeline.bulkhead().metrics().available_concurrent_calls(), 1, "permit lost");
}

/// An async `get` and an async `refresh` share a client of one permit with a 100 ms wait,
/// while the model clock passes 100 ms: both finish (fresh or fallback), and the permit is
/// back.
pub fn async_get_and_refresh_both_finish() {
    let client = Arc::new(AsyncClient::new(1, Duration::from_millis(100)));
    let getter = {
        let client = Arc::clone(&client);
        rt::spawn(move || rt::block_on(client.get("a")))
    };
    let refresher = {
        let client = Arc::clone(&client);
        rt::spawn(move || rt::block_on(client.refresh("b")))
    };
    model::advance(Duration::from_millis(100));
    let (got, refreshed) = (join(getter), join(refresher));
    // Either may time out (the clock passed 100 ms while it queued): both are answers.
    assert!(matches!(got, Reply::Fresh(_) | Reply::Fallback));
    assert!(matches!(refreshed, Reply::Fresh(_) | Reply::Fallback));
    assert_eq!(client.bulkhead().metrics().available_concurrent_calls(), 1, "permit lost");
}

/// A `get` queues behind a slow call that outlives it; once it is queued the test moves the
/// clock past its 100 ms: the advance must wake the waiting task, which falls back. No seeded
/// bug: this checks the model mode itself (a task's deadline is a model input too).
pub fn async_get_falls_back_at_the_deadline() {
    let client = Arc::new(AsyncClient::new(1, Duration::from_millis(100)));
    let slow_call = client.bulkhead().try_acquire().expect("free");
    let getter = {
        let client = Arc::clone(&client);
        rt::spawn(move || rt::block_on(client.get("a")))
    };
    while client.bulkhead().metrics().waiting_calls() == 0 {
        rt::yield_now();
    }
    model::advance(Duration::from_millis(100));
    let got = join(getter);
    assert_eq!(got, Reply::Fallback, "the slow call was still running");
    drop(slow_call);
    assert_eq!(client.bulkhead().metrics().available_concurrent_calls(), 1, "permit lost");
}

//! The sizes of the family's futures (issue 30): what a runtime author stores per wait. The
//! table in docs/performance.md ("Futures' sizes") is this test's output
//! (`cargo test --test future_sizes -- --nocapture`). Asserts the plain `Acquire` bound
//! (≤ 64 bytes) and that the owned and weighted forms stay within a cache line too.

use std::mem::size_of_val;
use std::sync::Arc;
use std::time::Duration;

use bulkhead::keyed::KeyedBulkhead;
use bulkhead::{Bulkhead, BulkheadConfig, Request};

#[test]
fn futures_sizes() {
    let plain = Arc::new(Bulkhead::new("plain", BulkheadConfig::default()));
    let keyed = KeyedBulkhead::<u64>::builder("keyed").build().unwrap();
    let sleep = |_: Duration| std::future::ready(());
    let rows = [
        ("plain", "acquire_async", "Acquire", size_of_val(&plain.acquire_async())),
        ("owned", "acquire_owned_async", "AcquireOwned", size_of_val(&plain.acquire_owned_async())),
        (
            "weighted",
            "acquire_many_async(2)",
            "Acquire",
            size_of_val(&plain.acquire_many_async(Request::permits(2))),
        ),
        (
            "weighted owned",
            "acquire_many_owned_async(2)",
            "AcquireOwned",
            size_of_val(&plain.acquire_many_owned_async(Request::permits(2))),
        ),
        (
            "with sleep",
            "acquire_async_with_sleep(ready)",
            "AcquireWithSleep",
            size_of_val(&plain.acquire_async_with_sleep(sleep)),
        ),
        ("plain", "drained", "Drained", size_of_val(&plain.drained())),
        ("keyed", "acquire_async(&k)", "(async fn)", size_of_val(&keyed.acquire_async(&1))),
        (
            "keyed weighted",
            "acquire_many_async(&k, 2)",
            "(async fn)",
            size_of_val(&keyed.acquire_many_async(&1, 2)),
        ),
        (
            "keyed owned",
            "acquire_owned_async(&k)",
            "AcquireOwnedKeyed",
            size_of_val(&keyed.acquire_owned_async(&1)),
        ),
        (
            "keyed with sleep",
            "acquire_async_with_sleep(&k, ready)",
            "(async fn)",
            size_of_val(&keyed.acquire_async_with_sleep(&1, sleep)),
        ),
        ("keyed", "drained", "(async fn)", size_of_val(&keyed.drained())),
    ];
    println!("| form | verb | type | bytes |\n|---|---|---|---|");
    for (form, verb, ty, bytes) in rows {
        println!("| {form} | `{verb}` | `{ty}` | {bytes} |");
    }
    let acquire = size_of_val(&plain.acquire_async());
    assert!(acquire <= 64, "the plain Acquire is {acquire} bytes, over its 64-byte budget");
    let owned = size_of_val(&plain.acquire_owned_async());
    assert!(owned <= 64, "AcquireOwned is {owned} bytes");
}

//! The fast and reject paths allocate nothing: `try_acquire` (granted and rejected), a
//! release with nobody queued, and `acquire` with a zero max wait when rejected.
//!
//! A counting global allocator counts allocations per thread, so the test harness and other
//! tests running at the same time never pollute a measurement.

use std::future::Future;
use std::hint::black_box;
use std::sync::Arc;
use std::task::{Context, Poll};

use bulkhead::{Bulkhead, BulkheadConfig, RejectReason};

mod counting {
    //! The only `unsafe` in the test suite: a `GlobalAlloc` that forwards to `System` and
    //! counts allocations made by the current thread.
    #![allow(unsafe_code)]

    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    thread_local! {
        // `const`-initialised and without `Drop`: touching it never allocates and never
        // registers a destructor, so it is safe to use from inside the allocator.
        static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    }

    pub struct Counting;

    fn count() {
        // `try_with`: during thread teardown the slot may be gone; such allocations are
        // not ours to count.
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
    }

    // SAFETY: every method forwards to `System` with the caller's arguments unchanged, so
    // `System`'s guarantees are ours; counting touches only a `Cell` in a thread-local that
    // neither allocates nor unwinds.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            count();
            // SAFETY: forwarded unchanged; the caller upholds `alloc`'s contract.
            unsafe { System.alloc(layout) }
        }

        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            count();
            // SAFETY: forwarded unchanged; the caller upholds `alloc_zeroed`'s contract.
            unsafe { System.alloc_zeroed(layout) }
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            count();
            // SAFETY: forwarded unchanged; `ptr` came from `System` through this allocator.
            unsafe { System.realloc(ptr, layout, new_size) }
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: forwarded unchanged; `ptr` came from `System` through this allocator.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    /// Allocations (including reallocations) the current thread has made so far.
    pub fn allocations() -> u64 {
        ALLOCATIONS.with(Cell::get)
    }
}

#[global_allocator]
static ALLOCATOR: counting::Counting = counting::Counting;

/// Runs `f` and returns how many allocations it made on this thread.
fn allocations_in<T>(f: impl FnOnce() -> T) -> (u64, T) {
    let before = counting::allocations();
    let value = f();
    let after = counting::allocations();
    (after - before, value)
}

fn config(limit: usize, wait: std::time::Duration) -> BulkheadConfig {
    BulkheadConfig::builder().max_concurrent_calls(limit).max_wait_duration(wait).build().unwrap()
}

/// The counter must really count, or a zero below would prove nothing.
#[test]
fn counting_allocator_counts_this_threads_allocations() {
    let (n, boxed) = allocations_in(|| black_box(Box::new(black_box(7_u64))));
    assert_eq!(*boxed, 7);
    assert_eq!(n, 1);
    let (n, ()) = allocations_in(|| {
        let mut v: Vec<u64> = black_box(Vec::with_capacity(1));
        v.extend([1, 2]); // grows: one realloc
        black_box(v);
    });
    assert_eq!(n, 2);
}

#[test]
fn try_acquire_granted_allocates_nothing() {
    let bulkhead = Bulkhead::new("alloc-granted", config(4, Default::default()));
    drop(bulkhead.try_acquire().unwrap()); // warm up
    let (n, permit) = allocations_in(|| black_box(bulkhead.try_acquire()));
    assert!(permit.is_ok());
    assert_eq!(n, 0, "try_acquire (granted) allocated");
    drop(permit);
}

#[test]
fn try_acquire_rejected_allocates_nothing() {
    let bulkhead = Bulkhead::new("alloc-rejected", config(1, Default::default()));
    let _held = bulkhead.try_acquire().unwrap();
    let _ = bulkhead.try_acquire().unwrap_err(); // warm up
    let (n, err) = allocations_in(|| black_box(bulkhead.try_acquire()).unwrap_err());
    assert_eq!(err.reason(), RejectReason::Full);
    assert_eq!(n, 0, "try_acquire (rejected, incl. building the error) allocated");

    let closed = Bulkhead::new("alloc-closed", config(0, Default::default()));
    let (n, result) = allocations_in(|| black_box(closed.try_acquire()).map(drop));
    assert!(result.is_err());
    assert_eq!(n, 0, "try_acquire on a closed bulkhead allocated");
}

#[test]
fn release_with_nobody_queued_allocates_nothing() {
    let bulkhead = Bulkhead::new("alloc-release", config(2, Default::default()));
    drop(bulkhead.try_acquire().unwrap()); // warm up
    let permit = bulkhead.try_acquire().unwrap();
    let (n, ()) = allocations_in(|| drop(black_box(permit)));
    assert_eq!(n, 0, "releasing a permit allocated");
    assert_eq!(bulkhead.metrics().in_flight_calls(), 0);
}

#[test]
fn acquire_with_zero_max_wait_rejected_allocates_nothing() {
    let bulkhead = Bulkhead::new("alloc-zero-wait", config(1, std::time::Duration::ZERO));
    let _held = bulkhead.try_acquire().unwrap();
    let _ = bulkhead.acquire().unwrap_err(); // warm up
    let (n, err) = allocations_in(|| black_box(bulkhead.acquire()).unwrap_err());
    assert_eq!(err.reason(), RejectReason::Full);
    assert_eq!(n, 0, "acquire (max wait 0, rejected) allocated");
    let (n, err) = allocations_in(|| {
        black_box(bulkhead.acquire_timeout(std::time::Duration::ZERO)).unwrap_err()
    });
    assert_eq!(err.reason(), RejectReason::Full);
    assert_eq!(n, 0, "acquire_timeout(0) (rejected) allocated");
}

#[test]
fn owned_fast_paths_allocate_nothing() {
    let bulkhead = Arc::new(Bulkhead::new("alloc-owned", config(1, Default::default())));
    drop(bulkhead.try_acquire_owned().unwrap()); // warm up
    let (n, permit) = allocations_in(|| black_box(bulkhead.try_acquire_owned()).unwrap());
    assert_eq!(n, 0, "try_acquire_owned (granted) allocated");
    let (n, err) = allocations_in(|| black_box(bulkhead.try_acquire_owned()).unwrap_err());
    assert_eq!(err.reason(), RejectReason::Full);
    assert_eq!(n, 0, "try_acquire_owned (rejected) allocated");
    let (n, ()) = allocations_in(|| drop(black_box(permit)));
    assert_eq!(n, 0, "releasing an owned permit allocated");
}

#[test]
fn async_fast_paths_allocate_nothing() {
    let bulkhead = Bulkhead::new("alloc-async", config(1, std::time::Duration::ZERO));
    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    let (n, poll) = allocations_in(|| {
        let mut fut = std::pin::pin!(bulkhead.acquire_async());
        match fut.as_mut().poll(&mut cx) {
            Poll::Ready(result) => result.map(drop),
            Poll::Pending => panic!("a free permit must be granted on the first poll"),
        }
    });
    assert!(poll.is_ok());
    assert_eq!(n, 0, "acquire_async (granted on first poll, then released) allocated");

    let _held = bulkhead.try_acquire().unwrap();
    let (n, poll) = allocations_in(|| {
        let mut fut = std::pin::pin!(bulkhead.acquire_async());
        match fut.as_mut().poll(&mut cx) {
            Poll::Ready(result) => result.map(drop),
            Poll::Pending => panic!("a zero max wait must not queue"),
        }
    });
    assert_eq!(poll.unwrap_err().reason(), RejectReason::Full);
    assert_eq!(n, 0, "acquire_async (max wait 0, rejected) allocated");
}

/// A queue that grew to exactly the capacity the engine keeps (64 slots) keeps it once it
/// empties: the next wait takes a slot without allocating. (A storm past it is given back:
/// `tests/waiter_storm.rs`.) cargo-mutants (engine 19/32): the kept capacity's bound made
/// inclusive (`>` to `>=`) gave this queue back and went unseen.
#[test]
fn a_queue_grown_to_the_kept_capacity_keeps_it() {
    let bulkhead = Bulkhead::new("alloc-kept", config(1, std::time::Duration::MAX));
    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    let held = bulkhead.try_acquire().unwrap();
    let mut queued: Vec<_> = (0..64).map(|_| Box::pin(bulkhead.acquire_async())).collect();
    for fut in &mut queued {
        assert!(fut.as_mut().poll(&mut cx).is_pending(), "queued behind the held permit");
    }
    assert_eq!(bulkhead.metrics().waiting_calls(), 64);
    drop(queued);
    assert_eq!(bulkhead.queue_slots_in_use(), 0, "every withdrawn wait freed its slot");
    let (n, ()) = allocations_in(|| {
        let mut fut = std::pin::pin!(bulkhead.acquire_async());
        assert!(fut.as_mut().poll(&mut cx).is_pending(), "queued behind the held permit");
    });
    assert_eq!(n, 0, "a wait after the queue emptied allocated: its capacity was given back");
    drop(held);
}

/// A call through the keyed tower layer to a live key allocates nothing: the response
/// future is a named type, not a box (the refusal's `BoxError` is tower's one allocation).
#[cfg(feature = "tower")]
#[test]
fn keyed_tower_call_allocates_nothing() {
    use bulkhead::keyed::KeyedBulkhead;
    use bulkhead::tower::KeyedBulkheadLayer;
    use tower::{Layer, Service};

    let tenants = Arc::new(
        KeyedBulkhead::<u32>::builder("alloc-keyed")
            .default_config(config(1, std::time::Duration::ZERO))
            .total(config(4, std::time::Duration::ZERO))
            .build()
            .unwrap(),
    );
    let mut client = KeyedBulkheadLayer::new(Arc::clone(&tenants), |r: &u32| *r % 4)
        .layer(tower::service_fn(|r: u32| async move { Ok::<_, std::convert::Infallible>(r + 1) }));
    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    let mut direct = |request: u32| {
        let mut fut = std::pin::pin!(client.call(request));
        match fut.as_mut().poll(&mut cx) {
            Poll::Ready(result) => result.map_err(|e| e.to_string()),
            Poll::Pending => panic!("a ready inner service and free slots answer at once"),
        }
    };
    assert_eq!(direct(7), Ok(8)); // warm up: creates key 3
    let (n, answer) = allocations_in(|| direct(11));
    assert_eq!(answer, Ok(12));
    assert_eq!(n, 0, "a keyed tower call to a live key allocated");
    assert_eq!(tenants.total_metrics().unwrap().in_flight_calls(), 0);
}

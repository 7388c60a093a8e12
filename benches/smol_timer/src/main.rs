//! A bulkhead bound to a `bulkhead::timer::Timer` that smol's timer drives (issue 30: "also
//! one with smol's timer").
//!
//! The handle's callback sends the instant it is given over a smol channel; one smol task
//! (the driver) keeps the earliest instant it was told, sleeps on `smol::Timer::at` until
//! it, calls `timer.fire_expired()` and keeps the instant that returns. A new, earlier
//! instant from the callback interrupts the sleep. Nothing ticks: the driver wakes only for
//! an instant someone gave it.
//!
//! The load mirrors `examples/own_runtime.rs`: a bulkhead of 2 permits, one held throughout,
//! the other cycled by a task (held 3 waits long, then let go), four tasks waiting at once,
//! 120 waits each, so 480 bounded waits per case; a 500 µs and a 5 ms wait. All tasks run on
//! one `smol::LocalExecutor` under `smol::block_on` on the main thread. Prints the number of
//! `bulkhead-timer` threads, how often the driver fired the bulkhead's timer against the
//! deadlines the callback armed, and the overshoot (how long past its bound a timed-out wait
//! returned) p50/p99.
//!
//!     cargo run --release --manifest-path benches/smol_timer/Cargo.toml            # smol's timer
//!     cargo run --release --manifest-path benches/smol_timer/Cargo.toml -- process # process thread

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bulkhead::timer::Timer;
use bulkhead::{Bulkhead, BulkheadConfig, RejectReason};
use smol::channel::Receiver;
use smol::future;

#[path = "../../../examples/support/measure.rs"]
mod measure;
use measure::{percentile, timer_threads};

/// What woke the driver.
enum Event {
    /// The earliest instant it keeps has come.
    Due,
    /// The callback gave an instant.
    Told(Instant),
    /// The callback's sender is gone (the handle and every bound bulkhead were dropped).
    Closed,
}

/// Drives `timer` with smol's timer: sleeps until the earliest instant it was told, fires,
/// keeps the instant `fire_expired` returns. Counts its fires in `fires`.
async fn drive(timer: Timer, told: Receiver<Instant>, fires: Rc<Cell<usize>>) {
    let mut next: Option<Instant> = None;
    loop {
        let recv = async {
            match told.recv().await {
                Ok(at) => Event::Told(at),
                Err(_) => Event::Closed,
            }
        };
        let event = match next {
            Some(at) => {
                let due = async {
                    smol::Timer::at(at).await;
                    Event::Due
                };
                future::or(due, recv).await
            }
            None => recv.await,
        };
        match event {
            Event::Due => {
                fires.set(fires.get() + 1);
                next = timer.fire_expired();
            }
            // Keep the earliest of every instant given (the handle's contract).
            Event::Told(at) => next = Some(next.map_or(at, |next| next.min(at))),
            Event::Closed => return,
        }
    }
}

const WAITERS: usize = 4;
const WAITS_PER_WAITER: usize = 120;

/// What one case measured.
struct Case {
    /// Overshoots of the waits that timed out, sorted.
    overshoots: Vec<Duration>,
    granted: usize,
    /// Times the driver fired the bulkhead's timer.
    fires: usize,
    /// Instants the callback gave.
    told: usize,
}

/// Contended bounded waits of `wait` on one smol executor.
fn run_case(wait: Duration, bound: bool) -> Case {
    let executor = Rc::new(smol::LocalExecutor::new());
    let config = BulkheadConfig::builder()
        .max_concurrent_calls(2)
        .max_wait_duration(wait)
        .build()
        .expect("valid config");
    let told = Arc::new(AtomicUsize::new(0));
    let fires = Rc::new(Cell::new(0));
    let (sender, receiver) = smol::channel::unbounded::<Instant>();
    let bulkhead = Rc::new(if bound {
        let timer = Timer::new({
            let told = Arc::clone(&told);
            move |at| {
                told.fetch_add(1, Ordering::Relaxed);
                // Unbounded: fails only once the driver is gone (then nobody fires anyway).
                let _ = sender.try_send(at);
            }
        });
        let bulkhead = Bulkhead::with_timer("smol-timer", config, &timer);
        executor.spawn(drive(timer, receiver, Rc::clone(&fires))).detach();
        bulkhead
    } else {
        drop((sender, receiver));
        Bulkhead::new("smol-timer", config)
    });
    let overshoots = Rc::new(RefCell::new(Vec::new()));
    let granted = Rc::new(Cell::new(0));
    let done = Rc::new(Cell::new(0));
    // One permit held throughout; the other cycled: held 3 waits long, then let go for
    // whoever waits (some waits are granted, most time out).
    let held = bulkhead.try_acquire().ok();
    let cycler = {
        let (bulkhead, done) = (Rc::clone(&bulkhead), Rc::clone(&done));
        executor.spawn(async move {
            while done.get() < WAITERS {
                if let Ok(permit) = bulkhead.try_acquire() {
                    smol::Timer::after(wait * 3).await;
                    drop(permit);
                }
                smol::Timer::after(wait / 4).await;
            }
        })
    };
    let waiters: Vec<_> = (0..WAITERS)
        .map(|_| {
            let bulkhead = Rc::clone(&bulkhead);
            let (overshoots, granted, done) =
                (Rc::clone(&overshoots), Rc::clone(&granted), Rc::clone(&done));
            executor.spawn(async move {
                for _ in 0..WAITS_PER_WAITER {
                    let start = Instant::now();
                    match bulkhead.acquire_async().await {
                        Ok(permit) => {
                            granted.set(granted.get() + 1);
                            drop(permit);
                            smol::Timer::after(wait / 8).await;
                        }
                        Err(err) => {
                            assert_eq!(err.reason(), RejectReason::WaitTimedOut);
                            overshoots.borrow_mut().push(start.elapsed().saturating_sub(wait));
                        }
                    }
                }
                done.set(done.get() + 1);
            })
        })
        .collect();
    smol::block_on(executor.run(async {
        for waiter in waiters {
            waiter.await;
        }
        cycler.await;
    }));
    drop(held);
    bulkhead.check_work_conservation().expect("work conservation at quiescence");
    let mut overshoots = overshoots.take();
    overshoots.sort();
    Case {
        overshoots,
        granted: granted.get(),
        fires: fires.get(),
        told: told.load(Ordering::Relaxed),
    }
}

fn main() {
    let bound = std::env::args().nth(1).as_deref() != Some("process");
    println!(
        "mode: {}",
        if bound {
            "bound to a Timer driven by smol's timer (smol::Timer::at)"
        } else {
            "process-wide bulkhead-timer thread (Bulkhead::new), tasks on smol"
        }
    );
    for wait in [Duration::from_micros(500), Duration::from_millis(5)] {
        let case = run_case(wait, bound);
        let overshoots = &case.overshoots;
        println!(
            "wait {:>6?}: {} timed out, {} granted; overshoot p50 {:>9?} p99 {:>9?} max {:>9?}",
            wait,
            overshoots.len(),
            case.granted,
            percentile(overshoots, 0.5),
            percentile(overshoots, 0.99),
            overshoots.last().copied().unwrap_or_default(),
        );
        if bound {
            println!(
                "    smol task fired the bulkhead's timer {} times; the callback armed {} \
                 deadlines (every fire is at an instant the bulkhead gave: no tick, no polling)",
                case.fires, case.told
            );
        }
    }
    println!("bulkhead-timer threads: {}", timer_threads());
}

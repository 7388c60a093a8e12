//! A bulkhead sized for a pool of 20 (`for_pool(20)` admits 16) takes 20 concurrent calls to
//! a slow fake downstream: 16 run, 4 are refused at once. Then the same burst with the
//! guide's 100 ms max wait: the 4 extra callers wait up to 100 ms and are refused after it.
//!
//! Run with `cargo run --release --example demo`.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use bulkhead::{Bulkhead, BulkheadConfig, BulkheadFull};

/// The slow downstream: answers correctly, just slowly.
fn slow_downstream() -> &'static str {
    thread::sleep(Duration::from_millis(400));
    "200 OK"
}

#[derive(Debug)]
enum Outcome {
    Done(Duration),
    Refused(Duration, BulkheadFull),
}

fn burst(bulkhead: &Arc<Bulkhead>, callers: usize, wait: bool) -> Vec<Outcome> {
    let start_line = Arc::new(Barrier::new(callers));
    let handles: Vec<_> = (0..callers)
        .map(|i| {
            let bulkhead = Arc::clone(bulkhead);
            let start_line = Arc::clone(&start_line);
            thread::spawn(move || {
                start_line.wait();
                // Stagger slightly so the first 16 are in flight before the rest arrive.
                if i >= 16 {
                    thread::sleep(Duration::from_millis(20));
                }
                let started = Instant::now();
                let result = if wait {
                    bulkhead.call(slow_downstream)
                } else {
                    bulkhead.try_acquire().map(|_permit| slow_downstream())
                };
                match result {
                    Ok(_) => Outcome::Done(started.elapsed()),
                    Err(err) => Outcome::Refused(started.elapsed(), err),
                }
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().expect("caller thread panicked")).collect()
}

fn report(title: &str, outcomes: &[Outcome]) {
    println!("\n{title}");
    let done: Vec<_> = outcomes
        .iter()
        .filter_map(|o| if let Outcome::Done(d) = o { Some(*d) } else { None })
        .collect();
    let refused: Vec<_> = outcomes
        .iter()
        .filter_map(|o| if let Outcome::Refused(d, e) = o { Some((*d, e)) } else { None })
        .collect();
    println!(
        "  admitted: {:>2}  (each call took ~{:?})",
        done.len(),
        done.iter().max().unwrap_or(&Duration::ZERO)
    );
    println!("  refused:  {:>2}", refused.len());
    for (took, err) in &refused {
        println!(
            "    refused in {:>9.1?}  reason {:<14} {}",
            took,
            format!("{:?}", err.reason()),
            err
        );
    }
}

fn main() {
    let config = BulkheadConfig::for_pool(20);
    println!(
        "bulkhead 'bank': for_pool(20) => max_concurrent_calls {}, max_wait {:?}",
        config.max_concurrent_calls(),
        config.max_wait_duration()
    );
    let bank = Arc::new(Bulkhead::new("bank", config));

    let outcomes = burst(&bank, 20, false);
    report("20 concurrent calls, fail fast (try_acquire):", &outcomes);

    let outcomes = burst(&bank, 20, true);
    report("20 concurrent calls through `call` (waits up to 100 ms for a slot):", &outcomes);

    let m = bank.metrics();
    println!(
        "\nafter the bursts: available {} of {}, in flight {}, waiting {}",
        m.available_concurrent_calls(),
        m.max_allowed_concurrent_calls(),
        m.in_flight_calls(),
        m.waiting_calls()
    );
    assert_eq!(m.available_concurrent_calls(), m.max_allowed_concurrent_calls(), "a permit leaked");
}

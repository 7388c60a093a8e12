//! What `#[bulkhead]` costs next to a hand-written call, for instruction counts under
//! `valgrind --tool=callgrind` and heap blocks under `valgrind --tool=dhat`:
//! `macro_cost <op> <n>`. `benches/macro.sh` runs each op with `n` and with 0 and divides the
//! difference by `n`, so the set-up cancels out: every op makes one call before its loop
//! (for the attribute, the call site's one registry look-up), whatever `n` is.
//!
//! `macro_cost list` prints the op names. Run as a bench target by `cargo bench` (with
//! `--bench` and no op), it does nothing.

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bulkhead::{bulkhead, Bulkhead, BulkheadConfig, BulkheadFull, BulkheadRegistry};

const DEFAULT_N: u64 = 200_000;

const OPS: &[(&str, &str)] = &[
    ("hand_call", "hand-written: bulkhead.call(|| ())"),
    ("hand_call_fallible", "hand-written: bulkhead.call_fallible(|| Ok(()))"),
    ("attr_sync", "#[bulkhead] fn -> Result<(), E>"),
    ("attr_sync_fallback", "#[bulkhead(fallback = ..)] fn -> ()"),
    (
        "hand_call_async_fallible",
        "hand-written: call_async_fallible(async { Ok(()) }), polled once",
    ),
    ("attr_async", "#[bulkhead] async fn -> Result<(), E>, polled once"),
    ("hand_reject_fallible", "hand-written: call_fallible on a full bulkhead (Err(E::from))"),
    ("attr_reject", "#[bulkhead] fn on a full bulkhead (Err(E::from))"),
    ("lookup_per_call", "for comparison: registry.bulkhead(name).call(|| ()) (look-up per call)"),
];

/// The port's error; the refusal is kept as a reason only, as a real adapter would.
#[derive(Debug)]
struct Unavailable(#[allow(dead_code)] bulkhead::RejectReason);

impl From<BulkheadFull> for Unavailable {
    fn from(full: BulkheadFull) -> Self {
        Unavailable(full.reason())
    }
}

fn config(limit: usize) -> BulkheadConfig {
    BulkheadConfig::builder().max_concurrent_calls(limit).build().expect("a valid config")
}

#[bulkhead(name = "bench-attr")]
fn attr_sync() -> Result<(), Unavailable> {
    black_box(());
    Ok(())
}

#[bulkhead(name = "bench-attr", fallback = fallback)]
fn attr_sync_fallback() {
    black_box(());
}

fn fallback(_full: BulkheadFull) {}

#[bulkhead(name = "bench-attr")]
async fn attr_async() -> Result<(), Unavailable> {
    black_box(());
    Ok(())
}

#[bulkhead(name = "bench-full")]
fn attr_reject() -> Result<(), Unavailable> {
    Ok(())
}

/// Polls `fut` once (it is always ready: the bulkhead has room).
fn poll_ready<F: Future>(fut: F) -> F::Output {
    let waker = futures::task::noop_waker();
    match pin!(fut).poll(&mut Context::from_waker(&waker)) {
        Poll::Ready(out) => out,
        Poll::Pending => panic!("a free bulkhead answers at once"),
    }
}

fn run(op: &str, n: u64) -> Result<(), String> {
    let registry = BulkheadRegistry::global();
    let free: Arc<Bulkhead> = registry.bulkhead_with("bench-attr", config(4)).unwrap();
    let full: Arc<Bulkhead> = registry.bulkhead_with("bench-full", config(1)).unwrap();
    std::mem::forget(full.try_acquire_owned().expect("a free permit"));
    let free = &*free;
    let repeat = |f: &mut dyn FnMut()| {
        f(); // the set-up call: counted in the run with 0 too
        (0..n).for_each(|_| f());
    };
    match op {
        "hand_call" => repeat(&mut || {
            black_box(black_box(free).call(|| black_box(())).is_ok());
        }),
        "hand_call_fallible" => repeat(&mut || {
            let r = black_box(free).call_fallible(|| {
                black_box(());
                Ok::<_, Unavailable>(())
            });
            black_box(r.is_ok());
        }),
        "attr_sync" => repeat(&mut || {
            black_box(attr_sync().is_ok());
        }),
        "attr_sync_fallback" => repeat(&mut || attr_sync_fallback()),
        "hand_call_async_fallible" => repeat(&mut || {
            let fut = black_box(free).call_async_fallible(async { Ok::<_, Unavailable>(()) });
            black_box(poll_ready(fut).is_ok());
        }),
        "attr_async" => repeat(&mut || {
            black_box(poll_ready(attr_async()).is_ok());
        }),
        "hand_reject_fallible" => repeat(&mut || {
            let r = black_box(&*full).call_fallible(|| Ok::<_, Unavailable>(()));
            black_box(r.is_err());
        }),
        "attr_reject" => repeat(&mut || {
            black_box(attr_reject().is_err());
        }),
        "lookup_per_call" => repeat(&mut || {
            let bulkhead = black_box(registry).bulkhead(black_box("bench-attr"));
            black_box(bulkhead.call(|| black_box(())).is_ok());
        }),
        other => return Err(format!("unknown op '{other}' (see `macro_cost list`)")),
    }
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        None => {}
        Some(flag) if flag.starts_with("--") => {}
        Some("list") => {
            for (name, what) in OPS {
                println!("{name}\t{what}\t{DEFAULT_N}");
            }
        }
        Some(op) => {
            let n = args.get(1).and_then(|n| n.parse().ok()).unwrap_or(DEFAULT_N);
            if let Err(err) = run(op, n) {
                eprintln!("{err}");
                std::process::exit(2);
            }
        }
    }
}

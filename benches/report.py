#!/usr/bin/env python3
"""Turns the raw outputs of benches/report.sh into benches/results/latest.{md,svg,json}.

Subcommands:
  collect CRITERION_DIR             medians of every benchmark under CRITERION_DIR, as JSON
  callgrind OUT_FILE                the total instruction count (Ir) in a callgrind output
  executable NAME < cargo-json      the path of bench target NAME from cargo's JSON messages
  render WORK_DIR RESULTS_DIR       writes latest.md, latest.svg and latest.json

Only the standard library is used.
"""

import glob
import json
import os
import re
import sys

# --------------------------------------------------------------------------------------
# Collecting


def collect(criterion_dir):
    """{ "group/function": {"median": ns, "lo": ns, "hi": ns} } from criterion's estimates."""
    out = {}
    for bench_file in glob.glob(os.path.join(criterion_dir, "**", "new", "benchmark.json"),
                                recursive=True):
        new_dir = os.path.dirname(bench_file)
        with open(bench_file) as f:
            bench = json.load(f)
        with open(os.path.join(new_dir, "estimates.json")) as f:
            est = json.load(f)
        median = est["median"]
        out[bench["full_id"]] = {
            "median": median["point_estimate"],
            "lo": median["confidence_interval"]["lower_bound"],
            "hi": median["confidence_interval"]["upper_bound"],
        }
    return out


def callgrind_total(path):
    with open(path) as f:
        for line in f:
            if line.startswith("summary:") or line.startswith("totals:"):
                return int(line.split()[1])
    raise SystemExit(f"no totals in {path}")


def executable(name):
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            continue
        if msg.get("reason") == "compiler-artifact" and msg.get("target", {}).get("name") == name \
                and msg.get("executable"):
            return msg["executable"]
    raise SystemExit(f"no executable for bench target {name}")


# --------------------------------------------------------------------------------------
# What each of our rows is compared with: (group, ours) -> (tokio row, floor row).
# A row id is "group/function".

TOKIO_REF = {
    "rejection/bulkhead/try_acquire": "rejection/tokio/try_acquire",
    "rejection/bulkhead/try_acquire_owned": "rejection/tokio/try_acquire_owned",
    "rejection/bulkhead/try_acquire_err": "rejection/tokio/try_acquire_err",
    "rejection_under_churn/bulkhead/try_acquire": "rejection_under_churn/tokio/try_acquire",
    "rejection_under_churn/bulkhead/try_acquire_instrumented":
        "rejection_under_churn/tokio/try_acquire",
    "zero_wait_rejection/bulkhead/acquire": "zero_wait_rejection/tokio/timeout_zero_acquire",
    "zero_wait_rejection/bulkhead/acquire_async_poll":
        "zero_wait_rejection/tokio/timeout_zero_acquire",
    "zero_wait_rejection/bulkhead/acquire_async_in_tokio":
        "zero_wait_rejection/tokio/timeout_zero_acquire",
    "zero_wait_rejection/bulkhead/acquire_owned_async_poll":
        "zero_wait_rejection/tokio/timeout_zero_acquire_owned",
    "acquire_release/bulkhead/try_acquire": "acquire_release/tokio/try_acquire",
    "acquire_release/bulkhead/try_acquire_owned": "acquire_release/tokio/try_acquire_owned",
    "acquire_release/bulkhead/call": "acquire_release/tokio/try_acquire",
    "contended/bulkhead/try_acquire_spin": "contended/tokio/try_acquire_spin",
    "contended/bulkhead/acquire_async": "contended/tokio/acquire",
    "handoff/bulkhead/async": "handoff/tokio/async",
    "handoff/bulkhead/async_unbounded_wait": "handoff/tokio/async",
}
FLOOR_REF = {
    "rejection/bulkhead/try_acquire": "rejection/floor/load",
    "rejection/bulkhead/try_acquire_owned": "rejection/floor/load",
    "rejection/bulkhead/try_acquire_err": "rejection/floor/load",
    "rejection_under_churn/bulkhead/try_acquire": "rejection_under_churn/floor/load",
    "zero_wait_rejection/bulkhead/acquire": "rejection/floor/load",
    "zero_wait_rejection/bulkhead/acquire_async_poll": "rejection/floor/load",
    "zero_wait_rejection/bulkhead/acquire_owned_async_poll": "rejection/floor/load",
    "zero_wait_rejection/bulkhead/acquire_async_in_tokio": "rejection/floor/load",
    "acquire_release/bulkhead/try_acquire": "acquire_release/floor/cas_fetch_add",
    "acquire_release/bulkhead/try_acquire_owned": "acquire_release/floor/cas_fetch_add",
    "acquire_release/bulkhead/call": "acquire_release/floor/cas_fetch_add",
    "contended/bulkhead/try_acquire_spin": "contended/floor/cas_fetch_add_spin",
    "handoff/bulkhead/sync": "handoff/std/park_unpark",
    "events/bulkhead/call/one_listener": "events/bulkhead/call/no_listener",
    "events/bulkhead/reject/one_listener": "events/bulkhead/reject/no_listener",
    "events/bulkhead/call/instrumented": "events/bulkhead/call/no_listener",
    "events/bulkhead/acq_rel/instrumented": "events/bulkhead/acq_rel/no_listener",
    "events/bulkhead/reject/instrumented": "events/bulkhead/reject/no_listener",
}

GROUPS = [
    ("rejection", "Rejection: `try_acquire` on a full instance",
     "floor = one Relaxed load of a shared word"),
    ("rejection_under_churn", "Rejection while a second thread acquires/releases the same instance",
     "limit 1; the churner holds each permit for 8 `spin_loop` hints; see the mix below"),
    ("zero_wait_rejection", "Zero-wait rejection through the waiting API",
     "ours: `acquire`/`acquire_async` with `max_wait_duration` 0; tokio: "
     "`timeout(Duration::ZERO, sem.acquire())` in a current-thread runtime; "
     "×floor column: against rejection/floor/load"),
    ("acquire_release", "Uncontended acquire + release",
     "limit 16; floor = one CAS + one fetch_add"),
    ("contended", "Contended acquire + release, 2 threads, limit 1 (time per operation)",
     "blocking/async waiters alternate through FIFO hand-offs; *_spin retry `try_acquire`"),
    ("handoff", "Hand-off latency: release → the queued waiter runs with its permit",
     "sync ×floor column: against a bare `thread::park`/`unpark` ping-pong; "
     "async: two tasks on a 2-worker tokio runtime"),
    ("events", "Observing: a listener, or instrumented (metrics on)",
     "×floor column: the same operation with no listener and no metrics"),
]

# Callgrind op pairs: ours -> (tokio counterpart, floor counterpart)
CG_REFS = {
    "bulkhead_reject": ("tokio_reject", "floor_load"),
    "bulkhead_reject_owned": ("tokio_reject_owned", "floor_load"),
    "bulkhead_reject_err": ("tokio_reject_err", "floor_load"),
    "bulkhead_reject_error": ("tokio_reject_err", "floor_load"),
    "bulkhead_zero_wait": ("tokio_timeout_zero", "floor_load"),
    "bulkhead_zero_wait_async": ("tokio_timeout_zero", "floor_load"),
    "bulkhead_zero_wait_async_tokio": ("tokio_timeout_zero", "floor_load"),
    "bulkhead_acq_rel": ("tokio_acq_rel", "floor_cas_add"),
    "bulkhead_acq_rel_owned": ("tokio_acq_rel_owned", "floor_cas_add"),
    "bulkhead_call": ("tokio_acq_rel", "floor_cas_add"),
    "bulkhead_reject_instrumented": ("tokio_reject", "floor_load"),
    "bulkhead_reject_listener": ("tokio_reject", "floor_load"),
    "bulkhead_acq_rel_instrumented": ("tokio_acq_rel", "floor_cas_add"),
    "bulkhead_acq_rel_listener": ("tokio_acq_rel", "floor_cas_add"),
    "bulkhead_call_instrumented": ("tokio_acq_rel", "floor_cas_add"),
}


def fmt_ns(ns):
    if ns is None:
        return "–"
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.2f} µs"
    if ns >= 100:
        return f"{ns:.0f} ns"
    return f"{ns:.2f} ns"


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def fmt_ratio(r):
    if r is None:
        return "–"
    if r < 0.01:
        return f"1/{1 / r:,.0f}"
    return f"{r:.2f}×"


def verdict(ok):
    return "**met**" if ok else "**missed**"


# --------------------------------------------------------------------------------------
# Rendering


def render(work, results):
    runs = []
    for path in sorted(glob.glob(os.path.join(work, "run-*.json"))):
        with open(path) as f:
            runs.append(json.load(f))
    mixes = []
    for path in sorted(glob.glob(os.path.join(work, "mix-*.json"))):
        with open(path) as f:
            mixes.append(json.load(f))
    with open(os.path.join(work, "machine.json")) as f:
        machine = json.load(f)
    with open(os.path.join(work, "allocs.json")) as f:
        allocs = json.load(f)
    with open(os.path.join(work, "deadline.json")) as f:
        deadline = json.load(f)
    with open(os.path.join(work, "callgrind.json")) as f:
        callgrind = json.load(f)

    def med(run, key):
        entry = run.get(key)
        return entry["median"] if entry else None

    md = []
    w = md.append
    w("# Benchmark results (latest)")
    w("")
    w(f"Generated by `benches/report.sh` on {machine['date']} at commit `{machine['commit']}`.")
    w("")
    w(f"- Machine: {machine['cpu']}, {machine['cores']} cores "
      f"({machine['virt']}); shared with other jobs while it ran, so timings are noisy.")
    w(f"- Toolchain: `{machine['rustc']}`; profile `bench` (release + debug info).")
    w(f"- Criterion quick mode: `{machine['criterion_args']}`, run {len(runs)} times "
      "(columns *run 1*, *run 2*, ...). Medians of criterion's per-sample means.")
    w("- Instruction counts (callgrind) are exact and stable; use them for the comparison, "
      "and the timings for the order of magnitude.")
    w("")

    # Targets ---------------------------------------------------------------------------
    cg = {op: v["per_op"] for op, v in callgrind["ops"].items()}

    def all_runs(key):
        return [med(r, key) for r in runs]

    def ratios(a, b):
        return [ratio(x, y) for x, y in zip(all_runs(a), all_runs(b))]

    def show(rs):
        return " / ".join(fmt_ratio(r) for r in rs)

    targets = []
    rs = ratios("rejection/bulkhead/try_acquire", "rejection/tokio/try_acquire")
    cr = ratio(cg.get("bulkhead_reject"), cg.get("tokio_reject"))
    targets.append(("reject ≤ 1.0× tokio `try_acquire`",
                    f"time {show(rs)}; instructions {fmt_ratio(cr)}",
                    all(r is not None and r <= 1.0 for r in rs)))
    rs = ratios("rejection/bulkhead/try_acquire_err", "rejection/tokio/try_acquire_err")
    cr = ratio(cg.get("bulkhead_reject_err"), cg.get("tokio_reject_err"))
    targets.append(("the refusal a caller keeps (`try_acquire().err()`) ≤ 1.0× tokio's",
                    f"time {show(rs)}; instructions {fmt_ratio(cr)}",
                    cr is not None and cr <= 1.0))
    cr = ratio(cg.get("bulkhead_reject_instrumented"), cg.get("bulkhead_reject"))
    targets.append(("instrumented reject (metrics on) ≤ 2× the plain reject, in instructions",
                    f"instructions {fmt_ratio(cr)}", cr is not None and cr <= 2.0))
    cr = ratio(cg.get("bulkhead_acq_rel_instrumented"), cg.get("bulkhead_acq_rel"))
    targets.append(("instrumented acquire + release ≤ 1.5× the plain one, in instructions",
                    f"instructions {fmt_ratio(cr)}", cr is not None and cr <= 1.5))
    cr = ratio(cg.get("bulkhead_call"), cg.get("bulkhead_acq_rel"))
    targets.append(("`call(|| ())` ≤ acquire + release and a handful (≤ +10 instructions)",
                    f"{cg.get('bulkhead_call', 0):.1f} against {cg.get('bulkhead_acq_rel', 0):.1f}",
                    cg.get("bulkhead_call") is not None and cg.get("bulkhead_acq_rel") is not None
                    and cg["bulkhead_call"] <= cg["bulkhead_acq_rel"] + 10))
    rs = ratios("rejection/bulkhead/try_acquire", "rejection/floor/load")
    cr = ratio(cg.get("bulkhead_reject"), cg.get("floor_load"))
    targets.append(("reject ≤ 2× the floor (one load)",
                    f"time {show(rs)}; instructions {fmt_ratio(cr)}",
                    all(r is not None and r <= 2.0 for r in rs)))
    rs = ratios("rejection_under_churn/bulkhead/try_acquire",
                "rejection_under_churn/tokio/try_acquire")
    targets.append(("reject under churn ≤ 1.0× tokio", f"time {show(rs)}",
                    all(r is not None and r <= 1.0 for r in rs)))
    rs = ratios("acquire_release/bulkhead/try_acquire", "acquire_release/tokio/try_acquire")
    cr = ratio(cg.get("bulkhead_acq_rel"), cg.get("tokio_acq_rel"))
    targets.append(("acquire + release ≤ 0.8× tokio",
                    f"time {show(rs)}; instructions {fmt_ratio(cr)}",
                    all(r is not None and r <= 0.8 for r in rs)))
    speedups = []
    for ours in ("zero_wait_rejection/bulkhead/acquire",
                 "zero_wait_rejection/bulkhead/acquire_async_poll",
                 "zero_wait_rejection/bulkhead/acquire_async_in_tokio"):
        speedups.append((ours.split("/", 2)[2],
                         [ratio(t, o) for o, t in zip(all_runs(ours), all_runs(
                             "zero_wait_rejection/tokio/timeout_zero_acquire"))]))
    cs = ratio(cg.get("tokio_timeout_zero"), cg.get("bulkhead_zero_wait"))
    text = "; ".join(f"`{name}` " + " / ".join("–" if r is None else f"{r:.0f}× faster"
                                                 for r in rs) for name, rs in speedups)
    targets.append(("zero-wait rejection through the API ≥ 10× faster than "
                    "`timeout(ZERO, acquire())`",
                    f"time: {text}; instructions (sync `acquire`): "
                    f"{'–' if cs is None else f'{cs:.0f}× fewer'}",
                    all(r is not None and r >= 10 for _, rs in speedups for r in rs)))
    # Issue 33: the last paths where tokio's bare semaphore was ahead, against tokio's bare
    # forms (not against our own plain path), in instructions (callgrind: exact).
    cr = ratio(cg.get("bulkhead_reject_instrumented"), cg.get("tokio_reject"))
    targets.append(("counted refusal (metrics on) ≤ 1.0× tokio's bare `try_acquire` refusal",
                    f"instructions {fmt_ratio(cr)} ({cg.get('bulkhead_reject_instrumented', 0):.1f}"
                    f" against {cg.get('tokio_reject', 0):.1f})", cr is not None and cr <= 1.0))
    cr = ratio(cg.get("bulkhead_acq_rel_instrumented"), cg.get("tokio_acq_rel"))
    targets.append(("counted acquire + release < 1.0× tokio's bare one",
                    f"instructions {fmt_ratio(cr)}", cr is not None and cr < 1.0))
    cr = ratio(cg.get("round_bulkhead_unbounded"), cg.get("round_tokio_unbounded"))
    targets.append(("unbounded async hand-off round ≤ 0.9× tokio's `acquire()`",
                    f"instructions {fmt_ratio(cr)} ({cg.get('round_bulkhead_unbounded', 0):.0f}"
                    f" against {cg.get('round_tokio_unbounded', 0):.0f})",
                    cr is not None and cr <= 0.9))
    cr = ratio(cg.get("round_bulkhead_bounded"), cg.get("round_tokio_bounded"))
    targets.append(("bounded async hand-off round ≤ 0.8× tokio's `timeout(d, acquire())`",
                    f"instructions {fmt_ratio(cr)}", cr is not None and cr <= 0.8))
    ours_fast_reject = [a for a in allocs if a["op"].startswith("bulkhead")
                        and a["path"] in ("fast", "reject")]
    worst = max(a["allocs_per_op"] for a in ours_fast_reject)
    targets.append(("zero allocations on the fast and reject paths",
                    f"max {worst:g} allocations/op over {len(ours_fast_reject)} of our "
                    "fast/reject operations", worst == 0))

    w("## Targets")
    w("")
    w("Time ratios are given per criterion run (run 1 / run 2 / ...); a target counts as met "
      "only if every run meets it.")
    w("")
    w("| target | measured | verdict |")
    w("|---|---|---|")
    for name, measured, ok in targets:
        w(f"| {name} | {measured} | {verdict(ok)} |")
    w("")

    # Medians ---------------------------------------------------------------------------
    w("## Medians")
    w("")
    w("Time per operation. For our rows, ×tokio and ×floor divide our median by the "
      "comparison row's median from the same run (lower is better).")
    w("")
    all_ids = []
    for run in runs:
        for key in run:
            if key not in all_ids:
                all_ids.append(key)
    for group, title, note in GROUPS:
        ids = [k for k in all_ids if k.startswith(group + "/")]
        if not ids:
            continue
        ids.sort(key=lambda k: (not k.split("/")[1] == "bulkhead", k))
        w(f"### {title}")
        w("")
        w(f"{note}.")
        w("")
        head = "| benchmark | " + " | ".join(f"run {i + 1}" for i in range(len(runs)))
        head += " | ×tokio | ×floor |"
        w(head)
        w("|---|" + "---:|" * len(runs) + "---:|---:|")
        for key in ids:
            name = key[len(group) + 1:]
            cells = [fmt_ns(med(r, key)) for r in runs]
            t = TOKIO_REF.get(key)
            fl = FLOOR_REF.get(key)
            tr = show(ratios(key, t)) if t else ""
            fr = show(ratios(key, fl)) if fl else ""
            label = f"**{name}**" if name.startswith("bulkhead") else name
            w(f"| {label} | " + " | ".join(cells) + f" | {tr} | {fr} |")
        w("")
        if group == "rejection_under_churn" and mixes:
            w("Share of measured calls that found the permit free (and took and dropped it) "
              "instead of being rejected, per run:")
            w("")
            names = sorted({n for m in mixes for n in m})
            for n in names:
                shares = []
                for m in mixes:
                    e = m.get(n)
                    shares.append("–" if not e or not e["calls"] else
                                  f"{100.0 * e['free'] / e['calls']:.1f} %")
                w(f"- {n}: " + " / ".join(shares))
            w("")

    # Callgrind -------------------------------------------------------------------------
    w("## Instruction counts (callgrind)")
    w("")
    w("`valgrind --tool=callgrind` on `benches/callgrind.rs`: (Ir with n ops − Ir with 0 ops) "
      "/ n, so set-up cancels out; the loop's own few instructions are included in every "
      "row. ×tokio and ×floor divide by the matching tokio and floor op.")
    w("")
    w("| op | what | n | instructions/op | ×tokio | ×floor |")
    w("|---|---|---:|---:|---:|---:|")
    for op, v in callgrind["ops"].items():
        refs = CG_REFS.get(op)
        tr = fmt_ratio(ratio(v["per_op"], cg.get(refs[0]))) if refs else ""
        fr = fmt_ratio(ratio(v["per_op"], cg.get(refs[1]))) if refs else ""
        label = f"**{op}**" if op.startswith("bulkhead") else op
        w(f"| {label} | {v['what']} | {v['n']} | {v['per_op']:.1f} | {tr} | {fr} |")
    w("")

    # Allocations -----------------------------------------------------------------------
    w("## Allocations per operation")
    w("")
    w("Counted by a counting global allocator (`stats_alloc`) in `benches/probe.rs`: "
      "allocations + reallocations over 10 000 calls (200 for the slow path) after 100 "
      "warm-up calls.")
    w("")
    w("| path | operation | allocations/op | bytes/op |")
    w("|---|---|---:|---:|")
    for a in allocs:
        label = f"**{a['op']}**" if a["op"].startswith("bulkhead") else a["op"]
        w(f"| {a['path']} | {label} | {a['allocs_per_op']:g} | {a['bytes_per_op']:g} |")
    w("")

    # Deadline --------------------------------------------------------------------------
    w("## Deadline precision")
    w("")
    w("How far past its max wait a waiter that gets no permit returns (`benches/probe.rs "
      "deadline`): overshoot = time from the call to its return minus the max wait. "
      "`early` counts returns before the max wait had passed (must be 0). The async waits "
      "run in a current-thread tokio runtime.")
    w("")
    w("| max wait | waiter | samples | median | p99 | max | early |")
    w("|---:|---|---:|---:|---:|---:|---:|")
    for d in deadline:
        w(f"| {fmt_ns(d['wait_us'] * 1000)} | {d['how']} | {d['samples']} | "
          f"{d['median_us']:.1f} µs | {d['p99_us']:.1f} µs | {d['max_us']:.1f} µs | "
          f"{d['early']} |")
    w("")
    w("## Chart")
    w("")
    w("![rejection and acquire + release medians](latest.svg)")
    w("")
    w("Reproduce: `benches/report.sh` (about 5 minutes on 2 cores; needs valgrind and python3).")
    w("")

    with open(os.path.join(results, "latest.md"), "w") as f:
        f.write("\n".join(md))
    with open(os.path.join(results, "latest.svg"), "w") as f:
        f.write(svg(runs, [g for g in GROUPS if g[0] in ("rejection", "acquire_release")]))
    with open(os.path.join(results, "latest.json"), "w") as f:
        json.dump({"machine": machine, "runs": runs, "churn_mix": mixes, "allocs": allocs,
                   "deadline": deadline, "callgrind": callgrind}, f, indent=1, sort_keys=True)
        f.write("\n")


def esc(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def svg(runs, groups):
    """Horizontal bars, one panel per group, one bar per run for every row."""
    width, label_w, bar_w, row_h, bar_h = 760, 250, 420, 10 + 9 * len(runs), 8
    colors_ours = ["#1f6feb", "#6ea8fe", "#9ec5fe"]
    colors_other = ["#8b949e", "#c0c6cc", "#dde1e4"]
    parts = []
    y = 30
    for group, title, _ in groups:
        ids = []
        for run in runs:
            for key in run:
                if key.startswith(group + "/") and key not in ids:
                    ids.append(key)
        ids.sort(key=lambda k: (not k.split("/")[1] == "bulkhead", k))
        vmax = max((r[k]["median"] for r in runs for k in ids if k in r), default=1.0)
        parts.append(f'<text x="10" y="{y}" font-size="14" font-weight="bold">'
                     f'{esc(title.replace("`", ""))} (ns/op, median)</text>')
        y += 12
        for key in ids:
            name = key[len(group) + 1:]
            ours = name.startswith("bulkhead")
            weight = ' font-weight="bold"' if ours else ""
            parts.append(f'<text x="{label_w - 6}" y="{y + row_h / 2 + 4}" font-size="11" '
                         f'text-anchor="end"{weight}>{esc(name)}</text>')
            for i, run in enumerate(runs):
                if key not in run:
                    continue
                v = run[key]["median"]
                length = max(1.0, bar_w * v / vmax)
                color = (colors_ours if ours else colors_other)[min(i, 2)]
                by = y + 4 + i * 9
                parts.append(f'<rect x="{label_w}" y="{by}" width="{length:.1f}" '
                             f'height="{bar_h}" fill="{color}"/>')
                parts.append(f'<text x="{label_w + length + 4:.1f}" y="{by + 7}" '
                             f'font-size="9">{esc(fmt_ns(v))}</text>')
            y += row_h
        y += 24
    legend = " · ".join(f"run {i + 1}" for i in range(len(runs)))
    parts.append(f'<text x="10" y="{y}" font-size="10" fill="#555">Bars per row: {legend} '
                 '(darker = earlier run). Ours in blue, competitors and floor in grey.</text>')
    height = y + 16
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="sans-serif">\n'
            f'<rect width="100%" height="100%" fill="white"/>\n' + "\n".join(parts) + "\n</svg>\n")


def main(argv):
    if len(argv) >= 2 and argv[0] == "collect":
        json.dump(collect(argv[1]), sys.stdout, indent=1, sort_keys=True)
    elif len(argv) >= 2 and argv[0] == "callgrind":
        print(callgrind_total(argv[1]))
    elif len(argv) >= 2 and argv[0] == "executable":
        print(executable(argv[1]))
    elif len(argv) >= 3 and argv[0] == "render":
        render(argv[1], argv[2])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])

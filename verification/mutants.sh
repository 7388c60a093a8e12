#!/usr/bin/env bash
# Proof that the checks bite: applies realistic bugs to a scratch copy of the engine, one
# at a time, runs the suites on each, and prints which suite caught which bug.
#
#   verification/mutants.sh                      # every mutant, every suite
#   MUTANTS_ONLY="release_relaxed barging" verification/mutants.sh
#   MUTANTS_SUITES="loom model" verification/mutants.sh
#   MUTANTS_FILTER=keyed MUTANTS_SUITES="loom shuttle" verification/mutants.sh   # keyed scenarios only
#
# Suites: loom (exhaustive, LOOM_MAX_PREEMPTIONS=$MUTANTS_LOOM_PREEMPTIONS, default 2),
# shuttle (random + PCT, SHUTTLE_ITERATIONS=$MUTANTS_SHUTTLE_ITERATIONS, default 1000),
# model (the proptest reference model), tests (the unit tests and tests/*.rs).
# Each suite run is bounded by MUTANTS_SUITE_TIMEOUT seconds (default 300); a run that hits
# it counts as caught ("hang": a lost wake-up usually shows up that way in real threads).
# Target directories: MUTANTS_TARGET_DIR (default target/mutants) holds loom/, shuttle/ and
# plain/; MUTANTS_{LOOM,SHUTTLE,PLAIN}_TARGET_DIR override each (reuse your own to skip
# rebuilding the dependencies), but never one that another build uses at the same time:
# cargo names a root package's artifacts by its workspace-relative path, so two copies of
# this crate building in one target directory at once overwrite each other's binaries.
# Afterwards, the last mutant's binary may still sit there and look fresh to cargo for your
# own tree (same artifact names): touch src/lib.rs before trusting a run in that directory.
#
# The unmutated copy is run first; every suite must pass on it, or the script stops.
# Exit status: 0 if every mutant was caught by at least one suite and every ordering mutant
# by loom, 1 otherwise, 2 on a setup error.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET_BASE=${MUTANTS_TARGET_DIR:-$ROOT/target/mutants}
LOOM_TARGET=${MUTANTS_LOOM_TARGET_DIR:-$TARGET_BASE/loom}
SHUTTLE_TARGET=${MUTANTS_SHUTTLE_TARGET_DIR:-$TARGET_BASE/shuttle}
PLAIN_TARGET=${MUTANTS_PLAIN_TARGET_DIR:-$TARGET_BASE/plain}
LOG_DIR=${MUTANTS_LOG_DIR:-$TARGET_BASE/logs}
SUITES=${MUTANTS_SUITES:-"loom shuttle model tests"}
PREEMPTIONS=${MUTANTS_LOOM_PREEMPTIONS:-2}
SHUTTLE_N=${MUTANTS_SHUTTLE_ITERATIONS:-1000}
SUITE_TIMEOUT=${MUTANTS_SUITE_TIMEOUT:-300}
# A test-name filter for the loom and shuttle suites (default: every scenario).
FILTER=${MUTANTS_FILTER:-}

SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/bulkhead-mutants.XXXXXX")
trap 'rm -rf "$SCRATCH"' EXIT
mkdir -p "$LOG_DIR"

# A pristine copy of the crate at HEAD (or of the work tree with MUTANTS_FROM_WORKTREE=1),
# refreshed before each mutant.
PRISTINE=$SCRATCH/pristine
WORK=$SCRATCH/bulkhead
mkdir -p "$PRISTINE"
if [ -n "${MUTANTS_FROM_WORKTREE:-}" ]; then
    tar -C "$ROOT" --exclude=./target --exclude=./.git -cf - . | tar -C "$PRISTINE" -xf -
else
    # The committed tree: a shared checkout's uncommitted edits are not what we test.
    git -C "$ROOT" archive HEAD | tar -C "$PRISTINE" -xf -
fi
# The copy must be its own workspace root: cargo would otherwise look for a workspace in the
# scratch directory's parents (a stray Cargo.toml in /tmp breaks the build). The crate's
# Cargo.toml has a [workspace] table (members: macros/) since the attribute crate landed.
grep -q '^\[workspace\]' "$PRISTINE/Cargo.toml" || printf '\n[workspace]\n' >>"$PRISTINE/Cargo.toml"

fresh_copy() {
    rm -rf "$WORK"
    cp -a "$PRISTINE" "$WORK"
}

# mutate FILE OLD NEW: replaces the one literal occurrence of OLD in FILE by NEW, and fails
# unless there was exactly one (so a mutant that no longer applies is reported, not skipped).
mutate() {
    local file=$WORK/$1
    OLD=$2 NEW=$3 perl -0pi -e '
        my $n = () = /\Q$ENV{OLD}\E/g;
        die "expected exactly 1 match in '"$1"', found $n\n" unless $n == 1;
        s/\Q$ENV{OLD}\E/$ENV{NEW}/;
    ' "$file"
    if cmp -s "$file" "$PRISTINE/$1"; then
        echo "mutation of $1 changed nothing" >&2
        return 1
    fi
}

# ---------------------------------------------------------------------------------------
# The mutants: name, whether it is an ordering bug (loom must catch it), and the edit.
# ---------------------------------------------------------------------------------------
MUTANTS=(
    release_ignores_waiter_flag
    withdraw_ignores_grant
    waiters_flag_cleared_with_waiter_left
    enqueue_skips_drain_after_flag
    dropped_async_forgets_grant
    sync_timeout_forgets_grant
    shrink_revokes_in_flight
    grow_does_not_serve_waiters
    try_acquire_barges
    waiter_cap_off_by_one
    withdraw_leaves_slot_linked
    repoll_keeps_stale_waker
    timer_never_expires
    timer_assumes_queue_order
    waker_dropped_under_lock
    withdraw_drops_waker_under_lock
    change_config_wakes_under_config_lock
    drained_relaxed
    drain_grants_after_close
    slab_never_shrinks
    close_strands_queued_waiters
    close_clears_waiters_flag
    close_forgets_waiters_flag
    enqueue_ignores_closed
    drain_forgets_drainers
    blocking_check_off
    release_relaxed
    acquire_cas_relaxed
    drain_cas_relaxed
    counter_slots_shared
    listener_lost_in_registration_race
    on_event_leaves_flag_clear
    on_event_keeps_fast_mode
    counted_release_skips_count
    removed_listener_still_called
    keyed_total_refusal_keeps_key_slot
    keyed_sync_takes_total_before_key
    keyed_evicts_by_metrics
    keyed_evicts_without_acquire
    keyed_bound_without_reservation
    keyed_closed_full_map_too_many_keys
    keyed_closed_key_never_idle
    keyed_same_key_reserves_before_lookup
    keyed_try_takes_total_before_key
    keyed_owned_async_skips_total
    keyed_listener_read_before_shard_lock
    adaptive_releases_before_recording
    adaptive_limit_applied_without_recheck
    adaptive_fold_skips_recheck
    adaptive_pending_skips_recheck
    newcomer_own_wake_called
    adaptive_fold_skips_samples_pushed_during_drain
    adaptive_push_tail_relaxed
    adaptive_algorithm_panic_escapes
    inline_counted_grant_skips_count
    withdraw_skips_weighted_drain
    dropped_weighted_returns_one
    release_serves_one_waiter
    drain_grants_on_any_free_permit
    drain_grants_head_one_permit
    try_acquire_many_barges
    shrink_skips_drain
    drain_never_refuses_above_limit
    timed_out_weighted_owes_no_drain
    owed_drain_wakes_under_lock
    release_wakes_under_lock
    evicted_waiter_not_woken
    sheddable_fast_path_ignores_headroom
    queue_ignores_headroom
    classes_served_lowest_first
    keyed_owned_async_total_takes_one
    keyed_weighted_total_takes_one
    unfit_ignores_headroom
    enqueue_misses_shrink_after_look
    drain_completes_drainers_relaxed
    waker_panic_escapes
    default_try_ignores_headroom
    wait_drained_zero_checks_after_queueing
    timer_schedule_wakes_for_later_deadline
    timer_rearm_skips_timed_waiters
    unlink_restores_order_with_timed_left
    shrink_with_waiters_skips_drain
    queue_order_display_empty
    criticality_label_wrong
    pop_expired_stops_at_untimed
    earliest_deadline_stops_at_untimed
    adaptive_full_ring_overwrites
    adaptive_full_ring_drop_uncounted
    shares_owner_not_critical
    shares_borrower_keeps_critical
    shares_default_ignored
    shares_refusal_keeps_key_slot
    shares_owned_future_ignores_share
    own_timer_goes_to_process
    own_timer_callback_under_lock
    keyed_future_drop_at_total_skips_cancel
    shares_named_future_ignores_share
    async_wait_ignores_per_call_max_wait
    finished_wait_keeps_slot
    adaptive_target_not_strict
)
ORDERING_MUTANTS=" release_relaxed acquire_cas_relaxed drain_cas_relaxed keyed_evicts_without_acquire drained_relaxed adaptive_push_tail_relaxed drain_completes_drainers_relaxed "

describe() {
    case $1 in
    release_ignores_waiter_flag) echo "release's fast path ignores the WAITERS flag (never drains)" ;;
    withdraw_ignores_grant) echo "a withdrawal ignores a grant that already happened (permit leaked)" ;;
    waiters_flag_cleared_with_waiter_left) echo "a withdrawal clears WAITERS while one live waiter is left" ;;
    enqueue_skips_drain_after_flag) echo "enqueue never drains after setting WAITERS (lost wake-up)" ;;
    dropped_async_forgets_grant) echo "a dropped async acquire forgets the permit granted to it" ;;
    sync_timeout_forgets_grant) echo "a sync waiter at its deadline ignores a grant that won" ;;
    shrink_revokes_in_flight) echo "a shrink clamps available at 0 (forgets the debt)" ;;
    grow_does_not_serve_waiters) echo "growing the limit does not serve queued waiters" ;;
    try_acquire_barges) echo "try_acquire ignores WAITERS (barging)" ;;
    waiter_cap_off_by_one) echo "max_waiting_calls admits one waiter too many" ;;
    withdraw_leaves_slot_linked) echo "a withdrawal frees its slot without unlinking it from the FIFO" ;;
    repoll_keeps_stale_waker) echo "a re-poll with a different waker keeps the old one (register-then-check broken)" ;;
    timer_never_expires) echo "the deadline timer fires but never finds a deadline passed" ;;
    timer_assumes_queue_order) echo "the timer assumes deadlines in queue order after a change_config shortened the wait" ;;
    waker_dropped_under_lock) echo "a re-poll drops the replaced waker under the queue lock (tokio's release_permits_at_drop)" ;;
    withdraw_drops_waker_under_lock) echo "a withdrawal drops the slot's waker under the queue lock" ;;
    change_config_wakes_under_config_lock) echo "change_config serves (wakes) queued waiters while holding the config lock" ;;
    drained_relaxed) echo "wait_drained reads the drained word Relaxed (no happens-before with the last release)" ;;
    drain_grants_after_close) echo "a release racing close's wake batches grants a waiter queued before the close" ;;
    slab_never_shrinks) echo "the slab keeps its peak size after a storm (memory never returned)" ;;
    close_strands_queued_waiters) echo "close refuses new calls but leaves queued waiters asleep" ;;
    close_clears_waiters_flag) echo "a drain clears WAITERS after close (releases skip the drain wake-up)" ;;
    close_forgets_waiters_flag) echo "close sets CLOSED but not WAITERS (releases after it skip the lock)" ;;
    enqueue_ignores_closed) echo "enqueue queues a waiter on a closed bulkhead (never woken)" ;;
    drain_forgets_drainers) echo "the last release marks drain waiters done without waking them" ;;
    blocking_check_off) echo "a blocking acquire parks a thread that drives async tasks" ;;
    release_relaxed) echo "release fetch_add Release -> Relaxed" ;;
    acquire_cas_relaxed) echo "try_acquire CAS Acquire -> Relaxed" ;;
    drain_cas_relaxed) echo "drain CAS Acquire -> Relaxed" ;;
    counter_slots_shared) echo "every thread gets counter slot 0 (single-writer cells shared: lost updates)" ;;
    listener_lost_in_registration_race) echo "a registration that loses the race for a chain link is dropped" ;;
    on_event_leaves_flag_clear) echo "on_event does not raise OBSERVED (a lone listener hears nothing)" ;;
    on_event_keeps_fast_mode) echo "issue 21: on_event does not recompute the fast mode (the counters keep counting alone, inline; the listener hears nothing)" ;;
    counted_release_skips_count) echo "issue 21: the release of a permit counted alone does not count it finished" ;;
    removed_listener_still_called) echo "emit ignores a listener's removal" ;;
    keyed_total_refusal_keeps_key_slot) echo "keyed: a total refusal leaks the key slot already taken" ;;
    keyed_listener_read_before_shard_lock) echo "keyed (issue 19): a new key reads the keyed-level listeners before its shard's lock (a concurrent on_event reaches neither)" ;;
    keyed_owned_async_skips_total) echo "keyed (issue 19): the owned async acquire (AcquireOwnedKeyed) never waits for the total" ;;
    keyed_sync_takes_total_before_key) echo "keyed: the blocking acquire takes the total before the key (async takes key first)" ;;
    keyed_evicts_by_metrics) echo "keyed: idle means nothing in flight or waiting (misses a caller between look-up and acquire)" ;;
    keyed_evicts_without_acquire) echo "keyed: idle means only the map holds the Arc (no Acquire: the next holder may miss the last one's writes)" ;;
    keyed_bound_without_reservation) echo "keyed: a new key checks the live count, then adds itself (no CAS: two shards both take the last place)" ;;
    keyed_closed_full_map_too_many_keys) echo "keyed (issue 17): after close, a new key at a full map is refused TooManyKeys, not Closed" ;;
    keyed_closed_key_never_idle) echo "keyed (issue 17): a closed key never counts as idle (evict_idle evicts nothing after close)" ;;
    keyed_same_key_reserves_before_lookup) echo "keyed (issue 17): a new key reserves its place before the look-up; one that finds the key created meanwhile keeps the place (leak)" ;;
    keyed_try_takes_total_before_key) echo "keyed (issue 17): try_acquire takes the total before the key (a key refusal takes, counts and releases a total slot)" ;;
    withdraw_skips_weighted_drain) echo "weighted: the head that withdraws does not drain (the smaller requests a weighted head held back, or a new head above the limit, are left waiting)" ;;
    dropped_weighted_returns_one) echo "weighted: a dropped acquire granted n permits gives back only 1 (leak)" ;;
    release_serves_one_waiter) echo "weighted: a release of many grants only the first waiter it satisfies (kotlinx #1553, first bug)" ;;
    drain_grants_on_any_free_permit) echo "weighted: a drain grants the head as soon as one permit is free (kotlinx #1553, second bug: over-grant)" ;;
    drain_grants_head_one_permit) echo "weighted: a drain takes 1 permit for a request of n (permits created on release)" ;;
    try_acquire_many_barges) echo "weighted: try_acquire_many ignores WAITERS (barges past a queued head)" ;;
    shrink_skips_drain) echo "weighted: a shrink with waiters queued does not drain (a head above the new limit waits for ever)" ;;
    drain_never_refuses_above_limit) echo "weighted: a drain never refuses a waiter above the limit (issue 29: re-pointed at refuse_unfit, which now refuses wherever the waiter stands)" ;;
    timed_out_weighted_owes_no_drain) echo "weighted: a head withdrawn by the timer leaves the waiters behind it unserved (issue 29: re-pointed at the drain the expiry itself now runs)" ;;
    evicted_waiter_not_woken) echo "policy: a full LIFO queue evicts its oldest waiter without waking it (it waits for ever)" ;;
    sheddable_fast_path_ignores_headroom) echo "policy: a sheddable try takes the permits kept for critical and default calls" ;;
    queue_ignores_headroom) echo "policy: the queue (enqueue and drain) admits a sheddable waiter into the headroom" ;;
    classes_served_lowest_first) echo "policy: the drain serves the lowest class first (sheddable before critical)" ;;
    owed_drain_wakes_under_lock) echo "weighted: the drain after the timer withdrew a weighted head wakes the granted waiters under the queue lock" ;;
    unfit_ignores_headroom) echo "issue 29: whether a request can ever fit ignores the sheddable headroom (a sheddable request for 3 at limit 4, headroom 2, queues for ever)" ;;
    enqueue_misses_shrink_after_look) echo "issue 29: an enqueue does not look at the limit its flag-raising RMW saw (a shrink between its look and the flag leaves an unfit waiter queued)" ;;
    drain_completes_drainers_relaxed) echo "issue 29: the drain that completes drain waiters reads the word Relaxed (a waiter queued before close misses the last call's writes)" ;;
    waker_panic_escapes) echo "issue 29: a waker's panic in wake() unwinds through the waking call (the rest of a release batch, close, the timer thread)" ;;
    default_try_ignores_headroom) echo "issue 29: a default try_acquire is refused the free headroom slots while a sheddable caller waits" ;;
    wait_drained_zero_checks_after_queueing) echo "issue 29: wait_drained(ZERO) runs the async-context check after queueing (panics, leaks its drain slot)" ;;
    own_timer_goes_to_process) echo "issue 30: a bulkhead bound to a runtime's Timer arms its deadlines on the process timer (the thread starts, the runtime is never told)" ;;
    async_wait_ignores_per_call_max_wait) echo "issue 31: a queued async acquire waits the bulkhead's max wait, ignoring its request's shorter max_wait (the timer never withdraws it at its own deadline)" ;;
    adaptive_target_not_strict) echo "stop 37 (cargo-mutants 18/32): adaptive LIFO counts a waiter exactly target old as above the target (the standing interval starts early)" ;;
    finished_wait_keeps_slot) echo "stop 37: a wait that collects its outcome leaves its queue slot in use (the slab never empties, its memory is never given back)" ;;
    shares_named_future_ignores_share) echo "issue 32 x 30: the keyed named futures (AcquireKeyed, AcquireKeyedWithSleep) ask the total in the class they were given, not the share's" ;;
    keyed_future_drop_at_total_skips_cancel) echo "issue 30: the keyed named future (AcquireKeyed) dropped while waiting at the total does not withdraw there (a slot granted to it is lost, its queue slot stays)" ;;
    own_timer_callback_under_lock) echo "issue 30: a runtime Timer's callback runs under the timer's heap lock (a callback that fires the timer deadlocks)" ;;
    timer_schedule_wakes_for_later_deadline) echo "issue 29: the timer thread is unparked for a deadline later than its earliest, not an earlier one (a 20 ms wait sleeps until another bulkhead's 120 s deadline)" ;;
    timer_rearm_skips_timed_waiters) echo "issue 29: after a fire the queue finds no later deadline (earliest_deadline scans only when nothing is timed): the next waiter's deadline is never armed" ;;
    unlink_restores_order_with_timed_left) echo "issue 29: a waiter leaving while timed waiters are left marks the deadlines in queue order again (after a change_config shortened the wait)" ;;
    shrink_with_waiters_skips_drain) echo "issue 29: set_limit asks for the drain on growth instead of on a shrink (an adaptive shrink leaves a request above the new limit queued)" ;;
    queue_order_display_empty) echo "issue 29: QueueOrder's Display writes nothing" ;;
    criticality_label_wrong) echo "issue 29: Criticality::label (and Display) names every class \"xyzzy\"" ;;
    pop_expired_stops_at_untimed) echo "issue 29: the timer's scan stops at a waiter without an engine deadline (a blocking, custom-sleep or unbounded head hides the expired waiters behind it)" ;;
    earliest_deadline_stops_at_untimed) echo "issue 29: the re-arm's scan stops at a waiter without an engine deadline (the second timed waiter behind such a head is never armed)" ;;
    adaptive_full_ring_overwrites) echo "issue 29: a push to a full sample ring overwrites its oldest sample, not folded yet" ;;
    adaptive_full_ring_drop_uncounted) echo "issue 29: a sample dropped on a full ring is not counted in samples_dropped" ;;
    shares_owner_not_critical) echo "shares (issue 32): an owner asks the total in its own class (a release goes FIFO, not to the owner)" ;;
    shares_borrower_keeps_critical) echo "shares (issue 32): a borrower asking Critical is not demoted (it competes with owners)" ;;
    shares_default_ignored) echo "shares (issue 32): a key without its own share gets none (the default share is ignored, a new key after an eviction is a borrower)" ;;
    shares_refusal_keeps_key_slot) echo "shares (issue 32): try_acquire refused by the total keeps its key slot (leak)" ;;
    shares_owned_future_ignores_share) echo "shares (issue 32): the owned futures ask the total in the class they were given (an owner is not promoted, a critical borrower not demoted)" ;;
    release_wakes_under_lock) echo "a release that found waiters wakes the waiter it granted before unlocking the queue (stop 27's one-round release_slow)" ;;
    adaptive_limit_applied_without_recheck) echo "adaptive (issue 17): the new limit is applied after the controller's lock once, without reading the controller again (two racing changes can leave the engine at the older limit)" ;;
    adaptive_fold_skips_recheck) echo "adaptive (issue 21): a folder does not look for requests made while it held the algorithm (a failure that found the algorithm taken waits for an unrelated fold)" ;;
    adaptive_pending_skips_recheck) echo "issue 29: a folder does not look for samples fed by hand (by the algorithm itself, or a thread without a ring) while it held the algorithm: they wait for an unrelated fold" ;;
    newcomer_own_wake_called) echo "cargo-mutants 7/32: a newcomer granted by the drain after its own enqueue is woken too (WakeList::take_last gives nothing back)" ;;
    adaptive_fold_skips_samples_pushed_during_drain) echo "adaptive (issue 21): a fold marks as folded the samples pushed while it drained (reads tail again for head): they are lost" ;;
    adaptive_push_tail_relaxed) echo "adaptive (issue 21): a sample's tail is published Relaxed (a fold may read the ring place before the sample is visible)" ;;
    inline_counted_grant_skips_count) echo "counting alone (issue 21, stop 26): try_acquire's inline counted grant marks the permit COUNTED without counting it permitted" ;;
    adaptive_algorithm_panic_escapes) echo "adaptive: a panic in the user's LimitAlgorithm::update unwinds out of the fold (through a permit's release: the permit is lost)" ;;
    adaptive_releases_before_recording) echo "adaptive (issue 17): a permit is released before its sample is recorded (a queued caller is admitted under the limit before the failure)" ;;
    keyed_owned_async_total_takes_one) echo "keyed weighted (issue 20): the owned async acquire asks the total for 1 slot, whatever its key granted" ;;
    keyed_weighted_total_takes_one) echo "keyed weighted (issue 20): the borrowed weighted acquires ask the total for 1 slot, whatever the key granted" ;;
    esac
}

apply() {
    case $1 in
    release_ignores_waiter_flag)
        mutate src/engine/state.rs '        if prev.has_waiters() {
            self.release_slow();
        }
        prev' '        prev' ;;
    withdraw_ignores_grant)
        mutate src/engine/state.rs '            ended => (ended.outcome(), false),' '            ended => (ended.outcome().filter(|outcome| *outcome != Outcome::Granted), false),' ;;
    waiters_flag_cleared_with_waiter_left)
        mutate src/engine/state.rs 'if queue.live == 0 && !self.load().is_closed() {' 'if queue.live <= 1 && !self.load().is_closed() {' ;;
    enqueue_skips_drain_after_flag)
        mutate src/engine/state.rs '        } else if prev.available() <= 0 && !prev.cannot_fit(queue.max_required) {' '        } else if true {' ;;
    dropped_async_forgets_grant)
        mutate src/bulkhead/future.rs '            bulkhead.sem().release_many(permits);
' '' ;;
    sync_timeout_forgets_grant)
        mutate src/bulkhead/blocking.rs 'return sem.withdraw(key);' 'return sem.withdraw(key).filter(|o| *o != Outcome::Granted);' ;;
    shrink_revokes_in_flight)
        mutate src/engine/state.rs 'Word::encode(word.available() + delta, limit, flags)' 'Word::encode((word.available() + delta).max(0), limit, flags)' ;;
    grow_does_not_serve_waiters)
        mutate src/engine/state.rs '        new.has_waiters() && (new.available() > 0 || new.limit() < word.limit())
    }' '        false
    }' ;;
    try_acquire_barges)
        mutate src/engine/state.rs '    fn lets_newcomers_in(self) -> bool {
        self.0 & (WAITERS | CLOSED) == 0' '    fn lets_newcomers_in(self) -> bool {
        self.0 & CLOSED == 0' ;;
    waiter_cap_off_by_one)
        mutate src/engine/state.rs 'queue.live >= max' 'queue.live > max' ;;
    withdraw_leaves_slot_linked)
        mutate src/engine/state.rs '                let was_next = queue.next() == key.index();
                queue.unlink(key.index());' '                let was_next = queue.next() == key.index();
                queue.live -= 1;' ;;
    repoll_keeps_stale_waker)
        mutate src/engine/state.rs 'if matches!(&queue.slot(key).wake, Some(Wake::Task(current)) if current.will_wake(waker)) {' 'if queue.slot(key).wake.is_some() {' ;;
    timer_never_expires)
        mutate src/engine/state.rs 'Some(deadline) if deadline <= now => {' 'Some(deadline) if deadline <= now && false => {' ;;
    timer_assumes_queue_order)
        mutate src/engine/state.rs '                        self.ordered = false;
' '' ;;
    waker_dropped_under_lock)
        mutate src/engine/state.rs '        let replaced = queue.slot(key).wake.replace(fresh);
        drop(queue);' '        let replaced = queue.slot(key).wake.replace(fresh);
        drop(replaced);
        let replaced: Option<Wake> = None;
        drop(queue);' ;;
    withdraw_drops_waker_under_lock)
        mutate src/engine/state.rs '        let wake = queue.free(key);
        if owed {' '        drop(queue.free(key));
        let wake: Option<Wake> = None;
        if owed {' ;;
    change_config_wakes_under_config_lock)
        mutate src/bulkhead/mod.rs '        *current = config;
        drop(current);' '        *current = config;
        if serve {
            self.sem.serve_waiters();
        }
        drop(current);' ;;
    drained_relaxed)
        mutate src/engine/state.rs '        let word = Word(self.state.load(Ordering::Acquire));
        if word.is_closed() && word.in_flight() == 0 {' '        let word = Word(self.state.load(Ordering::Relaxed));
        if word.is_closed() && word.in_flight() == 0 {' ;;
    drain_grants_after_close)
        mutate src/engine/state.rs '            if word.is_closed() {
                return None; // closed' '            if false {
                return None; // closed' ;;
    slab_never_shrinks)
        mutate src/engine/state.rs 'if self.slots.capacity() > Self::RETAINED_CAPACITY {
                self.slots = Vec::new();
            } else {
                self.slots.clear();
            }
            self.free = NIL;
        } else {' 'self.slots[key.index as usize].next = self.free;
            self.free = key.index;
        } else {' ;;
    close_strands_queued_waiters)
        mutate src/engine/state.rs '                match queue.pop_any(SlotState::Closed) {' '                match None::<Option<Wake>> {' ;;
    close_clears_waiters_flag)
        mutate src/engine/state.rs '                if !word.is_closed() {
                    self.clear_waiters_flag();
                    return false;
                }' '                if !word.is_closed() {
                    self.clear_waiters_flag();
                    return false;
                }
                self.clear_waiters_flag();' ;;
    close_forgets_waiters_flag)
        mutate src/engine/state.rs 'self.state.fetch_or(CLOSED | WAITERS, Ordering::Relaxed)' 'self.state.fetch_or(CLOSED, Ordering::Relaxed)' ;;
    enqueue_ignores_closed)
        mutate src/engine/state.rs '            Err(word) if word.is_closed() => {
                return unlock_then_drop(queue, wake, Enqueued::Closed);
            }
' '' ;;
    drain_forgets_drainers)
        mutate src/engine/state.rs '                    match queue.pop_front(DRAINERS, SlotState::Drained) {
                        Some(wake) => wakes.push(wake),' '                    match queue.pop_front(DRAINERS, SlotState::Drained) {
                        Some(_) => {}' ;;
    blocking_check_off)
        mutate src/bulkhead/blocking.rs '    if runs_async_tasks() {' '    if runs_async_tasks() && false {' ;;
    release_relaxed)
        mutate src/engine/state.rs 'fetch_add(permits(n), Ordering::Release)' 'fetch_add(permits(n), Ordering::Relaxed)' ;;
    acquire_cas_relaxed)
        # Both copies of the one-permit CAS: `try_acquire` and `try_acquire_with` (issue 21).
        mutate src/engine/state.rs '            // keeps in-flight calls within the limit.
            match self.state.compare_exchange_weak(
                word.0,
                word.0.wrapping_sub(ONE_PERMIT),
                Ordering::Acquire,' '            // keeps in-flight calls within the limit.
            match self.state.compare_exchange_weak(
                word.0,
                word.0.wrapping_sub(ONE_PERMIT),
                Ordering::Relaxed,' &&
            mutate src/engine/state.rs '            // Release `fetch_add`; Relaxed on failure feeds only the retry).
            match self.state.compare_exchange_weak(
                word.0,
                word.0.wrapping_sub(ONE_PERMIT),
                Ordering::Acquire,' '            // Release `fetch_add`; Relaxed on failure feeds only the retry).
            match self.state.compare_exchange_weak(
                word.0,
                word.0.wrapping_sub(ONE_PERMIT),
                Ordering::Relaxed,' ;;
    drain_cas_relaxed)
        mutate src/engine/state.rs '                word.0.wrapping_sub(permits(need)),
                Ordering::Acquire,' '                word.0.wrapping_sub(permits(need)),
                Ordering::Relaxed,' ;;
    counter_slots_shared)
        mutate src/engine/sync.rs 'let taken = NEXT_SLOT.fetch_add(1, super::Ordering::SeqCst);' 'let taken = NEXT_SLOT.load(super::Ordering::SeqCst);' &&
            mutate src/engine/sync.rs '                    pool.next += 1;
' '' ;;
    listener_lost_in_registration_race)
        mutate src/observe/mod.rs 'Err(back) => node = back,' 'Err(_) => return,' ;;
    on_event_leaves_flag_clear)
        mutate src/bulkhead/mod.rs '        self.listeners.push(Box::new(listener), StdArc::clone(&active));
        self.note_observers();
        self.sem.set_observed();' '        self.listeners.push(Box::new(listener), StdArc::clone(&active));
        self.note_observers();' ;;
    on_event_keeps_fast_mode)
        mutate src/bulkhead/mod.rs '        self.listeners.push(Box::new(listener), StdArc::clone(&active));
        self.note_observers();' '        self.listeners.push(Box::new(listener), StdArc::clone(&active));' ;;
    counted_release_skips_count)
        mutate src/bulkhead/mod.rs '                    bump_own(&cells.finished);
                    return self.note_release();' '                    return self.note_release();' ;;
    removed_listener_still_called)
        mutate src/observe/mod.rs 'if node.active.load(Ordering::Relaxed) {' 'if node.active.load(Ordering::Relaxed) || true {' ;;
    keyed_total_refusal_keeps_key_slot)
        mutate src/keyed/permit.rs '            drop(key);
            Err(refused)' '            std::mem::forget(key);
            Err(refused)' ;;
    keyed_sync_takes_total_before_key)
        mutate src/keyed/acquire.rs '        let (bulkhead, mark) = take(self.bulkhead_for(key)?, Bulkhead::acquire)?;
        let key_permit = KeyedPermit::key_slot(bulkhead, mark);
        let total = self.total.as_deref().map(Bulkhead::acquire);' '        let total = self.total.as_deref().map(Bulkhead::acquire);
        let (bulkhead, mark) = take(self.bulkhead_for(key)?, Bulkhead::acquire)?;
        let key_permit = KeyedPermit::key_slot(bulkhead, mark);' ;;
    keyed_evicts_by_metrics)
        mutate src/keyed/map.rs '    Arc::strong_count(bulkhead) == 1 && bulkhead.is_idle_acquire()' '    bulkhead.is_idle_acquire()' ;;
    keyed_evicts_without_acquire)
        mutate src/keyed/map.rs '    Arc::strong_count(bulkhead) == 1 && bulkhead.is_idle_acquire()' '    Arc::strong_count(bulkhead) == 1' ;;
    keyed_bound_without_reservation)
        mutate src/keyed/map.rs '            match self.live.compare_exchange(live, live + 1, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(now) => live = now,
            }' '            self.live.fetch_add(1, Ordering::Relaxed);
            return true;' ;;
    keyed_closed_full_map_too_many_keys)
        mutate src/keyed/map.rs '            if shard.closed || self.closed.load(Ordering::Relaxed) {' '            if (shard.closed || self.closed.load(Ordering::Relaxed)) && self.live_keys() < self.max_keys {' ;;
    keyed_closed_key_never_idle)
        mutate src/engine/state.rs '        word.in_flight() == 0 && (!word.has_waiters() || word.is_closed())' '        word.in_flight() == 0 && !word.has_waiters()' ;;
    keyed_same_key_reserves_before_lookup)
        mutate src/keyed/map.rs '            let mut shard = self.shard(hash).lock();
            if let Some(entry) = shard.table.find(hash, |e| *e.key == *key) {
                let found = Arc::clone(&entry.bulkhead);' '            let reserved = self.reserve();
            let mut shard = self.shard(hash).lock();
            if let Some(entry) = shard.table.find(hash, |e| *e.key == *key) {
                let found = Arc::clone(&entry.bulkhead);' &&
        mutate src/keyed/map.rs '            if !self.reserve() {' '            if !reserved {' ;;
    keyed_try_takes_total_before_key)
        mutate src/keyed/acquire.rs '        let key_permit = self.try_key(key, KeyedPermit::key_slot);
        match self.total.as_deref() {
            None => key_permit,
            Some(total) => key_permit?.with_total(Some(total.try_acquire())),' '        let total_first = self.total.as_deref().map(Bulkhead::try_acquire);
        let key_permit = self.try_key(key, KeyedPermit::key_slot);
        match total_first {
            None => key_permit,
            Some(total) => key_permit?.with_total(Some(total)),' ;;
    keyed_listener_read_before_shard_lock)
        mutate src/keyed/map.rs '        let mut new = Some((Arc::new(key.clone()), Arc::new(bulkhead)));' '        let mut new = Some((Arc::new(key.clone()), Arc::new(bulkhead)));
        let early = self.settings.lock().bring_up_to_date(key, &new.as_ref().expect("made").1, version);' &&
        mutate src/keyed/map.rs '            let listeners = self.settings.lock().bring_up_to_date(&key, &bulkhead, version);' '            let listeners = early;' ;;
    keyed_owned_async_skips_total)
        mutate src/keyed/future.rs '                    Ok(key) => match total.take() {' '                    Ok(key) => match total.take().filter(|_| false) {' ;;
    adaptive_releases_before_recording)
        mutate src/bulkhead/mod.rs '            hook.finished(self, mark);
            core::mem::forget(guard);
        }
        self.sem.release_many(permits);' '            core::mem::forget(guard);
        }
        self.sem.release_many(permits);
        if let Some(hook) = self.hook.get() {
            hook.finished(self, mark);
        }' ;;
    inline_counted_grant_skips_count)
        mutate src/bulkhead/mod.rs '                    bump_own(&cells.permitted);
                    return Mark::COUNTED;' '                    return Mark::COUNTED;' ;;
    adaptive_algorithm_panic_escapes)
        mutate src/adaptive/mod.rs '        match std::panic::catch_unwind(AssertUnwindSafe(|| algorithm.update(sample, limits))) {' '        match Ok::<usize, ()>(algorithm.update(sample, limits)) {' ;;
    withdraw_skips_weighted_drain)
        mutate src/engine/state.rs '                (None, was_next && queue.live > 0)' '                (None, false)' ;;
    dropped_weighted_returns_one)
        mutate src/bulkhead/future.rs '            bulkhead.sem().release_many(permits);' '            bulkhead.sem().release_many(1);' ;;
    release_serves_one_waiter)
        mutate src/engine/state.rs '            return self.drain_and_wake(self.queue.lock(), &mut wakes);' '            return;' ;;
    drain_grants_on_any_free_permit)
        mutate src/engine/state.rs 'if word.available() < required {' 'if word.available() < 1 {' ;;
    drain_grants_head_one_permit)
        mutate src/engine/state.rs '                word.0.wrapping_sub(permits(need)),' '                word.0.wrapping_sub(permits(1)),' ;;
    try_acquire_many_barges)
        mutate src/engine/state.rs 'self.0 & (WAITERS | CLOSED) == 0 && (self.0 as i64) >= permits(n) as i64' 'self.0 & CLOSED == 0 && (self.0 as i64) >= permits(n) as i64' ;;
    shrink_skips_drain)
        mutate src/engine/state.rs 'new.has_waiters() && (new.available() > 0 || new.limit() < word.limit())' 'new.has_waiters() && new.available() > 0' ;;
    drain_never_refuses_above_limit)
        mutate src/engine/state.rs '        if word.is_closed() || queue.max_required <= word.limit() as i64 {' '        if true {' ;;
    timed_out_weighted_owes_no_drain)
        mutate src/engine/state.rs '        if expired {
            self.drain_and_wake(queue, &mut WakeList::default());' '        if false {
            self.drain_and_wake(queue, &mut WakeList::default());' ;;
    evicted_waiter_not_woken)
        mutate src/engine/state.rs '        Some(self.end(last, SlotState::Evicted))' '        drop(self.end(last, SlotState::Evicted));
        Some(None)' ;;
    sheddable_fast_path_ignores_headroom)
        mutate src/engine/state.rs '            self.headroom.load(Ordering::Relaxed) as i64
        } else {' '            0 * self.headroom.load(Ordering::Relaxed) as i64
        } else {' ;;
    queue_ignores_headroom)
        mutate src/engine/state.rs '        let headroom = if sheddable { self.headroom } else { 0 };' '        let headroom = if sheddable { 0 } else { 0 };' ;;
    classes_served_lowest_first)
        mutate src/engine/state.rs '        self.occupied.trailing_zeros() as usize' '        7 - self.occupied.leading_zeros() as usize' ;;
    owed_drain_wakes_under_lock)
        mutate src/engine/state.rs '        if expired {
            self.drain_and_wake(queue, &mut WakeList::default());
        } else {
            drop(queue);
        }' '        if expired {
            let mut queue = queue;
            let mut wakes = WakeList::default();
            while self.drain(&mut queue, &mut wakes) {
                wakes.wake_all();
            }
            wakes.wake_all();
            drop(queue);
        } else {
            drop(queue);
        }' ;;
    # issue 29 (work conservation and foreign panics)
    unfit_ignores_headroom)
        mutate src/engine/state.rs '            Err(word) if word.cannot_fit(required) => {' '            Err(word) if word.cannot_fit(i64::from(need)) => {' &&
        mutate src/engine/state.rs '&& !prev.cannot_fit(queue.max_required) {' '&& !prev.cannot_fit(i64::from(need)) {' &&
        mutate src/engine/state.rs '                if word.is_some_and(|word| word.cannot_fit(required)) {' '                if word.is_some_and(|word| word.cannot_fit(i64::from(slot.need))) {' ;;
    enqueue_misses_shrink_after_look)
        mutate src/engine/state.rs '        } else if prev.available() <= 0 && !prev.cannot_fit(queue.max_required) {' '        } else if prev.available() <= 0 {' ;;
    drain_completes_drainers_relaxed)
        mutate src/engine/state.rs '                let word = Word(self.state.load(Ordering::Acquire));' '                let word = Word(self.state.load(Ordering::Relaxed));' ;;
    waker_panic_escapes)
        mutate src/engine/foreign.rs '    if let Err(payload) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| waker.wake())) {
        contained(payload, "a waker'"'"'s wake");
    }' '    waker.wake();' ;;
    default_try_ignores_headroom)
        mutate src/engine/state.rs '        if word.holds_back(1) {
            self.try_acquire_first(1, Criticality::Default)' '        if false {
            self.try_acquire_first(1, Criticality::Default)' ;;
    wait_drained_zero_checks_after_queueing)
        mutate src/bulkhead/blocking.rs '        if timeout.is_zero() {
            // A wait of zero' '        if false {
            // A wait of zero' &&
        mutate src/bulkhead/blocking.rs '            let leave = WithdrawOnUnwind { bulkhead: self, key };' '            let leave = ();' ;;
    release_wakes_under_lock)
        mutate src/engine/state.rs '        drop(queue);
        wakes.wake_all_and_forget();
    }' '        wakes.wake_all_and_forget();
        drop(queue);
    }' ;;
    keyed_owned_async_total_takes_one)
        mutate src/keyed/future.rs '                                let acquire = AcquireOwned::many(total, request);' '                                let acquire = AcquireOwned::many(total, Request::permits(1));' ;;
    keyed_weighted_total_takes_one)
        mutate src/keyed/acquire.rs '        key_permit.with_total(self.total.as_deref().map(|total| acquire(total, request)))' '        key_permit.with_total(self.total.as_deref().map(|total| acquire(total, Request::permits(1))))' ;;
    adaptive_limit_applied_without_recheck)
        mutate src/adaptive/mod.rs '            if latest == limit {' '            if latest == limit || true {' ;;
    adaptive_fold_skips_recheck)
        mutate src/adaptive/mod.rs '            if !self.slots.wanted() && !self.pending_any.load(Ordering::Relaxed) {' '            if true || !self.slots.wanted() && !self.pending_any.load(Ordering::Relaxed) {' ;;
    newcomer_own_wake_called)
        mutate src/engine/state.rs '        self.wake.take()
    }

    fn wake_all(&mut self) {' '        None
    }

    fn wake_all(&mut self) {' ;;
    adaptive_pending_skips_recheck)
        mutate src/adaptive/mod.rs '            if !self.slots.wanted() && !self.pending_any.load(Ordering::Relaxed) {' '            if !self.slots.wanted() {' ;;
    adaptive_fold_skips_samples_pushed_during_drain)
        mutate src/adaptive/fold.rs '        self.head.store(tail, Ordering::Release);' '        self.head.store(self.tail.load(Ordering::Acquire), Ordering::Release);' ;;
    adaptive_push_tail_relaxed)
        mutate src/adaptive/fold.rs '        self.tail.store(tail.wrapping_add(1), Ordering::Release);' '        self.tail.store(tail.wrapping_add(1), Ordering::Relaxed);' ;;
    # issue 29 (tests/junctions.rs): the timer, set_limit, the policy names, the full ring
    own_timer_goes_to_process)
        mutate src/engine/timer.rs '    if let Some(own) = binding {' '    if let Some(own) = binding.as_ref().filter(|_| false) {' ;;
    async_wait_ignores_per_call_max_wait)
        mutate src/bulkhead/future.rs '        let wait = wait_within(self.wait, bulkhead.max_wait());' '        let wait = wait_within(None, bulkhead.max_wait());' ;;
    adaptive_target_not_strict)
        mutate src/engine/state.rs 'since < now && clock.between(since, now) > target' 'since < now && clock.between(since, now) >= target' ;;
    finished_wait_keeps_slot)
        mutate src/engine/state.rs '        let wake = self.free(key);
        debug_assert!(wake.is_none(), "a finished slot keeps no wake");' '        let wake: Option<Wake> = None;
        debug_assert!(wake.is_none(), "a finished slot keeps no wake");' ;;
    shares_named_future_ignores_share)
        mutate src/keyed/future.rs '                                        Some(g) => share::at_total(g, &permit.key, request),' '                                        Some(_) => request,' ;;
    keyed_future_drop_at_total_skips_cancel)
        mutate src/keyed/future.rs '                Stage::Total { total, .. } => this.core.cancel(total),' '                Stage::Total { .. } => {}' ;;
    own_timer_callback_under_lock)
        mutate src/engine/timer.rs '        let earliest = self.heap.lock().push(at, list);
        if earliest {' '        let mut heap = self.heap.lock();
        let earliest = heap.push(at, list);
        if earliest {' ;;
    timer_schedule_wakes_for_later_deadline)
        mutate src/engine/timer.rs '|Reverse(top)| at < top.at)' '|Reverse(top)| at > top.at)' ;;
    timer_rearm_skips_timed_waiters)
        mutate src/engine/state.rs 'while index != NIL && self.timed > 0 {' 'while index != NIL && self.timed == 0 {' ;;
    unlink_restores_order_with_timed_left)
        mutate src/engine/state.rs '                if self.timed == 0 {
                    self.ordered = true;' '                if self.timed != 0 {
                    self.ordered = true;' ;;
    shrink_with_waiters_skips_drain)
        mutate src/engine/state.rs 'new.has_waiters() && (new.available() > 0 || new.limit() < word.limit())' 'new.has_waiters() && (new.available() > 0 || new.limit() > word.limit())' ;;
    queue_order_display_empty)
        mutate src/engine/policy.rs '        match self {
            QueueOrder::AdaptiveLifo { target, interval } => {
                write!(f, "adaptive-lifo (target {target:?}, interval {interval:?})")
            }
            other => f.write_str(other.label()),
        }' '        let _ = f;
        Ok(())' ;;
    criticality_label_wrong)
        mutate src/engine/policy.rs '        match self {
            Criticality::Critical => "critical",
            Criticality::Default => "default",
            Criticality::Sheddable => "sheddable",
        }' '        let _ = self;
        "xyzzy"' ;;
    pop_expired_stops_at_untimed)
        mutate src/engine/state.rs '                    Some(_) if self.ordered => break,
                    _ => {}' '                    Some(_) if self.ordered => break,
                    _ => break,' ;;
    earliest_deadline_stops_at_untimed)
        mutate src/engine/state.rs '                    if self.ordered {
                        break;
                    }
                }
                index = slot.next;' '                    if self.ordered {
                        break;
                    }
                } else {
                    break;
                }
                index = slot.next;' ;;
    adaptive_full_ring_overwrites)
        mutate src/adaptive/fold.rs 'if tail.wrapping_sub(head) >= RING {' 'if tail.wrapping_sub(head) > RING {' ;;
    adaptive_full_ring_drop_uncounted)
        mutate src/adaptive/mod.rs '        if slot.push(word).is_none() {
            slot.drop_one();
        }' '        let _ = slot.push(word);' ;;
    shares_owner_not_critical)
        mutate src/keyed/share.rs '        Criticality::Critical
    } else if asked == Criticality::Critical {' '        asked
    } else if asked == Criticality::Critical {' ;;
    shares_borrower_keeps_critical)
        mutate src/keyed/share.rs '    } else if asked == Criticality::Critical {
        Criticality::Default' '    } else if asked == Criticality::Critical {
        Criticality::Critical' ;;
    shares_owned_future_ignores_share)
        mutate src/keyed/future.rs 'Some(g) => share::at_total(g, key.bulkhead(), *request),' 'Some(_) => *request,' ;;
    shares_default_ignored)
        mutate src/keyed/share.rs 'self.keys.get(key).copied().unwrap_or(self.default)' 'self.keys.get(key).copied().unwrap_or(0)' ;;
    shares_refusal_keeps_key_slot)
        mutate src/keyed/share.rs '            total.try_acquire_many(self.share_request(key, &key_permit.key, Request::default()))
        });
        key_permit.with_total(total)
    }' '            total.try_acquire_many(self.share_request(key, &key_permit.key, Request::default()))
        });
        match total {
            Some(Err(refused)) => {
                core::mem::forget(key_permit);
                Err(refused)
            }
            total => key_permit.with_total(total),
        }
    }' ;;
    *)
        echo "unknown mutant $1" >&2
        return 1 ;;
    esac
}

# ---------------------------------------------------------------------------------------
# Suites. Each prints one word: pass, caught, hang, or build-error.
# ---------------------------------------------------------------------------------------
integration_tests() {
    local t
    for t in "$WORK"/tests/*.rs; do
        printf -- '--test %s ' "$(basename "$t" .rs)"
    done
}

suite_command() {
    case $1 in
    loom)
        echo "env CARGO_TARGET_DIR=$LOOM_TARGET RUSTFLAGS='--cfg bulkhead_loom -C debug-assertions' LOOM_MAX_PREEMPTIONS=$PREEMPTIONS cargo test --release --test loom $FILTER" ;;
    shuttle)
        echo "env CARGO_TARGET_DIR=$SHUTTLE_TARGET RUSTFLAGS='--cfg bulkhead_shuttle' SHUTTLE_ITERATIONS=$SHUTTLE_N cargo test --release --test shuttle $FILTER" ;;
    model)
        echo "env CARGO_TARGET_DIR=$PLAIN_TARGET RUSTFLAGS= cargo test --test reference_model" ;;
    tests)
        echo "env CARGO_TARGET_DIR=$PLAIN_TARGET RUSTFLAGS= cargo test --features tokio --lib $(integration_tests)" ;;
    esac
}

run_suite() { # run_suite SUITE LOG
    local cmd status
    cmd=$(suite_command "$1")
    if ! (cd "$WORK" && eval "$cmd --no-run") >"$2" 2>&1; then
        echo build-error
        return
    fi
    set +e
    (cd "$WORK" && eval "timeout -k 10 $SUITE_TIMEOUT $cmd") >>"$2" 2>&1
    status=$?
    set -e
    case $status in
    0) echo pass ;;
    124 | 137) echo hang ;;
    *) echo caught ;;
    esac
}

# What failed, for the details: failing test names, proptest's minimal input, loom/shuttle
# messages.
summarize_log() {
    {
        sed -n '/^failures:$/,/^test result/p' "$1" | grep -E '^    [a-z_:]+$' | sed 's/^ */failed: /' | sort -u | head -3
        grep -m1 -E 'minimal failing (input|sequence)' "$1" | cut -c1-400
        grep -m1 -E "^thread '[a-z_:]+' .*panicked" "$1" | cut -c1-160
        grep -m2 -E 'saw stale data|holders inside|deadlock|FIFO broken|waiters queued|permit .* lost|permits not all back|a permit was created|waiters stranded' "$1" | cut -c1-200
    } | sed 's/^/      /' || true
}

# ---------------------------------------------------------------------------------------
echo "scratch copy: $SCRATCH; logs: $LOG_DIR"
echo "suites: $SUITES (loom preemptions $PREEMPTIONS, shuttle iterations $SHUTTLE_N)"

if [ -n "${MUTANTS_DRY_RUN:-}" ]; then
    # Only check that every mutant still applies to the current engine.
    for mutant in ${MUTANTS_ONLY:-${MUTANTS[*]}}; do
        fresh_copy
        apply "$mutant"
        printf '%-40s applies: %s\n' "$mutant" "$(cd "$WORK" && diff -ru "$PRISTINE/src" src | grep -c '^[-+] ') changed lines"
    done
    exit 0
fi

echo "== baseline (no mutant)"
fresh_copy
for suite in $SUITES; do
    start=$SECONDS
    result=$(run_suite "$suite" "$LOG_DIR/baseline.$suite.log")
    echo "   $suite: $result ($((SECONDS - start)) s)"
    if [ "$result" != pass ]; then
        echo "baseline $suite did not pass; see $LOG_DIR/baseline.$suite.log" >&2
        exit 2
    fi
done

declare -A RESULT
selected=${MUTANTS_ONLY:-${MUTANTS[*]}}
failures=0
for mutant in $selected; do
    echo "== $mutant: $(describe "$mutant")"
    fresh_copy
    if ! apply "$mutant"; then
        echo "   could not apply $mutant" >&2
        exit 2
    fi
    (cd "$WORK" && diff -ru "$PRISTINE/src" src >"$LOG_DIR/$mutant.diff" || true)
    caught_by=""
    for suite in $SUITES; do
        start=$SECONDS
        result=$(run_suite "$suite" "$LOG_DIR/$mutant.$suite.log")
        RESULT[$mutant.$suite]=$result
        echo "   $suite: $result ($((SECONDS - start)) s)"
        if [ "$result" = build-error ]; then
            echo "   the mutant does not build; see $LOG_DIR/$mutant.$suite.log" >&2
            exit 2
        fi
        if [ "$result" != pass ]; then
            caught_by="$caught_by $suite"
            summarize_log "$LOG_DIR/$mutant.$suite.log"
        fi
    done
    if [ -z "$caught_by" ]; then
        echo "   MISSED by every suite"
        failures=$((failures + 1))
    elif [[ $ORDERING_MUTANTS == *" $mutant "* ]] && [[ " $SUITES " == *" loom "* ]] &&
        [ "${RESULT[$mutant.loom]}" = pass ]; then
        echo "   ordering mutant NOT caught by loom"
        failures=$((failures + 1))
    fi
done

echo
printf '%-40s' "mutant"
for suite in $SUITES; do printf '%-9s' "$suite"; done
echo
for mutant in $selected; do
    printf '%-40s' "$mutant"
    for suite in $SUITES; do
        case ${RESULT[$mutant.$suite]} in
        pass) printf '%-9s' "-" ;;
        *) printf '%-9s' "${RESULT[$mutant.$suite]}" ;;
        esac
    done
    echo
done
echo
if [ "$failures" -ne 0 ]; then
    echo "$failures mutant(s) escaped (see above)"
    exit 1
fi
echo "every mutant was caught; every ordering mutant by loom"

#!/usr/bin/env bash
# make test-model: the Spin models of the publication protocol
# (tests/model/timehands.pml, in local mode), of the coarse block
# (tests/model/coarse.pml) and of records tied to the kernel's updates
# (tests/model/tie.pml), eight exhaustive checks:
#   local:safety   the assertions (no torn record, results within EPS of the
#                  kernel) with ltl safety (monotonic across reads, and
#                  bounded_retries: a read retries at most 2 x (commits made
#                  while it runs) + PASSES times); reader 0 reads twice and is
#                  the only one that winds up (WINDERS=1), reader 1 reads once;
#                  readers take the counter before `cur` (-DEARLY_COUNTER;
#                  the code takes it right after `cur`, before the copy, where
#                  the process may read the counter, and the hardware may take
#                  it earlier), so that any commits may come between a
#                  reader's counter and its record
#                  (1.7e8 states, ~350 s, 10 GB; with the counter after the
#                  copy 6.4e7 states, ~150-200 s);
#   stall:safety   the same claims with reader 1 the only winder (WFIRST=1
#                  WINDERS=2): reader 0 can be stalled anywhere in its two
#                  reads while records are committed under it (the world in
#                  which a reader took a rewritten slot for the current one);
#                  the counter after the copy (a process that may not read it
#                  first; with -DEARLY_COUNTER this world exceeds 2.7e8 states
#                  and 600 s);
#   small:progress every read completes under weak fairness, with a winder
#                  that may die at any step (MAXT=3, one windup, one read
#                  each); each read takes the counter first or after the copy
#                  (-DCOUNTER_EITHER; so do prompt and daemon, although the
#                  code reads the page with the counter after the copy: the
#                  switch floors, not modelled, need it; 3.1e7 states,
#                  ~140 s);
#   prompt:safety, prompt:progress  the daemon world (-DDAEMON: page
#                  readers never announce, serve phi of the page record and
#                  read again when the page's word moved during their kernel
#                  read) with a daemon never preempted inside a windup
#                  (-DDAEMON_PROMPT): one reader reading twice, stalled
#                  anywhere across the daemon's windups (1.3e6 states, ~10 s;
#                  progress with a daemon that may die, 1.5e7, ~60 s);
#                  neither leave_shared nor the switch floors are modelled;
#   daemon:safety  the daemon world with a daemon preempted anywhere, also
#                  between its sample and its commit: page readers serve
#                  kernel readings LAG behind the kernel (th_phi_page), so
#                  that a line committed late never returns less than what
#                  they served (8.8e7 states, ~150 s; with the counter
#                  always after the copy 2.9e7 states, whose progress claim
#                  holds too, 1.2e8 states, ~550 s, not run here);
#   coarse:safety  the coarse block's assertions (no torn copy; a fast read
#                  returns the values of the record `cur` named, fresh; coarse
#                  readings never step back, fast or slow path, also with the
#                  floor a fine reading raised): one reader reading twice, two
#                  commits by writers that may stop for good at any step, up
#                  to two of them (the next one carries on, as a fork child's
#                  writer does; 1.6e7 states, ~20 s, 1.2 GB). Two readers
#                  reading once each exceed 1e8 states and are not run; the
#                  readers share only the coarse floor, which only grows.
#   tie:safety     REALTIME offsets of records tied to the kernel's updates
#                  (record.h th_rec_tie): a kernel that makes three updates,
#                  each a step either way or none; a writer making three
#                  windups or reties (the cut after the count, the exact
#                  re-read of timehandsd's page tie, the retie's cut across
#                  more than one update); one reader reading twice, its
#                  counter before or after the record's word, fast or slow
#                  path (the count re-checked after its counter): every
#                  offset served is the one in force at the reading's counter
#                  (6.2e7 states, ~45 s, 3 GB). MODEL_DEFINES=-DBREAK_NO_CUT,
#                  -DBREAK_RETIE_NO_CUT, -DBREAK_UNTIE, -DBREAK_NO_RECHECK
#                  each fail it (top of the model).
# Common bounds: RING=2 (every commit wraps: a reader stalled across one
# commit sees its slot rewritten), MAXT=4 ticks, at most NWINDUPS=2 windups in
# all; install_line makes ATTEMPTS=1 attempt; th_snapshot makes TRIES=1
# attempt per round (with th_snapshot_progress around it a failed attempt is
# retried whenever `cur` moved, which a failed attempt implies, so more tries
# per round add no behaviour of interest). Bounded writer commits also bound
# every retry loop. Readers that do not wind up find the lock held, as if by a
# thread not modelled.
#
# Approximated:
#   -DFIX_PASS_RETRY  th__fine_slow's pass loop is not limited to PASSES.
#       The code (since "Fine slow path: past four passes, keep going while
#       records change") stops after PASSES passes only when no commit
#       happened during the last one, and then serves phi of the current
#       record; in the model a failed pass always follows a commit, so the
#       two agree. WITHOUT the define (the code before that change) the
#       model violates monotonic: phi of a superseded snapshot, served
#       without announcing, undercuts a line committed meanwhile that lags
#       the kernel.
#   The daemon world's progress claim (MODEL_CHECKS=daemon:progress) is not
#       run by default (550 s); with -DBREAK_PAGE_NO_LAG (page readers serve
#       phi of the kernel, the code before th_phi_page) daemon:safety fails:
#       a reader of the TRANSIT record reads the kernel after the daemon's
#       sample, serves it, and the line committed then lags the kernel.
#
# Each check is an exhaustive search (collapse compression) unless
# MODEL_BITSTATE=N asks for a supertrace search with 2^N bits. A violation
# prints the replayed trail (records committed, results returned) and fails
# the tier; pan's full output stays in build-model/.
#
#   MODEL_DEFINES="-DBREAK_ANY_GEN" make test-model   a deliberately broken
#       variant (the BREAK_* list is at the top of the model and in
#       doc/mutations.md); it must fail
#   MODEL_CHECKS="stall:safety" make test-model      chosen world:claim pairs
#   MODEL_WORLDS="local daemon" make test-model      both claims in each world
#   MODEL_TIMEOUT=900                                seconds per check
set -euo pipefail
. "$(dirname "$0")/common.sh"
cd "$TH_ROOT"
need spin gcc

model=$TH_ROOT/tests/model/timehands.pml
dir=${TH_TIER_PREFIX}model
mkdir -p "$dir"
t0=$(now_s)

# world name -> Spin defines (see the top of the model)
declare -A WORLD=(
	[local]="-DRING=2 -DMAXT=4 -DNWINDUPS=2 -DATTEMPTS=1 -DTRIES=1 -DWINDERS=1 -DFIX_PASS_RETRY -DEARLY_COUNTER"
	[stall]="-DRING=2 -DMAXT=4 -DNWINDUPS=2 -DATTEMPTS=1 -DTRIES=1 -DWFIRST=1 -DWINDERS=2 -DFIX_PASS_RETRY"
	[small]="-DRING=2 -DMAXT=3 -DNWINDUPS=1 -DATTEMPTS=1 -DTRIES=1 -DWINDERS=1 -DNREADS=1 -DFIX_PASS_RETRY -DCOUNTER_EITHER"
	[daemon]="-DDAEMON -DRING=2 -DMAXT=4 -DNR=1 -DNREADS=2 -DNWINDUPS=2 -DATTEMPTS=1 -DTRIES=1 -DFIX_PASS_RETRY -DCOUNTER_EITHER"
	[coarse]="-DNR=1 -DNREADS=2 -DNWINDUPS=2 -DDEATHS=2"
	[tie]="-DNR=1 -DNREADS=2"
	[prompt]="-DDAEMON -DDAEMON_PROMPT -DRING=2 -DMAXT=4 -DNR=1 -DNREADS=2 -DNWINDUPS=2 -DATTEMPTS=1 -DTRIES=1 -DFIX_PASS_RETRY -DCOUNTER_EITHER"
)
# the model file of each world that is not timehands.pml's; its claim
# `safety` is its assertions (it has no ltl formula)
declare -A MODEL_OF=([coarse]=coarse.pml [tie]=tie.pml)
# world:claim pairs; MODEL_WORLDS="w ..." checks both claims in each world
if [ -n "${MODEL_WORLDS:-}" ]; then
	checks=""
	for w in $MODEL_WORLDS; do checks="$checks $w:safety $w:progress"; done
else
	checks=${MODEL_CHECKS:-"local:safety stall:safety small:progress prompt:safety prompt:progress daemon:safety coarse:safety tie:safety"}
fi
extra=${MODEL_DEFINES:-}
timeout_s=${MODEL_TIMEOUT:-600}

# check WORLD CLAIM [more spin defines]
check() {
	local world=$1 claim=$2
	shift 2
	local defs="${WORLD[$world]} $extra $*"
	local work="$dir/$world-$claim"
	local file=${MODEL_OF[$world]:-timehands.pml}
	rm -rf "$work"
	mkdir -p "$work"
	cp "$(dirname "$model")/$file" "$work/"
	local pan_cc=(-O2 -DCOLLAPSE -DVECTORSZ=2048) pan_run=(-m1000000 -N "$claim") hash=-w27
	if [ -n "${MODEL_BITSTATE:-}" ]; then
		pan_cc=(-O2 -DBITSTATE -DVECTORSZ=2048)
		hash=-w$MODEL_BITSTATE
	fi
	if [ "$file" != timehands.pml ]; then
		[ "$claim" = safety ] || die "$world: only the claim safety (its assertions)"
		pan_cc+=(-DSAFETY)
		pan_run=(-m1000000)
	fi
	if [ "$claim" = progress ]; then
		pan_cc+=(-DNFAIR=3)
		pan_run+=(-a -f)
	fi
	local t1
	t1=$(now_s)
	# shellcheck disable=SC2086 # defines are words
	(cd "$work" && spin -a $defs "$file" >spin.log 2>&1 && gcc "${pan_cc[@]}" -o pan pan.c >>spin.log 2>&1) || {
		cat "$work/spin.log"
		die "$world/$claim: model does not compile"
	}
	local rc=0
	(cd "$work" && timeout "$timeout_s" ./pan "${pan_run[@]}" "$hash" >pan.log 2>&1) || rc=$?
	local states errors
	states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' "$work/pan.log" | head -n 1)
	errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$work/pan.log" | head -n 1)
	if [ $rc -eq 124 ]; then
		tier_log "$world/$claim: no verdict within ${timeout_s} s (MODEL_TIMEOUT)"
		return 1
	fi
	if [ "${errors:-1}" != 0 ]; then
		tier_log "$world/$claim: VIOLATION ($(grep -m1 -E 'violated|acceptance cycle|error' "$work/pan.log" || true))"
		tier_log "trail ($work/$file.trail), records committed and results returned:"
		# shellcheck disable=SC2086
		(cd "$work" && spin -t $defs "$file" 2>&1 | grep -E 'commit|returns|path|kernel_|exact|dies|stops|fast|slow|fine' |
			sed 's/^ */    /') || true
		return 1
	fi
	tier_log "$world/$claim: holds ($states states, $(($(now_s) - t1)) s)"
}

bad=0
for c in $checks; do
	w=${c%%:*} claim=${c#*:}
	[ -n "${WORLD[$w]:-}" ] || die "unknown world '$w' (${!WORLD[*]})"
	case $claim in
	safety) check "$w" safety || bad=1 ;;
	progress) check "$w" progress -DDEATH || bad=1 ;;
	*) die "unknown claim '$claim' (safety, progress)" ;;
	esac
done
[ $bad -eq 0 ] || die "the model found violations (see above; spin -t -p replays a trail step by step)"
tier_log "passed in $(($(now_s) - t0)) s"

#!/bin/sh
# A real database server and its benchmark client, plain and under
# `timehands run` (server and client both), interleaved round by round;
# medians of the throughput. A benchmark, not a test.
#
#   preload/bench/db.sh redis   BUILD_DIR [ROUNDS]   redis-server + redis-benchmark
#   preload/bench/db.sh pgbench BUILD_DIR [ROUNDS]   PostgreSQL + pgbench (run as root:
#                                                    the server runs as user postgres)
#   preload/bench/db.sh calls BUILD_DIR              clock reads per request of both
#   preload/bench/db.sh pg_test_timing BUILD_DIR     PostgreSQL's own clock-cost probe
#
# Variants: libc (no preload), timehands (full guarantees), relaxed
# (timehands run --relaxed). Every round starts fresh servers, so attach and
# fork of the server's workers are exercised each time.
set -eu
what=${1:?usage: db.sh redis|pgbench|calls|pg_test_timing BUILD_DIR [ROUNDS]}
BUILD=${2:-build}
ROUNDS=${3:-5}
WINDOW=${WINDOW:-5}
TX_TPCB=${TX_TPCB:-1500}     # pgbench transactions per client (4 clients)
TX_SELECT=${TX_SELECT:-10000}
HZ=$(getconf CLK_TCK)
VARIANTS="libc timehands relaxed"
TH=$(cd "$BUILD" && pwd)/tools/timehands
[ -x "$TH" ] || { echo "build first: $TH" >&2; exit 1; }
W=$(mktemp -d /tmp/th-db.XXXXXX)
chmod 755 "$W"
cleanup() {
	[ -f "$W/redis.server.pid" ] && kill "$(cat "$W/redis.server.pid")" 2>/dev/null
	[ -d "$W/pg" ] && runuser -u postgres -- "$PGBIN/pg_ctl" -D "$W/pg" -m immediate stop >/dev/null 2>&1
	rm -rf "$W"
}
trap cleanup EXIT
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)

# prefix of a command for a variant
wrap() {
	case $1 in
	libc) echo "env" ;;
	timehands) echo "$TH run" ;;
	relaxed) echo "$TH run --relaxed" ;;
	esac
}

med() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# "min..max" of the rounds
range() { sort -g | awk 'NR==1 {lo=$1} {hi=$1} END {printf "%.0f..%.0f", lo, hi}'; }


context() {
	echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "machine: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) CPUs," \
		"clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)," \
		"Linux $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
}

# CPU time of a process, all its threads, in ns (the scheduler's own
# accounting: not sampled, not rounded to ticks).
cpu_ns() {
	cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%.0f\n", s}'
}

redis_cmds() { # port
	redis-cli -p "$1" info stats | sed -n 's/^total_commands_processed:\([0-9]*\).*/\1/p'
}

# One round of one variant: a fresh server and its client, both under the
# variant; per command type a WINDOW-second window after a second of warm-up:
# commands per second (throughput, as noisy as the machine) and the CPU time
# the server and the client spent per command (what the clocks cost shows
# there, whatever else the machine runs).
redis_round() { # variant
	port=$((20000 + $$ % 10000))
	# shellcheck disable=SC2046
	$(wrap "$1") redis-server --port "$port" --save "" --appendonly no --daemonize no \
		--logfile "$W/redis.log" >/dev/null 2>&1 &
	spid=$!
	echo $spid >"$W/redis.server.pid"
	n=0
	until redis-cli -p "$port" ping >/dev/null 2>&1; do
		n=$((n + 1))
		[ $n -lt 100 ] || { echo "redis-server did not start" >&2; cat "$W/redis.log" >&2; exit 1; }
		sleep 0.05
	done
	check_loaded "$spid" "$1"
	for t in set get incr; do
		# shellcheck disable=SC2046
		$(wrap "$1") redis-benchmark -p "$port" -t $t -n 1000000000 -c 50 -q >/dev/null 2>"$W/err" &
		cpid=$!
		sleep 1
		c0=$(redis_cmds "$port") s0=$(cpu_ns $spid) k0=$(cpu_ns $cpid)
		sleep "$WINDOW"
		c1=$(redis_cmds "$port") s1=$(cpu_ns $spid) k1=$(cpu_ns $cpid)
		kill $cpid 2>/dev/null
		wait $cpid 2>/dev/null || true
		grep -i error "$W/err" >&2 || true
		T=$(echo $t | tr a-z A-Z)
		echo "$c0 $c1 $s0 $s1 $k0 $k1" | awk -v w="$WINDOW" -v f="$W/$1" -v t="$T" '{
			n = $2 - $1
			printf "%.0f\n", n / w >> (f "." t)
			printf "%.1f\n", ($4 - $3) / n >> (f ".server." t)
			printf "%.1f\n", ($6 - $5) / n >> (f ".client." t)
		}'
	done
	kill $spid
	wait $spid 2>/dev/null || true
	rm -f "$W/redis.server.pid"
	if grep -i error "$W/redis.log" >&2; then echo "errors in the redis log ($1)" >&2; fi
	return 0
}

# The server really runs with (or without) the preload.
check_loaded() { # pid variant
	if grep -q libtimehands-preload "/proc/$1/maps"; then
		[ "$2" != libc ] || { echo "preload loaded in the plain server" >&2; exit 1; }
	else
		[ "$2" = libc ] || { echo "preload not loaded in the server" >&2; exit 1; }
	fi
}

pg_start() { # variant
	runuser -u postgres -- $(wrap "$1") "$PGBIN/pg_ctl" -D "$W/pg" -l "$W/pg.log" -w \
		-o "-k $W -p 55432 -c listen_addresses=''" start >/dev/null
	check_loaded "$(head -1 "$W/pg/postmaster.pid")" "$1"
}

pg_stop() {
	runuser -u postgres -- "$PGBIN/pg_ctl" -D "$W/pg" -m fast -w stop >/dev/null
}

# CPU ticks of a PostgreSQL cluster: every live process of it, plus what the
# postmaster has collected from the backends that exited.
cluster_ticks() { # postmaster pid
	{
		sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13 + $14 + $15}'
		for c in $(ps -o pid= --ppid "$1"); do
			sed 's/.*) //' "/proc/$c/stat" 2>/dev/null | awk '{print $12 + $13}'
		done
	} | awk '{s += $1} END {print s}'
}

# One round of one variant: a server under the variant, pgbench (same
# variant) with a fixed number of transactions per client; transactions per
# second (noisy) and the server's CPU time per transaction.
pgbench_round() { # variant
	pg_start "$1"
	pm=$(head -1 "$W/pg/postmaster.pid")
	for mode in tpcb select; do
		flag= n=$TX_TPCB
		[ $mode = select ] && flag=-S n=$TX_SELECT
		c0=$(cluster_ticks "$pm")
		# shellcheck disable=SC2046
		runuser -u postgres -- $(wrap "$1") "$PGBIN/pgbench" -h "$W" -p 55432 -c 4 -j 2 -t "$n" $flag \
			-n bench >"$W/out" 2>"$W/err"
		sleep 0.3 # the postmaster reaps its backends
		c1=$(cluster_ticks "$pm")
		grep -i -E 'error|fatal' "$W/err" >&2 || true
		tx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$W/out")
		sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$W/out" >>"$W/$1.$mode"
		echo "$c0 $c1 $tx $HZ" | awk '{printf "%.0f\n", ($2 - $1) * 1e9 / $4 / $3}' >>"$W/$1.server.$mode"
	done
	pg_stop
}

# table UNIT TEST...: medians, ratios to libc, and the range of the rounds
table() {
	unit=$1
	shift
	printf '%-14s %10s %10s %10s %7s %7s   %s\n' "$unit" libc timehands relaxed ratio relaxed \
		"rounds min..max: libc / timehands / relaxed"
	for t in "$@"; do
		a=$(med <"$W/libc.$t") b=$(med <"$W/timehands.$t") c=$(med <"$W/relaxed.$t")
		rb=$(echo "$b $a" | awk '{printf "%.3f", $1/$2}') rc=$(echo "$c $a" | awk '{printf "%.3f", $1/$2}')
		printf '%-14s %10.0f %10.0f %10.0f %7.3f %7.3f   %s / %s / %s\n' "$t" "$a" "$b" "$c" "$rb" "$rc" \
			"$(range <"$W/libc.$t")" "$(range <"$W/timehands.$t")" "$(range <"$W/relaxed.$t")"
	done
}

case $what in
redis)
	command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null ||
		{ echo "needs redis-server and redis-benchmark (Debian: redis-server, redis-tools)" >&2; exit 1; }
	context
	echo "redis: $(redis-server --version | cut -d' ' -f3), redis-benchmark -c 50, server and client under" \
		"the variant, variants interleaved, ${WINDOW} s windows"
	r=0
	while [ $r -lt "$ROUNDS" ]; do
		for v in $VARIANTS; do redis_round $v; done
		r=$((r + 1))
	done
	table "req/s" SET GET INCR
	echo
	table "server ns/req" server.SET server.GET server.INCR
	echo
	table "client ns/req" client.SET client.GET client.INCR
	echo "(medians of $ROUNDS interleaved rounds; ratio: to libc)"
	;;
pgbench)
	[ -n "$PGBIN" ] && [ -x "$PGBIN/pgbench" ] || { echo "needs PostgreSQL (Debian: postgresql)" >&2; exit 1; }
	[ "$(id -u)" -eq 0 ] || { echo "run as root (the server runs as user postgres)" >&2; exit 1; }
	chown postgres "$W"
	runuser -u postgres -- "$PGBIN/initdb" -D "$W/pg" -A trust >/dev/null
	cat >>"$W/pg/postgresql.conf" <<-EOF
		fsync = off
		synchronous_commit = off
		full_page_writes = off
		shared_buffers = 256MB
		track_io_timing = on
	EOF
	pg_start libc
	runuser -u postgres -- "$PGBIN/createdb" -h "$W" -p 55432 bench
	runuser -u postgres -- "$PGBIN/pgbench" -h "$W" -p 55432 -i -s 10 -q bench >/dev/null 2>&1
	pg_stop
	context
	echo "PostgreSQL $("$PGBIN/postgres" --version | awk '{print $3}'), pgbench -s 10 -c 4 -j 2, -t $TX_TPCB" \
		"(tpcb: the default script) and -t $TX_SELECT -S (select), server and client under the variant," \
		"variants interleaved, fsync off"
	r=0
	while [ $r -lt "$ROUNDS" ]; do
		for v in $VARIANTS; do pgbench_round $v; done
		r=$((r + 1))
	done
	table "tps" tpcb select
	echo
	table "server ns/tx" server.tpcb server.select
	echo "(medians of $ROUNDS interleaved rounds; ratio: to libc)"
	if grep -i -E 'error|fatal|panic' "$W/pg.log" | grep -v -E 'database system is shut|terminating connection due to administrator'; then
		echo "errors in the server log (above)" >&2
	fi
	;;
calls)
	# How often the servers read the clocks: the counting build of the
	# preload appends each process's calls at exit.
	COUNT=$(cd "$BUILD" && pwd)/preload/libtimehands-preload-count.so
	[ -r "$COUNT" ] || { echo "build first: $COUNT" >&2; exit 1; }
	export TH_PRELOAD_COUNT_FILE=$W/calls
	context
	per() { # file requests: calls per request of every entry point, summed over the lines
		awk -v n="$2" '{for (i = 2; i <= NF; i++) {split($i, kv, "="); c[kv[1]] += kv[2]}}
			END {for (k in c) if (c[k]) printf " %s %.2f", k, c[k] / n; print ""}' "$1"
	}
	if command -v redis-server >/dev/null; then
		port=$((20000 + $$ % 10000))
		"$TH" run --preload "$COUNT" redis-server --port "$port" --save "" --appendonly no \
			--logfile "$W/redis.log" >/dev/null 2>&1 &
		spid=$!
		until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.05; done
		: >"$W/calls"
		for t in set get incr; do
			"$TH" run --preload "$COUNT" redis-benchmark -p "$port" -t $t -n 100000 -c 50 -q >/dev/null
		done
		kill $spid
		wait $spid 2>/dev/null || true
		grep "^$spid " "$W/calls" >"$W/server"
		grep -v "^$spid " "$W/calls" >"$W/client"
		echo "redis-server, per request (SET, GET, INCR):$(per "$W/server" 300000)"
		echo "redis-benchmark, per request:$(per "$W/client" 300000)"
	fi
	if [ -n "$PGBIN" ] && [ -x "$PGBIN/pgbench" ] && [ "$(id -u)" -eq 0 ]; then
		chown postgres "$W"
		runuser -u postgres -- "$PGBIN/initdb" -D "$W/pg" -A trust >/dev/null
		echo "fsync = off" >>"$W/pg/postgresql.conf"
		pg_start libc
		runuser -u postgres -- "$PGBIN/createdb" -h "$W" -p 55432 bench
		runuser -u postgres -- "$PGBIN/pgbench" -h "$W" -p 55432 -i -s 10 -q bench >/dev/null 2>&1
		pg_stop
		for mode in tpcb select; do
			flag=
			[ $mode = select ] && flag=-S
			runuser -u postgres -- env TH_PRELOAD_COUNT_FILE="$W/calls" "$TH" run --preload "$COUNT" \
				"$PGBIN/pg_ctl" -D "$W/pg" -l "$W/pg.log" -w -o "-k $W -p 55432 -c listen_addresses=''" \
				start >/dev/null
			: >"$W/calls"
			chmod 666 "$W/calls"
			runuser -u postgres -- "$PGBIN/pgbench" -h "$W" -p 55432 -c 4 -j 2 -t 2500 $flag -n bench >/dev/null
			sleep 0.3
			cp "$W/calls" "$W/backends"
			pg_stop
			echo "PostgreSQL backends, per transaction ($mode):$(per "$W/backends" 10000)"
		done
	fi
	;;
pg_test_timing)
	[ -x "$PGBIN/pg_test_timing" ] || { echo "needs PostgreSQL's pg_test_timing" >&2; exit 1; }
	context
	for v in libc timehands relaxed libc timehands relaxed; do
		# shellcheck disable=SC2046
		echo "$v: $($(wrap $v) "$PGBIN/pg_test_timing" -d 2 | sed -n 's/^Per loop time including overhead: //p')"
	done
	;;
*)
	echo "usage: db.sh redis|pgbench|calls|pg_test_timing BUILD_DIR [ROUNDS]" >&2
	exit 2
	;;
esac

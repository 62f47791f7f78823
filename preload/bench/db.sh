#!/bin/sh
# A real database server and its benchmark client, plain and under
# `timehands run` (server and client both), interleaved round by round;
# medians of the throughput. A benchmark, not a test.
#
#   preload/bench/db.sh redis   BUILD_DIR [ROUNDS]   redis-server + redis-benchmark
#   preload/bench/db.sh pgbench BUILD_DIR [ROUNDS]   PostgreSQL + pgbench (run as root:
#                                                    the server runs as user postgres)
#   preload/bench/db.sh pg_test_timing BUILD_DIR     PostgreSQL's own clock-cost probe
#
# Variants: libc (no preload), timehands (full guarantees), relaxed
# (timehands run --relaxed). Every round starts fresh servers, so attach and
# fork of the server's workers are exercised each time.
set -eu
what=${1:?usage: db.sh redis|pgbench|pg_test_timing BUILD_DIR [ROUNDS]}
BUILD=${2:-build}
ROUNDS=${3:-5}
TH=$(cd "$BUILD" && pwd)/tools/timehands
[ -x "$TH" ] || { echo "build first: $TH" >&2; exit 1; }
W=$(mktemp -d /tmp/th-db.XXXXXX)
chmod 755 "$W"
cleanup() {
	[ -f "$W/redis.pid" ] && kill "$(cat "$W/redis.pid")" 2>/dev/null
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

context() {
	echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "machine: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) CPUs," \
		"clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)," \
		"Linux $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
}

redis_round() { # variant
	port=$((20000 + $$ % 10000))
	# shellcheck disable=SC2046
	$(wrap "$1") redis-server --port "$port" --save "" --appendonly no --daemonize no \
		--pidfile "$W/redis.pid" --logfile "$W/redis.log" >/dev/null 2>&1 &
	spid=$!
	i=0
	until redis-cli -p "$port" ping >/dev/null 2>&1; do
		i=$((i + 1))
		[ $i -lt 100 ] || { echo "redis-server did not start" >&2; cat "$W/redis.log" >&2; exit 1; }
		sleep 0.05
	done
	check_loaded "$spid" "$1"
	# shellcheck disable=SC2046
	$(wrap "$1") redis-benchmark -p "$port" -t set,get,incr -n 100000 -c 50 --csv 2>"$W/err" |
		sed -n 's/^"\([A-Z_]*\)[^"]*","\([0-9.]*\)".*/\1 \2/p' >"$W/round"
	[ -s "$W/err" ] && grep -v '^$' "$W/err" >&2
	kill "$spid"
	wait "$spid" 2>/dev/null || true
	grep -qi error "$W/redis.log" && { echo "errors in the redis log:" >&2; cat "$W/redis.log" >&2; }
	while read -r t v; do echo "$v" >>"$W/$1.$t"; done <"$W/round"
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

pgbench_round() { # variant
	pg_start "$1"
	for mode in tpcb select; do
		flag=
		[ $mode = select ] && flag=-S
		# shellcheck disable=SC2046
		tps=$(runuser -u postgres -- $(wrap "$1") "$PGBIN/pgbench" -h "$W" -p 55432 -c 4 -j 2 -T 8 $flag \
			-n bench 2>"$W/err" | sed -n 's/^tps = \([0-9.]*\).*/\1/p')
		grep -i -E 'error|fatal' "$W/err" >&2 || true
		echo "$tps" >>"$W/$1.$mode"
	done
	pg_stop
}

case $what in
redis)
	command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null ||
		{ echo "needs redis-server and redis-benchmark (Debian: redis-server, redis-tools)" >&2; exit 1; }
	context
	echo "redis: $(redis-server --version | cut -d' ' -f3), redis-benchmark -t set,get,incr -c 50 -n 100000, server and client under the variant"
	r=0
	while [ $r -lt "$ROUNDS" ]; do
		for v in libc timehands relaxed; do redis_round $v; done
		r=$((r + 1))
	done
	printf '%-8s %12s %12s %12s %8s %8s\n' "req/s" libc timehands relaxed ratio relaxed
	for t in SET GET INCR; do
		a=$(med <"$W/libc.$t") b=$(med <"$W/timehands.$t") c=$(med <"$W/relaxed.$t")
		printf '%-8s %12s %12s %12s %8s %8s\n' "$t" "$a" "$b" "$c" \
			"$(echo "$b $a" | awk '{printf "%.3f", $1/$2}')" "$(echo "$c $a" | awk '{printf "%.3f", $1/$2}')"
	done
	echo "(medians of $ROUNDS interleaved rounds)"
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
	echo "PostgreSQL $("$PGBIN/postgres" --version | awk '{print $3}'), pgbench -s 10 -c 4 -j 2 -T 8 (tpcb: default script, select: -S), server and client under the variant, fsync off"
	r=0
	while [ $r -lt "$ROUNDS" ]; do
		for v in libc timehands relaxed; do pgbench_round $v; done
		r=$((r + 1))
	done
	printf '%-8s %12s %12s %12s %8s %8s\n' "tps" libc timehands relaxed ratio relaxed
	for t in tpcb select; do
		a=$(med <"$W/libc.$t") b=$(med <"$W/timehands.$t") c=$(med <"$W/relaxed.$t")
		printf '%-8s %12s %12s %12s %8s %8s\n' "$t" "$a" "$b" "$c" \
			"$(echo "$b $a" | awk '{printf "%.3f", $1/$2}')" "$(echo "$c $a" | awk '{printf "%.3f", $1/$2}')"
	done
	echo "(medians of $ROUNDS interleaved rounds)"
	if grep -i -E 'error|fatal|panic' "$W/pg.log" | grep -v -E 'database system is shut|terminating connection due to administrator'; then
		echo "errors in the server log (above)" >&2
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
	echo "usage: db.sh redis|pgbench|pg_test_timing BUILD_DIR [ROUNDS]" >&2
	exit 2
	;;
esac

#!/usr/bin/env bash
# The set-up `make test` and `make bench` do first: the Debian packages their
# tiers need (tests/packages.txt). As root they are installed; otherwise the
# missing ones are named, and the tests that need them report SKIP.
#
#   tests/tiers/setup.sh [--report] TIER...
#
# --report only names what is missing (after a test run, so the reason for
# each SKIP is on the last screen). Exits 0: a package that cannot be had
# turns into the SKIP of the tests that need it, never a failure.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
list=$here/../packages.txt
report=0
if [ "${1:-}" = --report ]; then
	report=1
	shift
fi
[ $# -gt 0 ] || set -- build test

# The packages of the named tiers, each once, in the list's order.
wanted=()
while read -r tier pkg _; do
	case $tier in '#'* | '') continue ;; esac
	for t in "$@"; do
		if [ "$t" = "$tier" ] && [[ " ${wanted[*]-} " != *" $pkg "* ]]; then
			wanted+=("$pkg")
		fi
	done
done <"$list"

if ! command -v dpkg-query >/dev/null 2>&1; then
	[ $report -eq 1 ] || echo "setup: not a Debian system: packages not checked (wanted: ${wanted[*]})"
	exit 0
fi
missing=()
for pkg in "${wanted[@]}"; do
	dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
[ ${#missing[@]} -gt 0 ] || exit 0

if [ $report -eq 0 ] && [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
	echo "setup: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	for try in 1 2 3; do
		log=$(mktemp)
		if apt-get -o Acquire::Retries=3 update -qq >"$log" 2>&1 &&
			apt-get -o Acquire::Retries=3 install -y -qq --no-install-recommends "${missing[@]}" >>"$log" 2>&1; then
			rm -f "$log"
			exit 0
		fi
		tail -n 5 "$log" >&2
		rm -f "$log"
		echo "setup: apt-get failed (try $try of 3)" >&2
		sleep $((try * 10))
	done
	echo "setup: could not install ${missing[*]}: the tests that need them report SKIP" >&2
	exit 0
fi
echo "setup: missing Debian packages: ${missing[*]}"
echo "setup: the tests that need them report SKIP; as root: apt-get install ${missing[*]}"
exit 0

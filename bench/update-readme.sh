#!/usr/bin/env bash
# Regenerate the benchmark results from bench/results/latest.json: the full
# report goes to doc/results-MACHINE.md next to README (one file per machine
# kind, e.g. amd-epyc-kvm-clock), and a short table linking to it replaces the
# text between <!-- bench:begin --> and <!-- bench:end --> in README.md;
# nothing else is touched. Without the markers the table is printed instead.
#
#   bench/update-readme.sh [JSON] [README]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
json=${1:-$here/results/latest.json}
readme=${2:-$here/../README.md}
if [ ! -f "$json" ]; then
	echo "update-readme.sh: no $json; run make bench first" >&2
	exit 1
fi
exec python3 "$here/report.py" readme "$json" "$readme"

#!/usr/bin/env bash
# Regenerate the README's benchmark results from bench/results/latest.json:
# the text between <!-- bench:begin --> and <!-- bench:end --> in README.md is
# replaced, nothing else is touched. Without the markers the section is
# printed on stdout instead.
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

#!/usr/bin/env bash
# `make test` step timer: tools/timed.sh LABEL command...
# Runs the command and appends "LABEL <seconds> <exit status>" to
# build/test-phases.txt, so setup steps (builds) and pytest are reported apart.
set -uo pipefail
label="$1"; shift
mkdir -p build
start=$(date +%s.%N)
"$@"
status=$?
end=$(date +%s.%N)
awk -v l="$label" -v a="$start" -v b="$end" -v s="$status" \
  'BEGIN { printf "%-10s %8.1f s  exit %d\n", l, b - a, s }' >> build/test-phases.txt
exit $status

#!/bin/bash
# The same test files timed at two commits, module by module, ABBA-interleaved (old, new; new,
# old; ...) so the host's drift falls on both sides: is `make test` slower for the same tests?
#
#   benchmarks/suite_ab.sh OLD_CHECKOUT NEW_CHECKOUT tests/a.py tests/b.py ...
#
# Each checkout needs its own .venv (`make setup` in it). Pick files whose source is the same at
# both commits (the same tests, the code under them changed). Prints one JSON object.
set -u
old=$1; new=$2; shift 2
i=0; rows=""
for m in "$@"; do
  if [ $((i % 2)) -eq 0 ]; then order="old new"; else order="new old"; fi
  for side in $order; do
    dir=$old; [ "$side" = new ] && dir=$new
    t0=$(date +%s.%N)
    (cd "$dir" && .venv/bin/python -m pytest -q -p no:cacheprovider "$m" > /dev/null 2>&1)
    rc=$?
    t1=$(date +%s.%N)
    rows="$rows{\"side\": \"$side\", \"file\": \"$m\", \"exit\": $rc, \"wall_s\": $(echo "$t1 - $t0" | bc), \"load1\": $(cut -d' ' -f1 /proc/loadavg)},"
  done
  i=$((i + 1))
done
echo "{\"old\": \"$(git -C "$old" rev-parse --short HEAD)\", \"new\": \"$(git -C "$new" rev-parse --short HEAD)\", \"rows\": [${rows%,}]}"

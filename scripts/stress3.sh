#!/usr/bin/env bash
# The suite under CPU stress: a clean clone of this checkout (its committed HEAD) in DIR
# (default /tmp/preservd-stress), `npm ci`, then `npm test` three times, each beside
# `stress-ng --cpu 2` (apt: stress-ng). Prints each run's exit code, time and load; logs DIR-run-N.log.
set -u
dir=${1:-/tmp/preservd-stress}
rm -rf "$dir" && git clone -q "$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)" "$dir" && cd "$dir" && npm ci --no-audit --no-fund >/dev/null 2>&1 || exit 9
echo "commit $(git rev-parse --short HEAD)"
for i in 1 2 3; do
  stress-ng --cpu 2 --timeout 3600s >/dev/null 2>&1 &
  sp=$!
  start=$(date +%s)
  PRESERVD_REQUIRE_S3=1 PRESERVD_REQUIRE_BROWSER=1 npm test > "$dir-run-$i.log" 2>&1
  rc=$?
  end=$(date +%s)
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  kill $sp 2>/dev/null; wait $sp 2>/dev/null
  echo "run $i: exit $rc, $((end-start)) s, load at end $load, $(date -u +%H:%M)"
  grep -E "^# (fail|pass)|not ok" "$dir-run-$i.log" | head -20
done

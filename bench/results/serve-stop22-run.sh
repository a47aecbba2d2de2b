#!/bin/bash
# ABBA: old (dd868b8, before issue 16) and new (main) bench serve, alternated in one window.
set -u
ARGS="--games 100,1000 --seconds 6 --rounds 2"
for r in old1 new1 new2 old2; do
  echo "=== $r $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
  case $r in
    old*) (cd /work/wt-old && PYTHONPATH=/work/wt-old/src timeout 900 /work/main/.venv/bin/python -m croupier bench serve $ARGS --out /tmp/abba/$r) ;;
    new*) (cd /work/main && timeout 900 .venv/bin/python -m croupier bench serve $ARGS --scenarios a,b,c,c-inline,d --out /tmp/abba/$r) ;;
  esac 2>&1 | grep -v "WARN\|Warn" | tail -14
done
echo "=== scenarios c2, ray $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
(cd /work/main && timeout 1200 .venv/bin/python -m croupier bench serve --games 100,1000 --seconds 8 --rounds 3 --scenarios a,c,c2,ray --out /tmp/abba/scen) 2>&1 | grep -v "WARN\|Warn" | tail -20
echo "=== done $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"

#!/bin/bash
# ABBA again (stop 23): old (dd868b8) and new (main) bench serve alternated in one window.
set -u
ARGS="--games 100,1000 --seconds 6 --rounds 2"
for r in new1 old1 old2 new2; do
  echo "=== $r $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
  case $r in
    old*) (cd /work/wt-old && PYTHONPATH=/work/wt-old/src timeout 900 /work/main/.venv/bin/python -m croupier bench serve $ARGS --out /tmp/abba2/$r) ;;
    new*) (cd /work/main && timeout 900 .venv/bin/python -m croupier bench serve $ARGS --scenarios a,b,c,c-inline,d --out /tmp/abba2/$r) ;;
  esac 2>&1 | grep -v "WARN\|Warn" | tail -3
done
echo "=== done $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"

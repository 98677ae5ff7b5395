#!/bin/sh
# A cron-style counter script that someone made "safe" with flock(1).
cd ~ || exit 1
case "$1" in
  get) cat counter 2>/dev/null || echo 0 ;;
  incr) exec flock -n .counter.lock sh -c 'n=$(cat counter 2>/dev/null || echo 0); echo $((n + 1)) > counter.new && mv counter.new counter; echo $((n + 1))' ;;
esac

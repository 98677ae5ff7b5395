#!/bin/sh
# A cron-style counter script that someone made "safe" with flock(1): flock-counter.sh [-w SECONDS] incr|get
cd ~ || exit 1
wait="-n"
if [ "$1" = "-w" ]; then wait="-w $2"; shift 2; fi
case "$1" in
  get) cat counter 2>/dev/null || echo 0 ;;
  incr) exec flock $wait .counter.lock sh -c 'n=$(cat counter 2>/dev/null || echo 0); echo $((n + 1)) > counter.new && mv counter.new counter; echo $((n + 1))' ;;
esac

#!/usr/bin/env bash
# `make stop`: stops what `make run` started: the service (which drains its
# in-flight requests first), the webhook receiver, the provider simulator,
# and the private PostgreSQL. A server you pointed DATABASE_URL at is left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
PIDS=.data/run.pids

# stop_pid PID NAME: SIGTERM to PID if it is still NAME (not a recycled pid),
# then wait for it to exit.
stop_pid() {
  local pid="$1" name="$2"
  [ "$(ps -o comm= -p "$pid" 2>/dev/null)" = "$name" ] || return 0
  echo "stop.sh: stopping $name (pid $pid)" >&2
  kill -TERM "$pid" 2>/dev/null || return 0
  # Longer than the drain (PROVIDER_TIMEOUT + 5s).
  for _ in $(seq 300); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  echo "stop.sh: $name (pid $pid) is still running after 30s" >&2
  return 1
}

if [ -s "$PIDS" ]; then
  read -r sim_pid pay_pid listen_pid < "$PIDS"
  stop_pid "$pay_pid" payments
  [ -z "$listen_pid" ] || stop_pid "$listen_pid" payments
  stop_pid "$sim_pid" providersim
  rm -f "$PIDS"
else
  echo "stop.sh: no service started by make run is recorded in $PIDS" >&2
fi
scripts/pg.sh stop

#!/usr/bin/env bash
# Production database topologies on one machine, for tests and trials. Run as
# root (the servers then belong to the postgres user) or as a user that may
# run PostgreSQL; each topology lives in DIR, which must not exist yet or be
# one this script made.
#
#   scripts/topology.sh pgbouncer DIR PORT SERVER_URL
#       PgBouncer in transaction mode on 127.0.0.1:PORT in front of the
#       server of SERVER_URL; prints DATABASE_URL through it (with
#       default_query_exec_mode=cache_describe). Stop: topology.sh stop DIR.
#   scripts/topology.sh formation DIR PORT
#       A pg_auto_failover formation: monitor on PORT, primary and secondary
#       on PORT+1 and PORT+2, health checks tuned to fail over in seconds;
#       prints the multi-host DATABASE_URL (target_session_attrs=read-write).
#   scripts/topology.sh failover DIR
#       Stops the formation's primary (immediate shutdown, as a crash) and
#       waits until the secondary accepts writes; prints the new primary's port.
#       The same in two steps: stop-primary DIR, then wait-primary DIR.
#   scripts/topology.sh stop DIR
#       Stops what the other commands started in DIR.
#
# pgbouncer, postgresql-15-auto-failover and pg-auto-failover-cli are
# installed with apt-get when missing.
set -euo pipefail

log() { printf 'topology.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
usage() { sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

is_root() { [ "$(id -u)" -eq 0 ]; }

# The pgbouncer.ini Debian 12's package ships, kept in the repository.
DEBIAN_PGBOUNCER_INI="$(cd "$(dirname "$0")/.." && pwd)/internal/postgres/postgrestest/debian-pgbouncer.ini"

# as_owner CMD...: as postgres when root, from / (postgres may not enter
# the current folder).
as_owner() {
	if is_root; then
		(cd / && runuser -u postgres -- env PATH="$PG_BIN:$PATH" XDG_CONFIG_HOME="$DIR/config" \
			XDG_DATA_HOME="$DIR/share" XDG_RUNTIME_DIR="$DIR/run" "$@")
	else
		env PATH="$PG_BIN:$PATH" XDG_CONFIG_HOME="$DIR/config" XDG_DATA_HOME="$DIR/share" XDG_RUNTIME_DIR="$DIR/run" "$@"
	fi
}

install() {
	log "installing $* with apt-get"
	is_root || die "not root: apt-get install -y $* yourself"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -qq "$@" >&2 || { apt-get update -qq >&2 && apt-get install -y -qq "$@" >&2; }
}

pg_bin() {
	local d
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5,5 -rn); do
		[ -x "$d/pg_ctl" ] && { printf '%s\n' "$d"; return 0; }
	done
	return 1
}

make_dir() {
	mkdir -p "$DIR/run" "$DIR/config" "$DIR/share"
	if is_root; then
		chown -R postgres "$DIR"
	fi
}

cmd_pgbouncer() {
	local port="$1" server="$2"
	command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ] || install pgbouncer
	local bin
	bin="$(command -v pgbouncer 2>/dev/null || echo /usr/sbin/pgbouncer)"
	# host, port and user of SERVER_URL (postgres://user@host:port/db...).
	local rest="${server#*://}" user host hostport sport
	rest="${rest%%/*}"
	user="${rest%@*}"
	[ "$user" = "$rest" ] && user=postgres
	user="${user%%:*}"
	hostport="${rest##*@}"
	host="${hostport%:*}"
	sport="${hostport##*:}"
	[ "$sport" = "$hostport" ] && sport=5432
	make_dir
	# Debian's own pgbouncer.ini (as its package ships it), changed only in
	# pool_mode and the lines that reach the server; auth_type trust for a
	# local trial, as the server it fronts.
	sed -e "s|^\[databases\]\$|[databases]\\n* = host=$host port=$sport|" \
		-e "s|^logfile = .*|logfile = $DIR/pgbouncer.log|" \
		-e "s|^pidfile = .*|pidfile = $DIR/pgbouncer.pid|" \
		-e "s|^listen_addr = .*|listen_addr = 127.0.0.1|" \
		-e "s|^listen_port = .*|listen_port = $port|" \
		-e "s|^unix_socket_dir = .*|unix_socket_dir =|" \
		-e "s|^auth_type = .*|auth_type = trust|" \
		-e "s|^auth_file = .*|auth_file = $DIR/users.txt|" \
		"$DEBIAN_PGBOUNCER_INI" >"$DIR/pgbouncer.ini"
	echo "pool_mode = transaction" >>"$DIR/pgbouncer.ini"
	printf '"%s" ""\n' "$user" >"$DIR/users.txt"
	is_root && chown postgres "$DIR/pgbouncer.ini" "$DIR/users.txt"
	as_owner "$bin" -d "$DIR/pgbouncer.ini" || die "pgbouncer did not start (log: $DIR/pgbouncer.log)"
	# -d returns before the daemon listens; callers connect at once.
	local i
	for i in $(seq 1 100); do
		if timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port" >/dev/null 2>&1; then
			break
		fi
		[ "$i" -eq 100 ] && die "pgbouncer does not listen on $port (log: $DIR/pgbouncer.log)"
		sleep 0.1
	done
	local db="${server#*://}"
	db="${db#*/}"
	db="${db%%\?*}"
	printf 'postgres://%s@127.0.0.1:%s/%s?sslmode=disable&default_query_exec_mode=cache_describe\n' "$user" "$port" "${db:-postgres}"
}

monitor_uri() { printf 'postgres://autoctl_node@127.0.0.1:%s/pg_auto_failover?sslmode=disable' "$(cat "$DIR/port")"; }

cmd_formation() {
	local port="$1"
	command -v pg_autoctl >/dev/null 2>&1 || install postgresql-15-auto-failover pg-auto-failover-cli
	[ -e "$DIR/port" ] && die "$DIR already holds a formation; topology.sh stop $DIR and remove it first"
	make_dir
	echo "$port" >"$DIR/port"
	log "monitor on 127.0.0.1:$port"
	as_owner sh -c "pg_autoctl create monitor --pgdata '$DIR/monitor' --pgport $port --hostname 127.0.0.1 \
		--auth trust --no-ssl >'$DIR/monitor.log' 2>&1" || die "monitor: see $DIR/monitor.log"
	as_owner sh -c "nohup pg_autoctl run --pgdata '$DIR/monitor' >>'$DIR/monitor.log' 2>&1 &"
	local deadline=$((SECONDS + 60))
	until as_owner psql -h 127.0.0.1 -p "$port" -U postgres -d pg_auto_failover -qAtc 'select 1' >/dev/null 2>&1; do
		[ $SECONDS -lt $deadline ] || die "monitor does not answer after 60 s (log: $DIR/monitor.log)"
		sleep 0.2
	done
	# Seconds, not the default half minute: a dead primary is declared
	# after about 2 s, and the secondary accepts writes once the monitor
	# has waited primary_demote_timeout for the old primary to stop.
	as_owner psql -h 127.0.0.1 -p "$port" -U postgres -d pg_auto_failover -q \
		-c "ALTER SYSTEM SET pgautofailover.health_check_period = 1000" \
		-c "ALTER SYSTEM SET pgautofailover.health_check_timeout = 1000" \
		-c "ALTER SYSTEM SET pgautofailover.health_check_max_retries = 1" \
		-c "ALTER SYSTEM SET pgautofailover.health_check_retry_delay = 500" \
		-c "ALTER SYSTEM SET pgautofailover.node_considered_unhealthy_timeout = 2000" \
		-c "ALTER SYSTEM SET pgautofailover.primary_demote_timeout = 3000" \
		-c "SELECT pg_reload_conf()" >/dev/null
	local n
	for n in 1 2; do
		log "node $n on 127.0.0.1:$((port + n))"
		as_owner sh -c "nohup pg_autoctl create postgres --pgdata '$DIR/node$n' --pgport $((port + n)) --hostname 127.0.0.1 \
			--auth trust --no-ssl --pg-hba-lan --monitor '$(monitor_uri)' --run >'$DIR/node$n.log' 2>&1 &"
		# One at a time: the first runs alone ("single") and becomes the
		# primary when the second joins as its secondary.
		local want=single
		[ "$n" = 2 ] && want=secondary
		deadline=$((SECONDS + 120))
		until as_owner pg_autoctl show state --pgdata "$DIR/monitor" 2>/dev/null | grep -Eq "127\.0\.0\.1:$((port + n)) .*\| +$want +\| +$want *$"; do
			[ $SECONDS -lt $deadline ] || die "node $n not $want after 120 s (log: $DIR/node$n.log)"
			sleep 0.5
		done
	done
	printf 'postgres://postgres@127.0.0.1:%s,127.0.0.1:%s/postgres?target_session_attrs=read-write&sslmode=disable\n' $((port + 1)) $((port + 2))
}

writable() { [ "$(as_owner psql -h 127.0.0.1 -p "$1" -U postgres -d postgres -qAtc 'SHOW transaction_read_only' 2>/dev/null)" = off ]; }

cmd_stop_primary() {
	local port primary="" n
	port="$(cat "$DIR/port")"
	for n in 1 2; do
		writable $((port + n)) && primary=$n
	done
	[ -n "$primary" ] || die "no writable primary in the formation"
	log "stopping the primary on 127.0.0.1:$((port + primary)) (immediate)"
	as_owner pg_autoctl stop --pgdata "$DIR/node$primary" --immediate
	echo "$primary" >"$DIR/stopped"
}

cmd_wait_primary() {
	local port other
	port="$(cat "$DIR/port")"
	[ -s "$DIR/stopped" ] || die "no primary stopped (topology.sh stop-primary $DIR first)"
	other=$((3 - $(cat "$DIR/stopped")))
	local deadline=$((SECONDS + 120))
	until writable $((port + other)); do
		[ $SECONDS -lt $deadline ] || die "127.0.0.1:$((port + other)) not writable 120 s after the failover"
		sleep 0.1
	done
	echo $((port + other))
}

cmd_stop() {
	local n
	if [ -s "$DIR/pgbouncer.pid" ]; then
		local pid deadline=$((SECONDS + 10))
		pid="$(cat "$DIR/pgbouncer.pid")"
		kill "$pid" 2>/dev/null || true
		while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
	fi
	for n in node2 node1 monitor; do
		[ -d "$DIR/$n" ] && as_owner pg_autoctl stop --pgdata "$DIR/$n" --immediate >/dev/null 2>&1 || true
	done
	return 0
}

[ $# -ge 2 ] || usage
CMD="$1"
DIR="$(realpath -m "$2")"
PG_BIN="$(pg_bin || true)"
shift 2
case "$CMD" in
pgbouncer) [ $# -eq 2 ] || usage; cmd_pgbouncer "$@" ;;
formation) [ $# -eq 1 ] || usage; [ -n "$PG_BIN" ] || die "PostgreSQL is not installed (scripts/pg.sh url installs it)"; cmd_formation "$@" ;;
failover) [ $# -eq 0 ] || usage; cmd_stop_primary && cmd_wait_primary ;;
stop-primary) [ $# -eq 0 ] || usage; cmd_stop_primary ;;
wait-primary) [ $# -eq 0 ] || usage; cmd_wait_primary ;;
stop) [ $# -eq 0 ] || usage; cmd_stop ;;
*) usage ;;
esac

#!/usr/bin/env bash
# Print a DATABASE_URL for a reachable PostgreSQL, starting a private one if needed.
#
#   scripts/pg.sh url    print the URL on stdout (progress goes to stderr)
#   scripts/pg.sh stop   stop the private cluster if it runs
#
# Resolution order for "url":
#   1. $DATABASE_URL when set;
#   2. a server answering on 127.0.0.1:5432 (skipped when PG_FORCE_PRIVATE=1);
#   3. a private cluster under <repo>/.data/pg on port ${PG_PORT:-54329},
#      initialised and started on demand (PostgreSQL is installed with apt-get
#      when initdb cannot be found). Run as root, the cluster belongs to the
#      postgres user; when that user cannot enter the repository (a clone
#      under root's 0700 home), the cluster lives in
#      /var/tmp/payments-pg-<checksum of the repo path> instead, and
#      <repo>/.data/pg links to it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PG_PORT="${PG_PORT:-54329}"
PG_LINK="$ROOT/.data/pg"

# set_paths DIR: the cluster's files under DIR.
set_paths() {
	PG_DIR="$1"
	PG_DATA="$PG_DIR/data"
	PG_SOCK="$PG_DIR/run"
	# Unix socket paths are limited to 107 bytes; a deep checkout falls back to /tmp.
	if [ $((${#PG_SOCK} + 20)) -gt 107 ]; then
		PG_SOCK="${TMPDIR:-/tmp}/pg-$(printf '%s' "$PG_DIR" | cksum | cut -d' ' -f1)"
	fi
	PG_LOG="$PG_DIR/log"
}
if [ -L "$PG_LINK" ]; then
	set_paths "$(readlink "$PG_LINK")"
else
	set_paths "$PG_LINK"
fi

log() { printf 'pg.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
	echo "usage: $0 url|stop" >&2
	exit 2
}

is_root() { [ "$(id -u)" -eq 0 ]; }

# find_bin NAME: path of a PostgreSQL program, from PATH or the Debian layout.
find_bin() {
	local name="$1" p
	if p="$(command -v "$name" 2>/dev/null)" && [ -n "$p" ]; then
		printf '%s\n' "$p"
		return 0
	fi
	# Newest version first.
	for p in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5,5 -rn); do
		if [ -x "$p/$name" ]; then
			printf '%s\n' "$p/$name"
			return 0
		fi
	done
	return 1
}

# ready HOST PORT: true when a PostgreSQL server accepts connections there.
ready() {
	local host="$1" port="$2" isready
	if isready="$(find_bin pg_isready)"; then
		"$isready" -h "$host" -p "$port" -q -t 2 >/dev/null 2>&1
		return
	fi
	# No client tools yet: a plain TCP probe is the best we can do.
	timeout 2 bash -c "exec 3<>/dev/tcp/$host/$port" >/dev/null 2>&1
}

# as_owner CMD...: run a command as the cluster owner (postgres when root),
# from / since postgres may not be able to enter the current folder.
as_owner() {
	if is_root; then
		if command -v runuser >/dev/null 2>&1; then
			(cd / && runuser -u postgres -- "$@")
		else
			local cmd="" a
			for a in "$@"; do cmd+="$(printf '%q ' "$a")"; done
			(cd / && su postgres -s /bin/sh -c "$cmd")
		fi
	else
		"$@"
	fi
}

install_postgres() {
	log "initdb not found; installing PostgreSQL with apt-get"
	command -v apt-get >/dev/null 2>&1 || die "apt-get not available; install PostgreSQL or set DATABASE_URL"
	local sudo=()
	if ! is_root; then
		command -v sudo >/dev/null 2>&1 || die "not root and sudo missing; install PostgreSQL or set DATABASE_URL"
		sudo=(sudo)
	fi
	export DEBIAN_FRONTEND=noninteractive
	if ! "${sudo[@]}" apt-get install -y postgresql >&2; then
		"${sudo[@]}" apt-get update >&2
		"${sudo[@]}" apt-get install -y postgresql >&2
	fi
}

private_url() {
	printf 'postgres://postgres@127.0.0.1:%s/postgres?sslmode=disable\n' "$PG_PORT"
}

start_private() {
	if ready 127.0.0.1 "$PG_PORT"; then
		log "reusing PostgreSQL on 127.0.0.1:$PG_PORT"
		return 0
	fi

	local initdb pg_ctl
	if ! initdb="$(find_bin initdb)"; then
		install_postgres
		initdb="$(find_bin initdb)" || die "initdb still not found after installing PostgreSQL"
	fi
	pg_ctl="$(find_bin pg_ctl)" || pg_ctl="$(dirname "$initdb")/pg_ctl"
	[ -x "$pg_ctl" ] || die "pg_ctl not found next to $initdb"

	case "$PG_DIR" in
	*"'"* | *'"'* | *\\*) die "the repository path must not contain quotes or backslashes: $PG_DIR" ;;
	esac
	if is_root; then
		# initdb and postgres refuse to run as root: the cluster belongs to postgres.
		id postgres >/dev/null 2>&1 || useradd --system --no-create-home --shell /bin/false postgres
		place_for_postgres
	else
		mkdir -p "$PG_DIR"
	fi
	as_owner mkdir -p "$PG_SOCK"
	chmod 700 "$PG_SOCK" 2>/dev/null || as_owner chmod 700 "$PG_SOCK"

	if [ ! -s "$PG_DATA/PG_VERSION" ]; then
		log "initialising a private cluster in $PG_DATA"
		as_owner rm -rf "$PG_DATA"
		as_owner "$initdb" -D "$PG_DATA" -A trust -U postgres --no-sync -E UTF8 --locale=C >&2 ||
			die "initdb failed"
	fi

	log "starting PostgreSQL on 127.0.0.1:$PG_PORT (log: $PG_LOG)"
	# 9>&-: the server must not inherit the lock descriptor, or it would hold
	# the lock for its whole life.
	if ! as_owner "$pg_ctl" -D "$PG_DATA" -l "$PG_LOG" -w -t 60 \
		-o "-p $PG_PORT -k '$PG_SOCK' -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" \
		start >&2 9>&-; then
		[ -f "$PG_LOG" ] && tail -n 20 "$PG_LOG" >&2
		die "could not start PostgreSQL"
	fi
	ready 127.0.0.1 "$PG_PORT" || die "PostgreSQL started but does not answer on 127.0.0.1:$PG_PORT"
}

# place_for_postgres: a cluster directory the postgres user can reach. The
# repository's .data/pg when it can enter it; otherwise (a clone in root's
# 0700 home) a per-repository directory in /var/tmp, which survives reboots,
# linked from .data/pg so that stop and later runs find it.
place_for_postgres() {
	if [ ! -L "$PG_LINK" ]; then
		mkdir -p "$PG_LINK"
		chown postgres "$PG_LINK"
		if as_owner test -w "$PG_LINK" 2>/dev/null; then
			return 0
		fi
		rmdir "$PG_LINK" 2>/dev/null ||
			die "user postgres cannot reach $PG_LINK and it is not empty; move it away or set DATABASE_URL"
		local dir
		dir="/var/tmp/payments-pg-$(printf '%s' "$ROOT" | cksum | cut -d' ' -f1)"
		log "user postgres cannot enter $ROOT; the cluster goes to $dir (linked from .data/pg)"
		ln -s "$dir" "$PG_LINK"
		set_paths "$dir"
	fi
	# A shared, sticky /var/tmp: trust the directory only if it is ours.
	if [ -e "$PG_DIR" ] || [ -L "$PG_DIR" ]; then
		[ -d "$PG_DIR" ] && [ ! -L "$PG_DIR" ] && [ "$(stat -c %U "$PG_DIR")" = postgres ] ||
			die "$PG_DIR exists but is not a directory owned by postgres; remove it and retry"
	else
		mkdir -m 700 "$PG_DIR"
		chown postgres "$PG_DIR"
	fi
	as_owner test -w "$PG_DIR" || die "user postgres cannot write $PG_DIR; set DATABASE_URL instead"
}

cmd_url() {
	if [ -n "${DATABASE_URL:-}" ]; then
		printf '%s\n' "$DATABASE_URL"
		return 0
	fi
	if [ "${PG_FORCE_PRIVATE:-0}" != "1" ] && ready 127.0.0.1 5432; then
		log "using PostgreSQL on 127.0.0.1:5432"
		printf '%s\n' "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
		return 0
	fi
	mkdir -p "$ROOT/.data"
	# Serialise concurrent invocations so only one of them initialises/starts.
	if command -v flock >/dev/null 2>&1; then
		exec 9>"$ROOT/.data/pg.lock"
		flock 9
	fi
	start_private
	private_url
}

cmd_stop() {
	if [ ! -s "$PG_DATA/PG_VERSION" ]; then
		log "no private cluster in $PG_DATA"
		return 0
	fi
	local pg_ctl
	pg_ctl="$(find_bin pg_ctl)" || die "pg_ctl not found"
	if as_owner "$pg_ctl" -D "$PG_DATA" status >/dev/null 2>&1; then
		log "stopping PostgreSQL in $PG_DATA"
		as_owner "$pg_ctl" -D "$PG_DATA" -m fast -w stop >&2
	else
		log "private cluster is not running"
	fi
}

[ $# -eq 1 ] || usage
case "$1" in
url) cmd_url ;;
stop) cmd_stop ;;
*) usage ;;
esac

#!/usr/bin/env bash
# A private PostgreSQL server for the test suite: its own cluster in a temp folder, listening
# on 127.0.0.1 only, password auth. `start` prints the URL the tests read (EASEL_TEST_PG_URL),
# or nothing when no PostgreSQL is installed (the PostgreSQL tests then skip, except in CI).
#
#   scripts/pg_test_server.sh start   # idempotent: reuses a running server
#   scripts/pg_test_server.sh stop
#
# Root cannot run postgres, so as root the server runs as the `postgres` user (the Debian
# package creates it). The password is a throwaway for a loopback-only test server.
set -euo pipefail

ROOT="${EASEL_PG_DIR:-/tmp/easel-pg-test}"
DIR="$ROOT/data"
PORT="${EASEL_PG_PORT:-54329}"
USER_NAME=easel
PASSWORD=easel-test
DATABASE=easel_test

bindir() {
    local found
    if command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ]; then
        pg_config --bindir
        return
    fi
    found=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
    [ -n "$found" ] && [ -x "$found/initdb" ] && echo "$found"
}

as_owner() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

start() {
    local bin
    bin=$(bindir) || true
    [ -n "$bin" ] || return 0  # no PostgreSQL here: print no URL
    if [ ! -f "$DIR/PG_VERSION" ]; then
        mkdir -p "$ROOT"
        if [ "$(id -u)" = 0 ]; then chown postgres: "$ROOT"; fi
        chmod 700 "$ROOT"
        local pwfile="$ROOT/pw"
        as_owner sh -c "umask 077; echo '$PASSWORD' > '$pwfile'"
        as_owner "$bin/initdb" -D "$DIR" -U "$USER_NAME" --pwfile="$pwfile" \
            --auth-host=scram-sha-256 --auth-local=scram-sha-256 -E UTF8 >"$ROOT/initdb.log"
        as_owner rm -f "$pwfile"
    fi
    if ! as_owner "$bin/pg_ctl" -D "$DIR" status >/dev/null 2>&1; then
        as_owner "$bin/pg_ctl" -D "$DIR" -w -l "$DIR/server.log" -o \
            "-p $PORT -c listen_addresses=127.0.0.1 -k $ROOT -c max_connections=200 -c fsync=off" \
            start >/dev/null
    fi
    if ! PGPASSWORD="$PASSWORD" "$bin/psql" -h 127.0.0.1 -p "$PORT" -U "$USER_NAME" -d postgres \
        -tAc "SELECT 1 FROM pg_database WHERE datname = '$DATABASE'" | grep -q 1; then
        PGPASSWORD="$PASSWORD" "$bin/createdb" -h 127.0.0.1 -p "$PORT" -U "$USER_NAME" "$DATABASE"
    fi
    echo "postgresql+psycopg://$USER_NAME:$PASSWORD@127.0.0.1:$PORT/$DATABASE"
}

stop() {
    local bin
    bin=$(bindir) || true
    [ -n "$bin" ] && [ -f "$DIR/PG_VERSION" ] || return 0
    as_owner "$bin/pg_ctl" -D "$DIR" -m fast stop >/dev/null || true
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac

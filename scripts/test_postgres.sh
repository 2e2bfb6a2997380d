#!/usr/bin/env bash
# Starts a throwaway PostgreSQL server on loopback for the store tests and prints its URL:
#   eval "$(scripts/test_postgres.sh start)"   # exports SELFPLAY_TEST_POSTGRES_URL
#   scripts/test_postgres.sh stop
# Installs the Debian package if the server binaries are missing. The cluster lives in a
# temporary folder, owned by the `postgres` user when run as root (initdb refuses root).
set -euo pipefail
dir="${SELFPLAY_PG_DIR:-/tmp/selfplay-test-pg}"
port="${SELFPLAY_PG_PORT:-55432}"

bin() {
  ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1
}

as_owner() {
  if [[ "$(id -u)" == 0 ]]; then su postgres -s /bin/bash -c "$*"; else bash -c "$*"; fi
}

case "${1:-start}" in
  start)
    if [[ -z "$(bin)" ]]; then
      apt-get install -y -q postgresql >/dev/null 2>&1 \
        || { apt-get update -q >/dev/null 2>&1; apt-get install -y -q postgresql >/dev/null; }
    fi
    pg="$(bin)"
    if ! as_owner "$pg/pg_ctl -D $dir status" >/dev/null 2>&1; then
      rm -rf "$dir" && mkdir -p "$dir"
      [[ "$(id -u)" == 0 ]] && chown postgres "$dir"
      as_owner "$pg/initdb -D $dir -A trust -U selfplay --no-sync" >/dev/null
      as_owner "$pg/pg_ctl -D $dir -l $dir/log -w -o '-h 127.0.0.1 -p $port -k $dir -F' start" \
        >/dev/null
    fi
    echo "export SELFPLAY_TEST_POSTGRES_URL=postgresql://selfplay@127.0.0.1:$port/postgres"
    ;;
  stop)
    pg="$(bin)"
    as_owner "$pg/pg_ctl -D $dir -m fast stop" >/dev/null 2>&1 || true
    rm -rf "$dir"
    ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac

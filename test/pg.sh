#!/bin/sh
# pg.sh - a throwaway PostgreSQL server for the tests, in a folder of its
# own, listening on 127.0.0.1 only, trusting local connections (the
# tests pass a password anyway, to check it is never shown).
#
#   pg.sh start DIR PORT   initdb (once) and start; prints nothing
#   pg.sh stop DIR         fast shutdown
#   pg.sh kill DIR         immediate shutdown (a crash: no checkpoint)
#   pg.sh restart DIR      stop, then start on the same port
#
# The server runs as an unprivileged user: initdb refuses root, so as
# root it runs as postgres (the Debian package's user) and DIR is given
# to it.  Durability is off (fsync): the tests check mcpkeep, not disks.
set -eu

bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -x "$bin/initdb" ] || {
	echo "pg.sh: no PostgreSQL server (apt install postgresql)" >&2
	exit 1
}
cmd=$1
dir=$2

as_pg() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

start() {
	port=$(cat "$dir/port")
	as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 60 -o \
		"-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300" \
		start >/dev/null
}

case $cmd in
start)
	mkdir -p "$dir"
	echo "$3" >"$dir/port"
	if [ "$(id -u)" -eq 0 ]; then
		chown postgres "$dir" "$dir/port"
	fi
	if [ ! -d "$dir/data" ]; then
		as_pg "$bin/initdb" -D "$dir/data" -A trust -U mk -E UTF8 \
			--no-sync >"$dir/initdb.log" 2>&1 || {
			cat "$dir/initdb.log" >&2
			exit 1
		}
	fi
	start
	;;
stop) as_pg "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null ;;
kill) as_pg "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null ;;
restart)
	as_pg "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
	start
	;;
*)
	echo "usage: pg.sh start DIR PORT | stop DIR | kill DIR | restart DIR" >&2
	exit 2
	;;
esac

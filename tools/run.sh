#!/bin/sh
# run.sh - install what is missing, build, and run the main job: the
# runtime with examples/config.json (server-everything over stdio, legacy
# SSE and Streamable HTTP), showing every state transition live.  Kill a
# server (e.g. pkill -f "server-everything/dist/index.js sse") to watch
# its client go unstable and heal.  Ctrl-C stops everything.
set -eu
cd "$(dirname "$0")/.."
. tools/deps.sh
[ -f build/build.ninja ] || meson setup build >/dev/null
ninja -C build >/dev/null

everything=test/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js
logs=$(mktemp -d)
pids=""
cleanup() {
	for p in $pids; do
		kill "$p" 2>/dev/null || true
	done
	rm -rf "$logs"
}
trap cleanup EXIT INT TERM

# start MODE PORT PATTERN: a server-everything, waited for (30 s at most)
start() {
	: >"$logs/$1.log"
	PORT=$2 node "$everything" "$1" >"$logs/$1.log" 2>&1 &
	pids="$pids $!"
	i=0
	until grep -q "$3" "$logs/$1.log"; do
		i=$((i + 1))
		if [ $i -gt 300 ] || ! kill -0 "$!" 2>/dev/null; then
			echo "run.sh: server-everything $1 did not start:" >&2
			cat "$logs/$1.log" >&2
			exit 1
		fi
		sleep 0.1 # polling a log file for its listening line
	done
}
start sse 3101 "running on port 3101"
start streamableHttp 3102 "listening on port 3102"
build/cli/mcpkeep run -c examples/config.json "$@"

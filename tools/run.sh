#!/bin/sh
# run.sh - install what is missing, build, and run the main job: the
# daemon (mcpkeep serve) with examples/serve.json - server-everything over
# stdio, legacy SSE and Streamable HTTP, and an OAuth client against
# test/peers/oauth.mjs (a local authorization server with an MCP server) -
# and print its status page URL.  Kill a server (e.g. pkill -f
# "server-everything/dist/index.js sse") to watch its badge go unstable
# and heal.  Ctrl-C stops everything.  Options go to `mcpkeep serve`.
set -eu
cd "$(dirname "$0")/.."
. tools/deps.sh
if [ ! -f build/build.ninja ]; then
	echo "run.sh: configuring and building mcpkeep in build/ (the first build takes a minute or two)"
	meson setup build >/dev/null
else
	echo "run.sh: building mcpkeep (what changed)"
fi
ninja -C build >/dev/null
echo "run.sh: starting server-everything (SSE :3101, Streamable HTTP :3102), the OAuth peer (:3103) and the daemon"

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

# start NAME PATTERN CMD...: CMD in the background, waited for (30 s at
# most) until its output has PATTERN
start() {
	name=$1 pattern=$2
	shift 2
	: >"$logs/$name.log"
	"$@" >"$logs/$name.log" 2>&1 &
	pid=$!
	pids="$pids $pid"
	i=0
	until grep -q "$pattern" "$logs/$name.log"; do
		i=$((i + 1))
		if [ $i -gt 300 ] || ! kill -0 "$pid" 2>/dev/null; then
			echo "run.sh: $name did not start:" >&2
			cat "$logs/$name.log" >&2
			exit 1
		fi
		sleep 0.1 # polling a log file for its listening line
	done
}
start sse "running on port 3101" env PORT=3101 node "$everything" sse
start http "listening on port 3102" env PORT=3102 node "$everything" streamableHttp
start oauth "listening on port 3103" node test/peers/oauth.mjs --port 3103
build/cli/mcpkeep serve -c examples/serve.json --store "$logs/store.db" "$@"

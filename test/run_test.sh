#!/bin/bash
# run_test.sh ROOT - the README's run command, tools/run.sh, as printed.
# It must start the example's servers and the daemon and print the status
# page URL; the page must answer, the API must list the example's four
# clients (stdio, SSE and Streamable HTTP healthy; the OAuth one waiting
# for its sign-in, which then makes it healthy); Ctrl-C (SIGINT to its
# process group, as a terminal sends it) must stop everything and leave
# no process behind.  Every wait has a deadline.
set -u
root=$1
tmp=$(mktemp -d /tmp/mk-run-XXXXXX)
pid=''
cleanup() {
	[[ -z $pid ]] || kill -KILL -- -"$pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*"
	echo "---- run.sh said ----"
	cat "$tmp/log"
	exit 1
}

cd "$root" || exit 1
mkfifo "$tmp/out"
setsid ./tools/run.sh >"$tmp/out" 2>&1 &
pid=$!
exec {fd}<"$tmp/out"
: >"$tmp/log"
url=''
while IFS= read -r -t 120 -u "$fd" line; do
	echo "$line" >>"$tmp/log"
	if [[ $line =~ \(status\ page:\ (http://[^\ ]+/)\) ]]; then
		url=${BASH_REMATCH[1]}
		break
	fi
done
[[ -n $url ]] || fail "no status page URL in 120 s"
cat <&"$fd" >>"$tmp/log" & # the rest, so that its writes never block
echo "status page: $url"

curl -s -m 10 "$url" | grep -q '<title>mcpkeep</title>' ||
	fail "the status page did not answer"

states() { # name=state of each client, sorted by name
	curl -s -m 10 "${url}api/mcp/clients?limit=100" | python3 -c '
import json, sys
try:
    d = json.load(sys.stdin)
    print(" ".join(c["config"]["name"] + "=" + c["state"] for c in d["clients"]))
except Exception:
    pass'
}
# (the API is polled, with a deadline: a state reached before this script
# could subscribe is no event it would see)
wait_states() {
	for ((i = 0; i < 300; i++)); do
		[[ $(states) == "$1" ]] && return 0
		sleep 0.2
	done
	fail "the clients are $(states), wanted $1"
}
wait_states "everything_http=healthy everything_sse=healthy everything_stdio=healthy notes=pending_verification"
authorize=$(curl -s -m 10 -X POST -H "Content-Type: application/json" \
	"${url}api/mcp/client/notes/initiate-verification" |
	python3 -c 'import json, sys; print(json.load(sys.stdin)["authorize_url"])')
[[ -n $authorize ]] || fail "no authorize_url for notes"
curl -s -m 10 -L "$authorize" | grep -q 'Authorized' || fail "the sign-in did not complete"
wait_states "everything_http=healthy everything_sse=healthy everything_stdio=healthy notes=healthy"
echo "four clients up, the OAuth one signed in"

kill -INT -- -"$pid"
for ((i = 0; i < 200; i++)); do
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.1
done
kill -0 "$pid" 2>/dev/null && fail "run.sh still runs 20 s after Ctrl-C"
wait "$pid"
rc=$?
[[ $rc -eq 0 ]] || fail "run.sh exited $rc after Ctrl-C"
left=$(pgrep -g "$pid" | tr '\n' ' ')
[[ -z $left ]] || fail "processes left behind: $left"
pid=''
echo "Ctrl-C stopped everything"

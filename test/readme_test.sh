#!/bin/bash
# readme_test.sh ROOT - runs the documentation's curl lines (between the
# readme-test markers of docs/daemon.md, docs/gateway.md, then
# docs/credentials.md), as
# printed, against a real daemon whose clients
# are test/peers/inject.mjs (svst, docs) and test/peers/oauth.mjs (notes,
# team, vault, pal); each must answer the status its comment names.
# Where a line needs what an earlier answer gave, this script does what a
# user would: signs in at the authorize_url (STATE, CODE), keeps the
# session_id of a mcp_auth_required (SID).  Then no answer and no log line
# may hold a secret.  Every wait reads a pipe with a deadline.  Needs MK_MCPKEEP, MK_PEERS_DIR, node, curl, openssl and python3.
set -u
root=$1
docs=("$root/docs/daemon.md" "$root/docs/gateway.md" "$root/docs/credentials.md")
tmp=$(mktemp -d /tmp/mk-readme-XXXXXX)
pids=()
fail=0
cleanup() {
	for p in "${pids[@]}"; do
		kill -TERM "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	rm -rf "$tmp"
}
trap cleanup EXIT

# start NAME PATTERN CMD...: runs CMD with stdout on a pipe, reads it until
# a line matches PATTERN (30 s at most); sets got to the line's first
# group.  The pipe stays open (fds kept) for what CMD writes later.
start() {
	local name=$1 pattern=$2 line
	shift 2
	mkfifo "$tmp/$name.out"
	"$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
	pids+=($!)
	exec {fd}<"$tmp/$name.out"
	while IFS= read -r -t 30 -u "$fd" line; do
		if [[ $line =~ $pattern ]]; then
			got=${BASH_REMATCH[1]}
			return 0
		fi
	done
	echo "$name did not start:" >&2
	cat "$tmp/$name.err" >&2
	return 1
}

json() { # json KEY: the KEY of the JSON object on stdin (or nothing)
	python3 -c 'import json, sys
try:
    v = json.load(sys.stdin)
    for k in sys.argv[1].split("."):
        v = v[k]
    print(v)
except Exception:
    pass' "$1"
}

# every example config passes `mcpkeep check` as shipped: valid, and
# nothing to warn of (run from the root: their paths are relative to it)
for f in "$root"/examples/*.json; do
	out=$(cd "$root" && "$MK_MCPKEEP" check -c "$f" 2>&1)
	if [[ $? -ne 0 || $out != *"valid (0 errors, 0 warnings)"* ]]; then
		echo "FAIL: mcpkeep check -c $f: $out"
		fail=1
	fi
done
# import: a desktop client's mcpServers, as a config check finds valid
# (its inline header warned of), each server mapped
printf '%s' '{"mcpServers": {"my-files": {"command": "node", "args": ["x.js"], "env": {"DEBUG": "1"}}, "web": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer t"}}, "old": {"url": "http://127.0.0.1:1/sse"}}}' |
	"$MK_MCPKEEP" import >"$tmp/imported.json" 2>"$tmp/import.err"
out=$("$MK_MCPKEEP" check -c "$tmp/imported.json" 2>&1)
got=$(python3 -c 'import json, sys
c = json.load(open(sys.argv[1]))["mcp"]["client_configs"]
print(" ".join(x["name"] + ":" + x["connection_type"] for x in c),
      c[0]["stdio_config"]["envs"][-1], c[1]["headers"]["Authorization"])' "$tmp/imported.json")
if [[ $out != *"valid (0 errors, 1 warning)"* ||
	$out != *"headers.Authorization: a secret written inline"* ||
	$got != "my_files:stdio web:http old:sse DEBUG=1 Bearer t" ]]; then
	echo "FAIL: mcpkeep import: $got / $out"
	fail=1
fi

start inject 'listening on port ([0-9]+)' node "$MK_PEERS_DIR/inject.mjs" http --port 0 || exit 1
mcp=$got
start oauth 'listening on port ([0-9]+)' node "$MK_PEERS_DIR/oauth.mjs" --port 0 || exit 1
as=$got
# the authorization server also grants client credentials, takes client
# ID metadata documents, and wants files:write for its echo tool
# (and ID-JAGs, and private_key_jwt for svc-jwt, whose key is made here)
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$tmp/svc.pem" 2>/dev/null &&
	openssl pkey -in "$tmp/svc.pem" -pubout -out "$tmp/svc.pub" 2>/dev/null || exit 1
SVC_KEY=$(cat "$tmp/svc.pem")
export SVC_KEY
python3 -c 'import json, sys
print(json.dumps({"client_credentials": True, "cimd": True, "id_jag": True,
    "scopes_required": {"echo": "files:write"},
    "jwt_clients": {"svc-jwt": open(sys.argv[1]).read()}}))' "$tmp/svc.pub" >"$tmp/variant.json"
curl -s -o /dev/null -X POST "http://127.0.0.1:$as/admin/variant" -d @"$tmp/variant.json" || exit 1
MCP_URL=http://127.0.0.1:$mcp/mcp
AS=http://127.0.0.1:$as
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$tmp/config.json" <<EOF
{"server": {"listen": "127.0.0.1:$port", "admin_token": "readme-admin",
  "client_metadata_url": "http://127.0.0.1:$port/oauth/client-metadata.json"},
 "mcp": {"client_configs": [
  {"name": "svst", "connection_type": "http", "connection_string": "$MCP_URL",
   "needs_session_stickiness": true},
  {"name": "notes", "connection_type": "http", "connection_string": "$AS/mcp",
   "auth_type": "oauth", "oauth_config": {}, "tools_to_execute": ["*"]},
  {"name": "keyed", "connection_type": "http", "connection_string": "$AS/mcp",
   "auth_type": "headers", "headers": {"x-api-key": "key-keyed"},
   "tools_to_execute": ["*"]},
  {"name": "team", "connection_type": "http", "connection_string": "$AS/mcp",
   "auth_type": "per_user_headers", "per_user_header_keys": ["x-api-key"],
   "tools_to_execute": ["*"]},
  {"name": "vault", "connection_type": "http", "connection_string": "$AS/mcp",
   "auth_type": "token_exchange", "tools_to_execute": ["*"],
   "token_exchange": {"token_url": "$AS/token", "audience": "https://api.example",
    "client_id": "static-client", "client_secret": "static-secret"}},
  {"name": "pal", "connection_type": "http", "connection_string": "$AS/mcp",
   "auth_type": "per_user_oauth", "oauth_config": {}, "tools_to_execute": ["*"]},
  {"name": "m2m_jwt", "connection_type": "http", "connection_string": "$AS/mcp",
   "auth_type": "oauth", "tools_to_execute": ["*"],
   "oauth_config": {"client_id": "svc-jwt", "grant_type": "client_credentials",
    "auth_method": "private_key_jwt", "private_key": "env.SVC_KEY", "private_key_id": "k1"}},
  {"name": "sso", "connection_type": "http", "connection_string": "$AS/mcp",
   "auth_type": "token_exchange", "tools_to_execute": ["*"],
   "token_exchange": {"token_url": "$AS/token", "client_id": "static-client", "client_secret": "static-secret",
    "requested_token_type": "urn:ietf:params:oauth:token-type:id-jag",
    "subject_token_type": "urn:ietf:params:oauth:token-type:id_token", "scopes": ["mcp:tools"]},
   "oauth_config": {"client_id": "static-client", "client_secret": "static-secret"}}]}}
EOF
start daemon 'serving http://127.0.0.1:([0-9]+)' env MCPKEEP_LOG=debug "$MK_MCPKEEP" serve -c "$tmp/config.json" --store "$tmp/store.db" || exit 1

MK=http://127.0.0.1:$port
MCPKEEP_ADMIN_TOKEN=readme-admin
AUTH="Authorization: Bearer $MCPKEEP_ADMIN_TOKEN"
JSON="Content-Type: application/json"
STATE='' CODE='' SID='' DIGEST=''
n=0
while IFS= read -r line; do
	[[ $line == curl\ * ]] || continue
	n=$((n + 1))
	want=${line##*# }
	want=${want%% *}
	# the line as printed, its status and body kept
	out=$(eval "${line%%#*} -o $tmp/body -w '%{http_code}'" 2>&1)
	body=$(cat "$tmp/body" 2>/dev/null)
	cat "$tmp/body" >>"$tmp/all" 2>/dev/null
	if [[ $out != "$want" ]]; then
		echo "FAIL: $line"
		echo "  answered $out (wanted $want): $body"
		fail=1
		continue
	fi
	# a whoami answers as its subject: the signed-in user, the header's
	# name, the caller
	case $line in
	*'"client": "notes", "tool": "whoami"'*) who=ops ;;
	*'"client": "keyed", "tool": "whoami"'*) who=keyed ;;
	*'"client": "team", "tool": "whoami"'*) who=alice ;;
	*'"client": "vault", "tool": "whoami"'*) who=erin ;;
	*'"client": "pal", "tool": "whoami"'*) who=ops ;;
	*'"client": "m2m", "tool": "whoami"'*) who=static-client ;;
	*'"client": "m2m_jwt", "tool": "whoami"'*) who=svc-jwt ;;
	*'"client": "sso", "tool": "whoami"'*) who=erin ;;
	*'"client": "byurl", "tool": "echo"'*) who=hi ;;
	*'"name": "keyed-echo", "arguments": {"message": "through the gateway"}'*) who='through the gateway' ;;
	*) who='' ;;
	esac
	if [[ $want == 200 && -n $who && $body != *"\"text\":\"$who\""* ]]; then
		echo "FAIL: $line"
		echo "  answered as someone else (wanted $who): $body"
		fail=1
		continue
	fi
	echo "ok $n: ${line:0:100}"
	url=$(json authorize_url <<<"$body")
	[[ -n $url ]] || url=$(json mcp_auth_required.authorize_url <<<"$body")
	if [[ -n $url ]]; then # sign in, as the user would
		loc=$(curl -s -o /dev/null -w '%{redirect_url}' "$url&login_hint=ops")
		CODE=$(python3 -c 'import sys, urllib.parse as u
q = u.parse_qs(u.urlparse(sys.argv[1]).query); print(q["code"][0])' "$loc")
		STATE=$(python3 -c 'import sys, urllib.parse as u
q = u.parse_qs(u.urlparse(sys.argv[1]).query); print(q["state"][0])' "$loc")
	fi
	sid=$(json mcp_auth_required.session_id <<<"$body")
	[[ -z $sid ]] || SID=$sid
	dg=$(python3 -c 'import json, sys
try:
    print(json.load(sys.stdin)["versions"][-1]["digest"])
except Exception:
    pass' <<<"$body")
	[[ -z $dg ]] || DIGEST=$dg # the list's digest: a version's
done < <(sed -n '/<!-- readme-test:begin -->/,/<!-- readme-test:end -->/p' "${docs[@]}")
# no secret in any answer or in the daemon's log: the config's, the
# callers', and every token and code the authorization server handed out
printf '%s\n' readme-admin key-admin key-alice key-keyed static-secret user-admin user-erin >"$tmp/secrets"
curl -s "$AS/admin/issued" | python3 -c 'import json, sys
for v in json.load(sys.stdin).values():
    for s in v:
        print(s)' >>"$tmp/secrets"
grep -v -- '-----' "$tmp/svc.pem" >>"$tmp/secrets" # the private key's lines
if [[ $(wc -l <"$tmp/secrets") -lt 8 ]]; then
	echo "FAIL: the authorization server handed out too few secrets to look for"
	fail=1
fi
for f in "$tmp/all" "$tmp/daemon.err"; do
	if grep -F -f "$tmp/secrets" "$f" >/dev/null; then
		echo "FAIL: a secret in $(basename "$f"):"
		grep -o -F -f "$tmp/secrets" "$f" | sort -u | sed 's/^\(....\).*/  \1.../'
		fail=1
	fi
done
# the access log: a line per request, the path without its query
if ! grep -q ' http: GET /api/oauth/callback 200 ' "$tmp/daemon.err" ||
	[[ $(grep -c ' http: ' "$tmp/daemon.err") -lt $n ]]; then
	echo "FAIL: the access log lacks the requests"
	fail=1
fi
if [[ $n -lt 20 ]]; then
	echo "FAIL: only $n curl lines found in ${docs[*]}"
	fail=1
fi
echo "$(wc -l <"$tmp/secrets") secrets looked for, $(wc -l <"$tmp/daemon.err") log lines"
exit $fail

#!/bin/bash
# install_test.sh BUILD SRC - an embedder from pkg-config alone: installs
# the build into a scratch prefix (meson install --destdir), builds
# examples/embedder.c with nothing but `pkg-config --cflags --libs
# mcpkeep` (its prefix moved with --define-variable) and an rpath, and
# runs it:
# against server-everything over stdio it adds the client, waits for
# "healthy" on the state stream and calls echo; against inject.mjs with
# per-user headers a caller without a credential is told where to give
# them (exit 3).  The systemd unit installed beside them passes
# `systemd-analyze verify`, and a build with -Dtests=false has the program
# and no tests.  Needs MK_PEERS_DIR, node, cc, pkg-config and
# systemd-analyze.
set -u
build=$1
src=$2
tmp=$(mktemp -d /tmp/mk-install-XXXXXX)
pid=''
cleanup() {
	[[ -z $pid ]] || kill "$pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*"
	exit 1
}

meson install -C "$build" --no-rebuild --destdir "$tmp/root" \
	>"$tmp/install.log" 2>&1 || fail "meson install: $(tail -5 "$tmp/install.log")"
pc=$(find "$tmp/root" -name mcpkeep.pc | head -1)
[[ -n $pc ]] || fail "no mcpkeep.pc installed"
[[ -n $(find "$tmp/root" -name mcpkeep.h) ]] || fail "no mcpkeep.h installed"
export PKG_CONFIG_PATH=${pc%/*}
# (the prefix moved under the scratch root, as a non-system prefix is)
prefix="$tmp/root$(pkg-config --variable=prefix mcpkeep)"
flags=$(pkg-config --define-variable=prefix="$prefix" --cflags --libs \
	mcpkeep) || fail "pkg-config --cflags --libs mcpkeep"
libdir=$(pkg-config --define-variable=prefix="$prefix" --variable=libdir \
	mcpkeep)
# shellcheck disable=SC2086
cc -o "$tmp/embedder" "$src/examples/embedder.c" $flags \
	-Wl,-rpath,"$libdir" 2>"$tmp/cc.log" ||
	fail "cc embedder.c \$(pkg-config ...): $(cat "$tmp/cc.log")"

every="$MK_PEERS_DIR/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
out=$("$tmp/embedder" \
	'{"name": "every", "connection_type": "stdio", "stdio_config": {"command": "node", "args": ["'"$every"'", "stdio"], "envs": ["PATH"]}, "tools_to_execute": ["echo"]}' \
	echo '{"message": "from an installed embedder"}' 2>&1)
rc=$?
[[ $rc -eq 0 && $out == *"every: "*"-> healthy"* &&
	$out == *"from an installed embedder"* ]] ||
	fail "embedder against server-everything (exit $rc): $out"

# a per-user client (verified with the admin's own values), a caller
# without a credential yet: told where to give it
mkfifo "$tmp/inject.out"
node "$MK_PEERS_DIR/inject.mjs" http --port 0 >"$tmp/inject.out" 2>&1 &
pid=$!
exec {fd}<"$tmp/inject.out"
port=''
while IFS= read -r -t 30 -u "$fd" line; do
	if [[ $line =~ listening\ on\ port\ ([0-9]+) ]]; then
		port=${BASH_REMATCH[1]}
		break
	fi
done
[[ -n $port ]] || fail "inject.mjs did not start"
cat <&"$fd" >/dev/null &
out=$("$tmp/embedder" \
	'{"name": "mine", "connection_type": "http", "connection_string": "http://127.0.0.1:'"$port"'/mcp", "auth_type": "per_user_headers", "per_user_header_keys": ["x-api-key"], "tools_to_execute": ["echo"]}' \
	echo '{"message": "x"}' alice '{"x-api-key": "admin-own"}' 2>&1)
rc=$?
[[ $rc -eq 3 && $out == *"authorize first: "*"submit_url"* ]] ||
	fail "embedder, per-user caller without a credential (exit $rc): $out"

# the man pages: installed, and clean to man --warnings
for m in man1/mcpkeep.1 man5/mcpkeep.json.5 man3/mcpkeep.h.3; do
	page=$(find "$tmp/root" -path "*/man/$m" | head -1)
	[[ -n $page ]] || fail "no $m installed"
	warn=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
	[[ -z $warn ]] || fail "man --warnings $m: $warn"
done

# the systemd unit: installed, and valid to systemd-analyze (its
# ExecStart pointed at the built program: the prefix is not this root)
unit=$(find "$tmp/root" -name mcpkeep.service | head -1)
[[ -n $unit ]] || fail "no mcpkeep.service installed"
grep -q '^ExecStart=/usr/local/bin/mcpkeep serve -c /usr/local/etc/mcpkeep/config.json' "$unit" ||
	fail "mcpkeep.service ExecStart: $(grep ExecStart "$unit")"
for d in DynamicUser=yes StateDirectory=mcpkeep NoNewPrivileges=yes \
	ProtectSystem=strict LimitNOFILE= 'ExecReload=/bin/kill -HUP'; do
	grep -q "^$d" "$unit" || fail "mcpkeep.service has no $d"
done
mkdir -p "$tmp/unit"
sed "s|/usr/local/bin/mcpkeep|$build/cli/mcpkeep|" "$unit" >"$tmp/unit/mcpkeep.service"
out=$(systemd-analyze verify --man=no "$tmp/unit/mcpkeep.service" 2>&1) ||
	fail "systemd-analyze verify mcpkeep.service: $out"

# a build without the tests and benchmarks (-Dtests=false)
meson setup "$tmp/lean" "$src" -Dtests=false >"$tmp/lean.log" 2>&1 &&
	ninja -C "$tmp/lean" >>"$tmp/lean.log" 2>&1 ||
	fail "-Dtests=false: $(tail -5 "$tmp/lean.log")"
[[ -x $tmp/lean/cli/mcpkeep && ! -e $tmp/lean/test ]] ||
	fail "-Dtests=false built the tests (or no program)"
echo "ok: installed, built from pkg-config alone, ran; the unit verified; a lean build"

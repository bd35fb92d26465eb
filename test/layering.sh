#!/bin/bash
# layering.sh ROOT - the dependency direction of the layers, checked
# on the sources: cli (include/mcpkeep.h only) -> runtime -> actors ->
# {transport, persist, telemetry, model} -> codec, telemetry ->
# actors/kernel (its log) -> codec, never the other way.  Fails (and names each line)
# when a folder includes a header from a folder above it, or when a folder
# below runtime/ calls a function that runtime/ defines (the mk_* of the
# public API: mk_strerror and its kind).
set -u
root=${1:?usage: layering.sh ROOT}
cd "$root" || exit 2
fail=0

# includes DIR ALLOWED...: every quoted include in DIR (its subfolders
# too) names a header under one of the ALLOWED prefixes.
includes() {
	local dir=$1 bad
	shift
	local allow
	allow=$(printf '|%s' "$@")
	allow=${allow:1}
	bad=$(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"' \
		--include='*.c' --include='*.h' "$dir" |
		grep -vE "#[[:space:]]*include[[:space:]]+\"($allow)")
	if [ -n "$bad" ]; then
		echo "layering: $dir includes from above it:"
		echo "$bad"
		fail=1
	fi
}

includes cli 'cli/' 'mcpkeep\.h"'
includes codec 'codec/' 'mcpkeep\.h"'
includes model 'model/' 'codec/' 'mcpkeep\.h"'
includes actors/kernel 'actors/kernel/' 'codec/' 'mcpkeep\.h"'
includes transport 'transport/' 'codec/' 'mcpkeep\.h"'
includes persist 'persist/' 'codec/' 'mcpkeep\.h"'
includes telemetry 'telemetry/' 'actors/kernel/' 'codec/' 'mcpkeep\.h"'
includes actors 'actors/' 'transport/' 'persist/' 'telemetry/' 'model/' \
	'codec/' 'mcpkeep\.h"'

# private HEADER OWNER...: within actors/, only the OWNERs' files (the
# actor's own, and the actor that spawns it) include an actor's main
# header; its peers include its messages (<x>_msg.h).
private() {
	local header=$1 bad
	shift
	bad=$(grep -rnF "#include \"$header\"" --include='*.c' \
		--include='*.h' actors)
	for owner in "$@"; do
		bad=$(echo "$bad" | awk -v o="$owner" 'index($0, o) != 1')
	done
	if [ -n "$bad" ]; then
		echo "layering: $header is its actor's own; its peers include its messages:"
		echo "$bad"
		fail=1
	fi
}
private actors/persister.h actors/persister.c
private actors/cluster.h actors/cluster.c
private actors/credential/credential.h actors/credential/
private actors/supervisor/supervisor.h actors/supervisor/
private actors/client/client.h actors/client/ actors/supervisor/

# The functions runtime/ defines (a definition starts a line: the return
# type stands on the line above), called from below it.
fns=$(grep -ohE '^mk_[a-z0-9_]+\(' runtime/*.c | tr -d '(' | sort -u)
if [ -z "$fns" ]; then
	echo "layering: no function definitions found in runtime/"
	exit 1
fi
pattern="\\b($(echo "$fns" | paste -sd '|'))[[:space:]]*\\("
bad=$(grep -rnE "$pattern" --include='*.c' --include='*.h' \
	actors codec model transport persist telemetry)
if [ -n "$bad" ]; then
	echo "layering: below runtime/, calls into runtime/:"
	echo "$bad"
	fail=1
fi

[ "$fail" = 0 ] && echo "layering: ok ($(echo "$fns" | wc -l) runtime" \
	"functions, none called from below)"
exit "$fail"

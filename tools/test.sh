#!/bin/sh
# test.sh - install what is missing, build, and run every test:
#   the suite in a normal build, under address+undefined sanitizers and
#   under the thread sanitizer (separate build folders), the format check,
#   and each fuzz target for FUZZ_SECONDS (default 60).
# Ends with one line "N passed, N failed" over all runs; exits non-zero on
# any failure.
set -u
cd "$(dirname "$0")/.."
. tools/deps.sh
set +e # (deps.sh sets -e): a failing suite must not end the run early

FUZZ_SECONDS=${FUZZ_SECONDS:-60}
passed=0
failed=0

note() { printf '\n=== %s\n' "$*"; }

# count BUILD_DIR: adds the results in its testlog.json to the totals.
# A skipped test counts as failed: nothing is skipped silently.
count() {
	set -- $(python3 - "$1/meson-logs/testlog.json" <<'PY'
import json, sys
ok = bad = 0
try:
    for line in open(sys.argv[1]):
        r = json.loads(line)["result"]
        if r in ("OK", "EXPECTEDFAIL"):
            ok += 1
        else:
            bad += 1
except OSError:
    bad += 1
print(ok, bad)
PY
)
	passed=$((passed + $1))
	failed=$((failed + $2))
}

# suite DIR [meson options...]: configure, build, run the suite.
suite() {
	dir=$1
	shift
	note "suite in $dir $*"
	if [ ! -f "$dir/build.ninja" ]; then
		meson setup "$dir" "$@" >/dev/null || { failed=$((failed + 1)); return; }
	fi
	if ! ninja -C "$dir"; then
		failed=$((failed + 1))
		return
	fi
	meson test -C "$dir" --print-errorlogs --num-processes 2
	count "$dir"
}

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tools/tsan.supp"

suite build
suite build-asan -Db_sanitize=address,undefined
suite build-tsan -Db_sanitize=thread

note "format (clang-format, .clang-format)"
if git ls-files '*.c' '*.h' | xargs clang-format --dry-run --Werror; then
	passed=$((passed + 1))
else
	echo "format: run clang-format -i on the files above"
	failed=$((failed + 1))
fi

note "fuzz targets, ${FUZZ_SECONDS}s each"
if [ ! -f build-fuzz/build.ninja ]; then
	CC=clang meson setup build-fuzz -Dfuzz=true \
		-Db_sanitize=address,undefined -Db_lundef=false >/dev/null
fi
for f in test/fuzz/*_fuzz.c; do
	name=$(basename "$f" .c)
	mkdir -p "build-fuzz/corpus-$name"
	log="build-fuzz/$name.log"
	if ninja -C build-fuzz "test/fuzz/$name" >/dev/null &&
		"build-fuzz/test/fuzz/$name" -max_total_time="$FUZZ_SECONDS" \
			-print_final_stats=1 -artifact_prefix=build-fuzz/ \
			"build-fuzz/corpus-$name" >"$log" 2>&1; then
		tail -3 "$log"
		passed=$((passed + 1))
	else
		tail -40 "$log" 2>/dev/null
		echo "fuzz: $name failed"
		failed=$((failed + 1))
	fi
done

echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

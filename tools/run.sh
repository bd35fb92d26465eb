#!/bin/sh
# run.sh - install what is missing, build, and run the main job.
set -eu
cd "$(dirname "$0")/.."
. tools/deps.sh
[ -f build/build.ninja ] || meson setup build >/dev/null
ninja -C build
exec build/cli/mcpkeep run "$@"

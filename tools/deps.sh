#!/bin/sh
# deps.sh - install whatever this project needs that is missing.
# Sourced by tools/run.sh and tools/test.sh; safe to run again.
set -eu

# (chromium: the status page's test runs in a real browser; curl: the
# README's curl lines are run as printed; openssl: the private_key_jwt
# tests make their keys; postgresql, libpq-dev: the cluster's shared store,
# test/pg.sh starts a throwaway server; systemd: systemd-analyze verifies
# the installed unit; man-db: man --warnings checks the man pages)
MK_APT_PACKAGES="gcc clang libclang-rt-14-dev clang-format meson ninja-build
pkg-config cmake python3 libnng-dev libmsgpack-dev libcurl4-openssl-dev
libsqlite3-dev libjansson-dev libssl-dev libmicrohttpd-dev chromium curl
openssl postgresql libpq-dev systemd man-db"

mk_missing=""
for p in $MK_APT_PACKAGES; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
		grep -q "install ok installed"; then
		mk_missing="$mk_missing $p"
	fi
done
if [ -n "$mk_missing" ]; then
	echo "deps: installing$mk_missing"
	if [ "$(id -u)" -ne 0 ]; then
		echo "deps: need root to install packages" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# shellcheck disable=SC2086
	apt-get install -y -qq --no-install-recommends $mk_missing >/dev/null
fi

# The real MCP/OAuth peers the integration tests run (npm, pinned).
"$(dirname "$0")/peers.sh"

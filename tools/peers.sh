#!/bin/sh
# peers.sh - install the real MCP/OAuth peers the integration tests run
# (test/peers: pinned versions in package.json + package-lock.json).
#
# Installs node and npm from Debian if they are missing, then runs `npm ci`
# in test/peers when test/peers/node_modules is missing or older than the
# lock file (a stamp file inside node_modules records the last good
# install).  Says what it installs; on failure prints the tool's output and
# fails.  Run it (./tools/peers.sh, from anywhere) or source it from a
# script in tools/: the work happens in a subshell, so a caller's
# directory, traps and variables are left alone.
set -eu

mk_peers_install() (
	cd "$(dirname "$0")/.."
	[ -f test/peers/package-lock.json ] || {
		echo "peers.sh: run from the repository's tools/ folder" >&2
		exit 1
	}
	peers=test/peers
	stamp=$peers/node_modules/.mk-peers-stamp
	log=$(mktemp)
	trap 'rm -f "$log"' EXIT

	run_quiet() {
		if ! "$@" >"$log" 2>&1; then
			echo "peers.sh: failed: $*" >&2
			cat "$log" >&2
			exit 1
		fi
	}

	if ! command -v node >/dev/null 2>&1 ||
		! command -v npm >/dev/null 2>&1; then
		export DEBIAN_FRONTEND=noninteractive
		run_quiet apt-get update -qq
		run_quiet apt-get install -y -qq nodejs npm
	fi

	major=$(node -p 'process.versions.node.split(".")[0]')
	if [ "$major" -lt 20 ]; then
		echo "peers.sh: warning: node $(node --version) is older" \
			"than 20; oauth2-mock-server 8.2.3 wants ^20.19" >&2
	fi

	# POSIX find -newer: non-empty when the lock (or package.json)
	# changed after the last successful install.
	if [ ! -f "$stamp" ] ||
		[ -n "$(find "$peers/package-lock.json" "$peers/package.json" \
			-newer "$stamp")" ]; then
		echo "peers: installing the MCP and OAuth peers the tests run (npm ci in $peers)"
		run_quiet npm ci --prefix "$peers" --no-audit --no-fund \
			--loglevel=error
		touch "$stamp"
	fi
)

mk_peers_install

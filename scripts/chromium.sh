#!/usr/bin/env bash
# Debian's chromium for the status page's browser test (docs/OPERATIONS.md,
# Status page): `install` installs the package when no chromium is on PATH;
# `path` prints the binary the test uses. Nothing is downloaded outside
# Debian's package archive.
set -euo pipefail

find_chromium() {
	for c in "${WINDOWD_CHROMIUM:-}" chromium chromium-browser; do
		if [ -n "$c" ] && command -v "$c" >/dev/null 2>&1; then
			command -v "$c"
			return 0
		fi
	done
	return 1
}

case "${1:-}" in
install)
	if p=$(find_chromium); then
		echo "chromium: $p ($("$p" --version 2>/dev/null || echo 'version unknown'))"
		exit 0
	fi
	sudo=""
	if [ "$(id -u)" -ne 0 ]; then
		sudo="sudo"
	fi
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get update -q
	$sudo apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core
	p=$(find_chromium) || { echo "chromium: apt-get installed chromium but it is not on PATH" >&2; exit 1; }
	echo "chromium: $p ($("$p" --version))"
	;;
path)
	find_chromium || { echo "chromium: not installed (bash scripts/chromium.sh install)" >&2; exit 1; }
	;;
*)
	echo "usage: $0 install|path" >&2
	exit 2
	;;
esac

#!/usr/bin/env bash
# bench/peers/build.sh — build the Kafka Streams and Flink peers of
# bench/compare.sh from Maven Central with mvn.
#
#   bash bench/peers/build.sh            build both (quiet; online only the first time)
#   bash bench/peers/build.sh kstreams   build one
#
# Each peer's pom.xml packages its jar into <peer>/target/ and copies its
# runtime jars into <peer>/target/lib/; run one with
#   java -cp '<peer>/target/peer-<peer>.jar:<peer>/target/lib/*' windowd.peers.<Main> ...
# (bench/compare.sh does). Maven's local repository is
# $WINDOWD_PEERS_CACHE/m2 (default $HOME/.cache/windowd/peers/m2), so the
# build leaves ~/.m2 alone; once a pom has built, later builds of the same
# pom run offline (-o). A build is skipped when the jar is newer than the
# pom and every source file.
#
# Needs: Java 17+ (JAVA_HOME is honoured), Maven 3.8+.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${WINDOWD_PEERS_CACHE:-${HOME:-/root}/.cache/windowd/peers}
repo=$cache/m2
mkdir -p "$repo"
command -v mvn >/dev/null || { echo "build.sh: mvn not found" >&2; exit 1; }

peers=("$@")
[ ${#peers[@]} -gt 0 ] || peers=(kstreams flink)

for p in "${peers[@]}"; do
	dir=$here/$p
	[ -f "$dir/pom.xml" ] || { echo "build.sh: no peer $p" >&2; exit 2; }
	jar=$dir/target/peer-$p.jar
	if [ -f "$jar" ] && [ -d "$dir/target/lib" ] &&
		[ -z "$(find "$dir/pom.xml" "$dir/src" -newer "$jar" -type f | head -1)" ]; then
		continue
	fi
	stamp=$cache/$p.pom.cksum
	sum=$(cksum <"$dir/pom.xml")
	offline=()
	[ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sum" ] && offline=(-o)
	echo "build.sh: building $p${offline:+ (offline)}" >&2
	log=$cache/$p.build.log
	rm -rf "$dir/target/lib" # no jar of an older pom left on the class path
	if ! mvn -B -q -Dstyle.color=never "${offline[@]}" -Dmaven.repo.local="$repo" -f "$dir/pom.xml" \
		package >"$log" 2>&1; then
		echo "build.sh: mvn failed for $p; last lines of $log:" >&2
		tail -30 "$log" >&2
		exit 1
	fi
	echo "$sum" >"$stamp"
done

#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The oci-rdma-hook benchmark: bash bench/run.sh [--quick] [--keep] [--output=FILE]
#
# Builds the hook (release) into build-bench/ and the harness (bench/harness.c), generates
# the sample nodes into a temporary directory, measures, prints the table with PASS/FAIL
# per budget, writes docs/PERFORMANCE.md and exits 1 when a budget fails. Needs root
# (runc), runc, busybox-static, python3 and strace, which names the files the hook reads
# (tests/setup-debian.sh installs them). About 5-6 minutes; --quick takes fewer rounds
# (about 1 minute) and is meant for a look, not for the record.
set -euo pipefail

cd "$(dirname "$0")/.."
repo=$PWD
build=$repo/build-bench

for a in "$@"; do
	case "$a" in
	--quick | --keep | --output=*) ;;
	-h | --help)
		sed -n '3,10p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "bench: unknown argument '$a' (--quick, --keep, --output=FILE)" >&2
		exit 2
		;;
	esac
done

if [ "$(id -u)" != 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		exec sudo -- bash "$0" "$@"
	fi
	echo "bench: run as root (runc needs it)" >&2
	exit 2
fi

for tool in meson ninja cc python3 runc strace; do
	command -v "$tool" >/dev/null 2>&1 || {
		echo "bench: '$tool' not found; run tests/setup-debian.sh" >&2
		exit 2
	}
done

# build-bench/ belongs to the benchmark: configured with the project's default options
# (as installed) in release mode, and set up again when meson_options.txt changes, so
# that a changed default (say, static linking) is what gets measured.
stamp=$(cat meson_options.txt | md5sum | cut -d' ' -f1)
if [ ! -f "$build/build.ninja" ] || [ "$(cat "$build/.bench-stamp" 2>/dev/null)" != "$stamp" ]; then
	echo "bench: configuring $build (buildtype=release)" >&2
	rm -rf "$build"
	meson setup "$build" -Dbuildtype=release -Db_ndebug=true >/dev/null
	echo "$stamp" >"$build/.bench-stamp"
fi
echo "bench: building oci-rdma-hook" >&2
meson compile -C "$build" oci-rdma-hook >/dev/null
if [ ! -x "$build/bench-harness" ] || [ bench/harness.c -nt "$build/bench-harness" ]; then
	cc -O2 -Wall -Wextra -o "$build/bench-harness" bench/harness.c -lm
fi
# linked like the hook (statically), so that the two start alike; with the hook's own
# seccomp filter, which its build generates (bench/readfiles.c --confine), and jansson,
# with which the floors of the container paths parse the state and the spec
if [ ! -x "$build/bench-readfiles" ] || [ bench/readfiles.c -nt "$build/bench-readfiles" ] ||
	[ "$build/src/seccomp-filter.h" -nt "$build/bench-readfiles" ]; then
	cc -O2 -Wall -Wextra -static -I "$build/src" -o "$build/bench-readfiles" bench/readfiles.c \
		-ljansson
fi
if [ ! -x "$build/bench-execwrap" ] || [ bench/execwrap.c -nt "$build/bench-execwrap" ]; then
	cc -O2 -Wall -Wextra -static -o "$build/bench-execwrap" bench/execwrap.c
fi

# the seccomp filter's load and per-call cost (part 1c), with the hook's filter
if [ ! -x "$build/bench-filtercost" ] || [ bench/filtercost.c -nt "$build/bench-filtercost" ] ||
	[ "$build/src/seccomp-filter.h" -nt "$build/bench-filtercost" ]; then
	cc -O2 -Wall -Wextra -I "$build/src" -o "$build/bench-filtercost" bench/filtercost.c -lseccomp
fi
if [ ! -x "$build/bench-noop" ] || [ bench/execwrap.c -nt "$build/bench-noop" ]; then
	cc -O2 -Wall -Wextra -static -DEXECWRAP_NOOP -o "$build/bench-noop" bench/execwrap.c
fi

# the floor plugin of part 7c, with the project's own multiplexer and ttrpc framing
if [ ! -x "$build/bench-nri-floor" ] || [ bench/nri_floor.c -nt "$build/bench-nri-floor" ]; then
	cc -O2 -Wall -Wextra -Wno-format-truncation -D_GNU_SOURCE -static -I include \
		-o "$build/bench-nri-floor" bench/nri_floor.c src/base/ttrpc.c src/base/pbwire.c \
		src/base/util.c
fi

exec python3 bench/bench.py --hook "$build/src/oci-rdma-hook" --harness "$build/bench-harness" \
	--readfiles "$build/bench-readfiles" --execwrap "$build/bench-execwrap" --noop "$build/bench-noop" \
	--filtercost "$build/bench-filtercost" --nri-floor "$build/bench-nri-floor" "$@"

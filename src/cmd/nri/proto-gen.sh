#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# NRI's messages (api.proto, api_container.proto, api_common.proto, in this directory) made
# into C with protoc-c (protobuf-c 1.4: Debian's protobuf-c-compiler):
#
#   proto-gen.sh           writes api*.pb-c.c and api*.pb-c.h beside the .proto files
#   proto-gen.sh --check   writes them into a temporary directory and compares them with the
#                          checked-in ones: 0 when they are the same, 1 (with the diff) when
#                          not, 77 (skipped) without protoc-c or with a protoc-c of another
#                          version than $made_by (whose output differs in its version
#                          checks). The test nri-proto-gen.
#
# The files are made by protoc-c $made_by alone: another version is refused (a newer one
# changes made_by, and the files with it).
#
# The .proto files set protobuf-c's file options (protobuf-c/protobuf-c.proto), which import
# google/protobuf/descriptor.proto: from $PROTOBUF_INCLUDE, else /usr/include or
# /usr/local/include (libprotobuf-dev), else Debian's python3-grpc-tools' copy.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
protos="api.proto api_container.proto api_common.proto"
made_by="protobuf-c 1.4.1"

if ! command -v protoc-c >/dev/null 2>&1; then
	echo "proto-gen.sh: protoc-c not found (protobuf-c-compiler)" >&2
	[ "${1:-}" = --check ] && exit 77
	exit 1
fi
version=$(protoc-c --version 2>/dev/null | head -n 1)
if [ "$version" != "$made_by" ]; then
	echo "proto-gen.sh: protoc-c is '$version', the files are $made_by's" >&2
	[ "${1:-}" = --check ] && exit 77
	exit 1
fi

inc=
for d in ${PROTOBUF_INCLUDE:-} /usr/include /usr/local/include \
	 /usr/lib/python3/dist-packages/grpc_tools/_proto; do
	if [ -n "$d" ] && [ -f "$d/google/protobuf/descriptor.proto" ]; then
		inc=$d
		break
	fi
done
if [ -z "$inc" ]; then
	echo "proto-gen.sh: google/protobuf/descriptor.proto not found (libprotobuf-dev," \
	     "python3-grpc-tools, or PROTOBUF_INCLUDE)" >&2
	exit 1
fi
pbc=
for d in /usr/include /usr/local/include; do
	[ -f "$d/protobuf-c/protobuf-c.proto" ] && pbc=$d && break
done
if [ -z "$pbc" ]; then
	echo "proto-gen.sh: protobuf-c/protobuf-c.proto not found (libprotobuf-c-dev)" >&2
	exit 1
fi

# the file names as given here are what the generated files name: run from this directory
gen() {
	(cd "$here" && protoc-c -I. -I"$pbc" -I"$inc" --c_out="$1" $protos)
}

if [ "${1:-}" != --check ]; then
	gen "$here"
	exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gen "$tmp"
status=0
for p in $protos; do
	for ext in .pb-c.c .pb-c.h; do
		f=${p%.proto}$ext
		if ! diff -u "$here/$f" "$tmp/$f"; then
			echo "not ok: src/cmd/nri/$f is not what protoc-c makes of $p" \
			     "(run src/cmd/nri/proto-gen.sh)" >&2
			status=1
		fi
	done
done
[ "$status" = 0 ] && echo "ok: the generated files are what protoc-c makes of $protos"
exit "$status"

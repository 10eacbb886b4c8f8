#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The runtime shim's fast path (src/cmd/shim_fast.c, orh/cmd/shimfast.h), as a process runs
# it: a command that passes through executes the runtime before the C library starts
# (strace shows none of the ordinary path's calls, such as the socket to syslog it opens
# first, before the runtime's execve), once the ordinary path wrote the runtime cache for
# the config; every case where
# the cache cannot be trusted takes the ordinary path, which executes the same runtime or
# refuses as it always did. Needs root (the cache is root's, under /run/oci-rdma-hook)
# and strace; skips (77) without them. Also: the fast path's object needs no relocation
# at run time, and the hook linked as a static PIE (where the build is static) runs it;
# the shim never executes itself; a candidate the runtime's lookup passed over that
# becomes usable is seen; a FIFO at config.json is not waited on; it runs in 8 KiB of
# stack.
# Environment: ORH_HOOK (the built binary), ORH_SHIM_FAST_LIB (the fast path's archive),
# ORH_HOOK_PIE (the hook linked with -static-pie; none in a dynamic build).
set -u
HOOK=${ORH_HOOK:?}
LIB=${ORH_SHIM_FAST_LIB:-}
PIE=${ORH_HOOK_PIE:-}
RUN=/run/oci-rdma-hook
. "$(dirname "$0")/tap.sh"
if [ "$(id -u)" != 0 ] || ! command -v strace >/dev/null; then
	cant_run "needs root and strace"
fi
case $(uname -m) in x86_64) ;; *) echo "SKIP: the fast path is x86_64's" >&2; exit 77 ;; esac
T=$(mktemp -d /tmp/orh-shim-fast.XXXXXX)
cleanup() {
	for f in "$RUN"/.shim-runtime-*; do
		[ -f "$f" ] && sed -n 2p "$f" | grep -q " $T/" && rm -f "$f"
	done
	rm -rf "$T"
}
trap cleanup EXIT
mkdir -p "$RUN"

ln -s "$HOOK" "$T/oci-rdma-runtime"
cat >"$T/fake-runc" <<EOF
#!/bin/sh
printf '%s\n' "\$0" "\$@" >"$T/args"
EOF
chmod 755 "$T/fake-runc"
printf '[containers]\nruntime = %s\n' "$T/fake-runc" >"$T/node.conf"
export OCI_RDMA_HOOK_CONFIG=$T/node.conf
cache() { grep -l " $T/node.conf\$" "$RUN"/.shim-runtime-* 2>/dev/null | head -1; }

# shim ARGS...: run $SHIM (the shim's link) under strace, $PRE before it; $T/path says
# "fast" (no C library start before the runtime $RT was executed) or "ordinary"; $T/args
# holds the runtime's argv, or nothing; $T/rc the exit code (124: still running after 20 s)
SHIM=$T/oci-rdma-runtime RT=$T/fake-runc PRE=
shim() {
	rm -f "$T/args" "$T/trace"
	# shellcheck disable=SC2086
	timeout 20 strace -f -qq -e trace=execve,socket -o "$T/trace" $PRE "$SHIM" "$@" \
		>"$T/out" 2>"$T/err"
	echo $? >"$T/rc"
	# the shim's own process: the calls before the first execve of the runtime that
	# succeeded
	awk -v rt="$RT" '
		NR == 1 { pid = $1 }
		$1 == pid && /socket\(/ { lib = 1 }
		$1 == pid && /execve\(/ && index($0, "\"" rt "\"") && / = 0$/ { done = 1; exit }
		END { print (done && !lib) ? "fast" : "ordinary" }' "$T/trace" >"$T/path"
}
path_is() { [ "$(cat "$T/path")" = "$1" ]; }
args_are() { [ "$(tr '\n' ' ' <"$T/args" 2>/dev/null)" = "$* " ]; }

# 0. the fast path runs before the C library has applied any relocation (in a static PIE):
# every relocation of its object's code and data is relative to where it is used and
# resolved when the binary is linked (none an address to fill in at run time, none through
# the GOT), and it refers to no symbol but the library's _start
if [ -n "$LIB" ]; then
	readelf -rW "$LIB" | awk '/^Relocation section/ { sec = $3; next }
		$3 ~ /^R_/ && sec !~ /^.\.rela\.debug/ { print sec, $3, $5 }' >"$T/relocs"
	awk '$2 != "R_X86_64_PC32" && $2 != "R_X86_64_PLT32"' "$T/relocs" >"$T/relocs.bad"
	check "the fast path's object: its relocations of code and data read" \
		grep -q "^'.rela.text' R_X86_64_PC32 " "$T/relocs"
	check "... none needs processing at run time" test ! -s "$T/relocs.bad"
	sed 's/^/# /' "$T/relocs.bad"
	nm -u "$LIB" | awk 'NF == 2 { print $2 }' >"$T/undef"
	check "... it refers to no symbol but _start" bash -c "[ \"\$(cat '$T/undef')\" = _start ]"
	sed 's/^/# undefined: /' "$T/undef"
else
	echo "ok - # SKIP the fast path's object not given (ORH_SHIM_FAST_LIB)"
fi

# 1. no cache yet: the ordinary path executes the runtime and writes the cache
shim --root /run/x --log /l.json --log-format json start c1
check "without a cache, start takes the ordinary path" path_is ordinary
check "... and executes the runtime with the shim's arguments" \
	args_are "$T/fake-runc" --root /run/x --log /l.json --log-format json start c1
C=$(cache)
check "... and writes the runtime cache for the config" test -n "$C"
check "the cache is root's, 0644, and names the runtime" bash -c \
	"[ \"\$(stat -c '%u %a' '$C')\" = '0 644' ] && tail -n 1 '$C' | grep -qx 'R $T/fake-runc'"

# 2. with it, every command that passes through is executed before the C library starts
for cmd in start state kill; do
	shim --root /run/x "$cmd" c1
	check "$cmd: the fast path" path_is fast
	check "$cmd: the runtime gets the same arguments" args_are "$T/fake-runc" --root /run/x "$cmd" c1
done
shim --root /run/x kill c1 9
check "kill with a signal: the fast path, the signal passed on" bash -c \
	"[ \"\$(cat '$T/path')\" = fast ] && [ \"\$(tail -n 1 '$T/args')\" = 9 ]"
# (a dynamic build's loader makes its own calls first: the last ones before the runtime)
check "the fast path reads the cache, the config's stat, the runtime's and its own, nothing else" \
	bash -c "strace -qq -o '$T/calls' '$T/oci-rdma-runtime' start c1 &&
	 [ \"\$(awk -F'(' 'NR>1 && /^execve/ {exit} NR>1 {print \$1}' '$T/calls' | tail -n 8 |
	       tr '\n' ' ')\" = 'openat fstat read read close newfstatat newfstatat newfstatat ' ]"

# 2b. the create of a pod's sandbox, which the shim never serves: the fast path too
mkdir -p "$T/pause" "$T/work"
printf '{"ociVersion":"1.1.0","process":{"args":["/pause"]},"annotations":{"io.kubernetes.cri.container-type":"sandbox","io.kubernetes.cri.sandbox-id":"p1"}}' \
	>"$T/pause/config.json"
sed 's/"sandbox"/"container"/' "$T/pause/config.json" >"$T/work/config.json"
cp "$T/pause/config.json" "$T/pause.orig"
shim --root /run/x create --bundle "$T/pause" --pid-file "$T/pid" p1
check "a sandbox's create: the fast path" path_is fast
check "... the runtime gets the same arguments" \
	args_are "$T/fake-runc" --root /run/x create --bundle "$T/pause" --pid-file "$T/pid" p1
check "... and its config.json is left as it was" cmp -s "$T/pause/config.json" "$T/pause.orig"
(cd "$T/pause" && shim create p1)
check "a sandbox's create in its bundle (no --bundle): the fast path" path_is fast
shim create --bundle "$T/work" c3
check "a workload container's create: the ordinary path" path_is ordinary
printf '{"annotations":{"io.kubernetes.cri.container-type":"sandbox","io.kubernetes.cri.container\\u002dtype":"container"}}' \
	>"$T/work/config.json"
shim create --bundle "$T/work" c3
check "a sandbox key written twice, once escaped: the ordinary path decides" path_is ordinary

# 3. what the shim edits or cleans up stays on the ordinary path
for cmd in create run delete; do
	shim --root /run/x "$cmd" --bundle "$T/no-bundle" c2
	check "$cmd: the ordinary path" path_is ordinary
done
shim --orh-runtime="$T/fake-runc" start c1
check "a runtime named on the command line (docker): the ordinary path" path_is ordinary

# 4. a config changed since the cache was written: the ordinary path, which writes it anew
echo "# edited" >>"$T/node.conf"
shim start c1
check "a changed config: the ordinary path" path_is ordinary
shim start c1
check "... then the fast path again, the cache written anew" path_is fast

# 5. a cache that is not root's alone is never taken, and the ordinary path replaces it
chmod 666 "$(cache)"
shim start c1
check "a cache others may write: the ordinary path" path_is ordinary
check "... which makes it root's 0644 again" bash -c "[ \"\$(stat -c %a '$(cache)')\" = 644 ]"
chown 65534 "$(cache)"
shim start c1
check "a cache of another owner: the ordinary path" path_is ordinary
C=$(cache)
printf 'oci-rdma-runtime cache 2\nC 1 2 3 4 5 6 7 %s\nR /bin/false\n' "$T/node.conf" >"$C"
shim start c1
check "a cache of another stat of the config: the ordinary path, the config's runtime" \
	bash -c "[ \"\$(cat '$T/path')\" = ordinary ] && [ \"\$(head -n 1 '$T/args')\" = '$T/fake-runc' ]"

# 6. the runtime gone: the fast path leaves it, the ordinary path refuses as always
shim start c1
check "(the fast path again)" path_is fast
mv "$T/fake-runc" "$T/fake-runc.away"
shim --log "$T/runc.log" --log-format json start c1
check "the runtime gone: the shim fails the command" bash -c "[ \"\$(cat '$T/rc')\" != 0 ]"
check "... with the ordinary path's reason" grep -q "fake-runc" "$T/err"
mv "$T/fake-runc.away" "$T/fake-runc"

# 7. caches of configs that are gone are removed when a cache is written
printf 'oci-rdma-runtime cache 2\nC 1 2 3 4 5 6 7 %s\nR /usr/sbin/runc\n' "$T/gone.conf" \
	>"$RUN/.shim-runtime-00000000deadbeef"
echo "# edited again" >>"$T/node.conf"
shim start c1
check "a config that is gone: its cache removed as another is written" \
	test ! -e "$RUN/.shim-runtime-00000000deadbeef"
rm -f "$RUN/.shim-runtime-00000000deadbeef"

# 7b. a shim killed while it writes the cache: what it left goes with the next write
echo "# edited once more" >>"$T/node.conf"
{ (strace -qq -o /dev/null -e inject=renameat:signal=KILL:when=1 "$T/oci-rdma-runtime" start c1 \
	>/dev/null 2>&1); } 2>/dev/null
check "a write killed before its rename leaves its temporary file" bash -c "[ \"\$(ls -A '$RUN' |
	grep -c '^\.\.shim-runtime-.*\.orh-')\" -ge 1 ]"
shim start c1
check "... which the next write removes" bash -c "! ls -A '$RUN' | grep -q '^\.\.shim-runtime-.*\.orh-'"
shim start c1
check "... and the cache it wrote is taken" path_is fast

# 8. a config that names no runtime: the one the shim finds on its runtime path, cached with
# the directories it looked in (test_shimfast: a directory that changes undoes it)
RUNC=$(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin command -v runc)
if [ -n "$RUNC" ]; then
	printf '[containers]\n' >"$T/node.conf"
	strace -f -qq -e trace=execve -o "$T/trace" "$T/oci-rdma-runtime" state no-such-c >/dev/null 2>&1
	check "no runtime in the config: the ordinary path finds $RUNC" \
		grep -q "execve(\"$RUNC\"" "$T/trace"
	check "... and caches it with the directories it looked in" bash -c \
		"grep -q '^R $RUNC\$' '$(cache)' && grep -q '^[D-] .* /usr/sbin\$' '$(cache)'"
	shim state no-such-c
	awk -v rt="$RUNC" 'NR == 1 { pid = $1 } $1 == pid && /socket\(/ { lib = 1 }
		$1 == pid && /execve\(/ && index($0, "\"" rt "\"") { done = 1; exit }
		END { exit !(done && !lib) }' "$T/trace"
	check "... which the fast path then executes" test $? = 0
else
	echo "ok - # SKIP no runc on the shim's runtime path"
fi

# 9. the runtime the cache names became the shim (a link to it put in its place): the fast
# path never executes it (named oci-rdma-runtime, it would execute itself for ever; named
# runc, the program would run as no command at all); the ordinary path refuses it
printf '[containers]\nruntime = %s\n' "$T/fake-runc" >"$T/node.conf" # as before part 8
mkdir -p "$T/rt"
for name in oci-rdma-runtime runc; do
	cp "$T/fake-runc" "$T/rt/$name"
	printf '[containers]\nruntime = %s\n' "$T/rt/$name" >"$T/self.conf"
	OCI_RDMA_HOOK_CONFIG=$T/self.conf RT=$T/rt/$name shim start c1
	OCI_RDMA_HOOK_CONFIG=$T/self.conf RT=$T/rt/$name shim start c1
	check "a runtime named $name in the cache: the fast path (before it is replaced)" \
		path_is fast
	ln -sf "$HOOK" "$T/rt/$name"
	OCI_RDMA_HOOK_CONFIG=$T/self.conf timeout 20 "$T/oci-rdma-runtime" --log "$T/self.log" \
		start c1 >"$T/out" 2>"$T/err"
	echo $? >"$T/rc"
	check "... replaced by a link to the shim: the shim ends (not executing itself)" \
		bash -c "[ \"\$(cat '$T/rc')\" != 124 ]"
	check "... and fails the command: the runtime is the shim itself" bash -c \
		"[ \"\$(cat '$T/rc')\" = 1 ] &&
		 grep -q \"runtime '$T/rt/$name' is this shim itself\" '$T/err'"
done

# 10. a FIFO at a sandbox's config.json: the fast path does not wait for a writer, it
# leaves the bundle to the ordinary path, which does not read it either
mkdir -p "$T/fifo"
mkfifo "$T/fifo/config.json"
shim start c1
shim start c1
check "(the cache for node.conf taken)" path_is fast
shim --root /run/x create --bundle "$T/fifo" p2
check "a FIFO at config.json: the shim does not wait on it" bash -c "[ \"\$(cat '$T/rc')\" != 124 ]"
check "... the ordinary path decides" path_is ordinary
check "... and executes the runtime, the bundle as it was" bash -c \
	"[ \"\$(tr '\n' ' ' <'$T/args')\" = \
	   '$T/fake-runc --root /run/x create --bundle $T/fifo p2 ' ] &&
	 [ -p '$T/fifo/config.json' ]"

# 11. the fast path in the hook linked as a static PIE (ET_DYN, relocated by the C library's
# start, after the fast path ran): what containerd gives every command, --root and --log
if [ -n "$PIE" ]; then
	mkdir -p "$T/pie"
	ln -s "$PIE" "$T/pie/oci-rdma-runtime"
	check "the hook linked as a static PIE is ET_DYN" bash -c \
		"readelf -h '$PIE' | grep -Eq '^ *Type: +DYN '"
	SHIM=$T/pie/oci-rdma-runtime shim start c1 # the cache for node.conf, as it is now
	for cmd in start state; do
		SHIM=$T/pie/oci-rdma-runtime shim --root /run/x --log "$T/l.json" \
			--log-format json "$cmd" c1
		check "static PIE, $cmd with --root and --log: the fast path" path_is fast
		check "... the runtime gets the same arguments" args_are "$T/fake-runc" \
			--root /run/x --log "$T/l.json" --log-format json "$cmd" c1
	done
	SHIM=$T/pie/oci-rdma-runtime shim --root /run/x --log "$T/l.json" create --bundle \
		"$T/pause" --pid-file "$T/pid" p1
	check "static PIE, a sandbox's create with --root and --log: the fast path" path_is fast
	check "... the runtime gets the same arguments" args_are "$T/fake-runc" --root /run/x \
		--log "$T/l.json" create --bundle "$T/pause" --pid-file "$T/pid" p1
else
	echo "ok - # SKIP no static PIE of the hook (a dynamic build)"
fi

# 12. its stack: a sandbox's create, an annotation nested as deep as the scanner goes (256
# arrays and objects), under a stack limit of 64 and 16 KiB (of which the kernel's random
# offset of the stack's start takes up to 8 KiB, and the arguments and environment their
# size: only the config's variable, as they must fit in a quarter of the limit)
mkdir -p "$T/deep"
{
	printf '{"annotations":{"deep":'
	for _ in $(seq 128); do printf '[{"k":'; done
	printf 'null'
	for _ in $(seq 128); do printf '}]'; done
	printf ',"io.kubernetes.cri.container-type":"sandbox"}}'
} >"$T/deep/config.json"
for bin in "$T/oci-rdma-runtime" ${PIE:+"$T/pie/oci-rdma-runtime"}; do
	kind=$([ "$bin" = "$T/oci-rdma-runtime" ] && echo "the hook" || echo "the static PIE")
	for kib in 64 16; do
		SHIM=$bin PRE="env -i OCI_RDMA_HOOK_CONFIG=$T/node.conf $(command -v prlimit) \
			--stack=$((kib * 1024)) --" shim create --bundle "$T/deep" p4
		check "$kind, a sandbox's create nested 256 deep, stack limited to $kib KiB: fast" \
			path_is fast
	done
done

# 13. a runtime looked up on the shim's runtime path past a candidate it passed over (not
# executable; a link to nothing): that one made usable changes no directory, but the
# cache holds it too. In a private mount namespace where /usr/local/sbin and
# /usr/local/bin, the path's first two directories, are empty tmpfs.
lookup_cases() {
	local name=orh-fake-runtime c
	PASSES=0 FAILS=0
	if ! mount -t tmpfs -o mode=755 orh-test /usr/local/sbin ||
		! mount -t tmpfs -o mode=755 orh-test /usr/local/bin; then
		not_ok "tmpfs over /usr/local/sbin and /usr/local/bin"
		echo "$PASSES $FAILS" >"$T/counts"
		return
	fi
	install -m 755 "$T/fake-runc" "/usr/local/bin/$name"
	install -m 644 "$T/fake-runc" "/usr/local/sbin/$name"
	printf '[containers]\nruntime = %s\n' "$name" >"$T/lookup.conf"
	export OCI_RDMA_HOOK_CONFIG=$T/lookup.conf
	RT=/usr/local/bin/$name
	shim start c1
	shim start c1
	check "looked up past one not executable: the fast path executes the one found" bash -c \
		"[ \"\$(cat '$T/path')\" = fast ] && [ \"\$(head -n 1 '$T/args')\" = '$RT' ]"
	c=$(grep -l " $T/lookup.conf\$" "$RUN"/.shim-runtime-* | head -1)
	check "... the cache holds the one passed over" grep -q "^F .* /usr/local/sbin/$name\$" "$c"
	chmod 755 "/usr/local/sbin/$name"
	RT=/usr/local/sbin/$name
	shim start c1
	check "... made executable: that one is executed" bash -c \
		"[ \"\$(head -n 1 '$T/args')\" = '$RT' ]"
	shim start c1
	check "... then by the fast path" path_is fast
	rm "/usr/local/sbin/$name"
	ln -s "$T/later-runtime" "/usr/local/sbin/$name"
	RT=/usr/local/bin/$name
	shim start c1
	shim start c1
	check "looked up past a link to nothing: the fast path executes the one found" bash -c \
		"[ \"\$(cat '$T/path')\" = fast ] && [ \"\$(head -n 1 '$T/args')\" = '$RT' ]"
	cp "$T/fake-runc" "$T/later-runtime"
	RT=/usr/local/sbin/$name
	shim start c1
	check "... the link's target made: the link is executed" bash -c \
		"[ \"\$(head -n 1 '$T/args')\" = '$RT' ]"
	echo "$PASSES $FAILS" >"$T/counts"
}
export T RUN HOOK SHIM RT PRE
export -f lookup_cases shim check ok not_ok path_is
rm -f "$T/counts"
unshare -m --propagation private bash -c lookup_cases
if read -r p f <"$T/counts"; then
	PASSES=$((PASSES + p)) FAILS=$((FAILS + f))
else
	not_ok "the runtime lookup's cases ran in a private mount namespace (unshare -m)"
fi

echo "$PASSES passed, $FAILS failed"
[ "$FAILS" = 0 ]

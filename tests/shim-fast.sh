#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The runtime shim's fast path (src/cmd/shim_fast.c, orh/shimfast.h), as a process runs
# it: a command that passes through executes the runtime before the C library starts
# (strace shows none of the ordinary path's calls, such as the socket to syslog it opens
# first, before the runtime's execve), once the ordinary path wrote the runtime cache for
# the config; every case where
# the cache cannot be trusted takes the ordinary path, which executes the same runtime or
# refuses as it always did. Needs root (the cache is root's, under /run/oci-rdma-hook)
# and strace; skips (77) without them.
# Environment: ORH_HOOK (the built binary).
set -u
HOOK=${ORH_HOOK:?}
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

# shim ARGS...: run it under strace; $T/path says "fast" (no C library start before the
# runtime was executed) or "ordinary"; $T/args holds the runtime's argv, or nothing
shim() {
	rm -f "$T/args" "$T/trace"
	strace -f -qq -e trace=execve,socket -o "$T/trace" "$T/oci-rdma-runtime" "$@" \
		>"$T/out" 2>"$T/err"
	echo $? >"$T/rc"
	# the shim's own process: the calls before the first execve of the runtime
	awk -v rt="$T/fake-runc" '
		NR == 1 { pid = $1 }
		$1 == pid && /socket\(/ { lib = 1 }
		$1 == pid && /execve\(/ && index($0, "\"" rt "\"") { done = 1; exit }
		END { print (done && !lib) ? "fast" : "ordinary" }' "$T/trace" >"$T/path"
}
path_is() { [ "$(cat "$T/path")" = "$1" ]; }
args_are() { [ "$(tr '\n' ' ' <"$T/args" 2>/dev/null)" = "$* " ]; }

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
check "the fast path reads the config's stat and the cache, nothing else" bash -c \
	"strace -qq -o '$T/calls' '$T/oci-rdma-runtime' start c1 &&
	 [ \"\$(awk -F'(' 'NR>1 && /^execve/ {exit} NR>1 {print \$1}' '$T/calls' | tail -n 6 |
	       tr '\n' ' ')\" = 'openat fstat read read close newfstatat ' ]"

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
printf 'oci-rdma-runtime cache 1\nC 1 2 3 4 5 6 7 %s\nR /bin/false\n' "$T/node.conf" >"$C"
shim start c1
check "a cache of another stat of the config: the ordinary path, the config's runtime" \
	bash -c "[ \"\$(cat '$T/path')\" = ordinary ] && [ \"\$(head -n 1 '$T/args')\" = '$T/fake-runc' ]"

# 6. the runtime gone: the fast path's execve fails, the ordinary path refuses as always
shim start c1
check "(the fast path again)" path_is fast
mv "$T/fake-runc" "$T/fake-runc.away"
shim --log "$T/runc.log" --log-format json start c1
check "the runtime gone: the shim fails the command" bash -c "[ \"\$(cat '$T/rc')\" != 0 ]"
check "... with the ordinary path's reason" grep -q "fake-runc" "$T/err"
mv "$T/fake-runc.away" "$T/fake-runc"

# 7. caches of configs that are gone are removed when a cache is written
printf 'oci-rdma-runtime cache 1\nC 1 2 3 4 5 6 7 %s\nR /usr/sbin/runc\n' "$T/gone.conf" \
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

echo "$PASSES passed, $FAILS failed"
[ "$FAILS" = 0 ]

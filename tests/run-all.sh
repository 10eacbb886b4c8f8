#!/usr/bin/env bash
# The whole test suite: installs what it needs (Debian 12, root), builds, and runs the
# unit, black-box and end-to-end tests, then the same suite under ASan+UBSan.
# Usage: bash tests/run-all.sh [--quick]   (--quick: skip the sanitizer pass)
#
# Two lanes at once. In the background, at the lowest priority, what starts no engine on
# this machine and changes nothing on it: the unit and fuzz suites, the VM lane (a kernel of
# its own under qemu; the guest sees this machine's root read-only), the RPM package (built
# and installed into a scratch root), then the ASan build and its unit and fuzz suites (the
# cli suite runs the binary on this machine's /run/oci-rdma-hook, as the hook in the
# end-to-end tests does: it stays in the foreground). In the foreground, one end-to-end test
# at a time, the rest of the plain build; then, once the background lane has ended, the
# Debian package (installed on this machine while it runs: nothing else runs beside it) and
# the rest of the ASan build's tests.
# Each test runs once, in one lane; every lane's results are counted the same way.
set -uo pipefail
cd "$(dirname "$0")/.."
quick=0
[ "${1:-}" == "--quick" ] && quick=1

bash tests/setup-debian.sh || { echo "setup failed"; exit 1; }

RES=$(mktemp -d /tmp/orh-run-all.XXXXXX)
trap 'rm -rf "$RES"' EXIT
: >"$RES/counts"

# build DIR SETUP-ARGS...: configure and compile DIR; a failure counts as a failed test
build() {
	local dir=$1
	shift
	if [ -d "$dir" ]; then
		meson setup --reconfigure "$dir" "$@" >"$dir.setup.log" 2>&1
	else
		meson setup "$dir" "$@" >"$dir.setup.log" 2>&1
	fi || { cat "$dir.setup.log"; echo "0 1 0 $dir: meson setup" >>"$RES/counts"; return 1; }
	meson compile -C "$dir" || { echo "0 1 0 $dir: meson compile" >>"$RES/counts"; return 1; }
}

# run_tests DIR LOGBASE MESON-TEST-ARGS...: the tests, logged as DIR/meson-logs/LOGBASE.*
# (LOGBASE-sh.* with the wrapper sh), counted into $RES/counts; the last lines of each
# failed test into $RES/tails
run_tests() {
	local dir=$1 base=$2 log
	shift 2
	rm -f "$dir/meson-logs/$base".json "$dir/meson-logs/$base"-*.json
	meson test -C "$dir" --no-rebuild --print-errorlogs --num-processes 2 --logbase "$base" "$@"
	log=$(ls "$dir/meson-logs/$base".json "$dir/meson-logs/$base"-*.json 2>/dev/null | head -1)
	local p=0 s=0 f=1
	if [ -n "$log" ] && [ -s "$log" ]; then
		p=$(grep -c '"result": "OK"' "$log" || true)
		s=$(grep -c '"result": "SKIP"' "$log" || true)
		f=$(grep -Evc '"result": "(OK|SKIP)"' "$log" || true)
	else
		echo "$dir ($base): no test ran, counted as a failure"
	fi
	echo "$dir ($base): $p passed, $f failed, $s skipped"
	echo "$p $f $s $dir ($base)" >>"$RES/counts"
	[ "$f" = 0 ] || [ -z "$log" ] || python3 -c '
import json, sys
for line in open(sys.argv[1]):
    t = json.loads(line)
    if t["result"] not in ("OK", "SKIP"):
        out = (t.get("stdout") or "").splitlines()[-25:]
        print("\n--- " + sys.argv[2] + ": " + t["name"] + " (" + t["result"] + "), its last lines:")
        print("\n".join(out))' "$log" "$dir" >>"$RES/tails"
}

# the ASan+UBSan build. Its tests leave out the VM lane (tests/vm), the Debian and RPM
# packages (which build their own binary) and the Kubernetes lane (the paths of e2e-nri and
# e2e-cri, through a kubelet): they run once, in the plain build
ASAN_SETUP=(-Dstatic=false -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug)
ASAN_SKIP=(--no-suite vm --no-suite package --no-suite k8s)
asan() {
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 "$@"
}

build build-test -Db_sanitize=none && plain=1 || plain=0

# ---- the background lane -----------------------------------------------------------------
# At the lowest priority. Where the kernel groups processes by session (autogroup), it
# shares the CPU among the groups first and nice counts only inside a group, and meson test
# starts every test in a session of its own: so the lane runs in a session of its own, its
# group's nice 19, and each of its tests sets its own group's (LOW, meson test's wrapper).
LOW='echo 19 >/proc/self/autogroup 2>/dev/null; exec "$0" "$@"'
background() {
	echo 19 >/proc/self/autogroup 2>/dev/null
	renice -n 19 -p $$ >/dev/null
	# the unit and fuzz suites, the VM lane and the RPM package (suite rpm)
	[ $plain = 1 ] && run_tests build-test bg --wrapper "sh -c '$LOW'" \
		--suite unit --suite fuzz --suite vm --suite rpm
	if [ $quick = 0 ] && build build-asan "${ASAN_SETUP[@]}"; then
		touch "$RES/asan-built"
		asan run_tests build-asan bg --wrapper "sh -c '$LOW'" "${ASAN_SKIP[@]}" \
			--suite unit --suite fuzz
	fi
}
setsid -w bash -c "$(declare -f build run_tests asan background)
	$(declare -p RES ASAN_SETUP ASAN_SKIP LOW plain quick)
	background" >"$RES/background.log" 2>&1 &
bg_pid=$!
# interrupted: the background lane's session ends too (meson test ends the tests it started)
trap 'kill -TERM -- -"$bg_pid" 2>/dev/null; exit 130' INT TERM

# ---- the foreground lane -------------------------------------------------------------------
[ $plain = 1 ] && run_tests build-test fg --no-suite unit --no-suite fuzz --no-suite vm --no-suite package
wait "$bg_pid"
echo "=== the background lane (unit, fuzz, VM, RPM package; the ASan build, its unit and fuzz suites) ==="
cat "$RES/background.log"
echo "=== the background lane ended ==="
# the Debian package (suite package, but for the RPM's): installs itself on this machine
[ $plain = 1 ] && run_tests build-test deb --suite package --no-suite rpm
[ -e "$RES/asan-built" ] &&
	asan run_tests build-asan fg "${ASAN_SKIP[@]}" --no-suite unit --no-suite fuzz

# the failed tests again, at the end, where a log cut to its first and last lines keeps them
[ -s "$RES/tails" ] && cat "$RES/tails"
read -r total_pass total_fail < <(awk '{ p += $1; f += $2 } END { print p + 0, f + 0 }' "$RES/counts")
echo "tests: $total_pass passed, $total_fail failed"
[ "$total_fail" = 0 ]

#!/usr/bin/env bash
# The whole test suite: installs what it needs (Debian 12, root), builds, and runs the
# unit, black-box and end-to-end tests, then the same suite under ASan+UBSan.
# Usage: bash tests/run-all.sh [--quick]   (--quick: skip the sanitizer pass)
set -uo pipefail
cd "$(dirname "$0")/.."
quick=0
[ "${1:-}" == "--quick" ] && quick=1

bash tests/setup-debian.sh || { echo "setup failed"; exit 1; }

total_pass=0 total_fail=0 failed_tails=""
run_suite() { # builddir, meson setup args...  ($TEST_ARGS: extra `meson test` arguments)
	local dir=$1
	shift
	if [ -d "$dir" ]; then
		meson setup --reconfigure "$dir" "$@" >"$dir.setup.log" 2>&1
	else
		meson setup "$dir" "$@" >"$dir.setup.log" 2>&1
	fi || { cat "$dir.setup.log"; total_fail=$((total_fail + 1)); return; }
	if ! meson compile -C "$dir"; then
		total_fail=$((total_fail + 1))
		return
	fi
	# shellcheck disable=SC2086
	meson test -C "$dir" --print-errorlogs --num-processes 2 ${TEST_ARGS:-}
	local log="$dir/meson-logs/testlog.json"
	local p s f
	p=$(grep -c '"result": "OK"' "$log" || true)
	s=$(grep -c '"result": "SKIP"' "$log" || true)
	f=$(grep -Evc '"result": "(OK|SKIP)"' "$log" || true)
	echo "$dir: $p passed, $f failed, $s skipped"
	if [ "$f" != 0 ]; then
		failed_tails+=$(python3 -c '
import json, sys
for line in open(sys.argv[1]):
    t = json.loads(line)
    if t["result"] not in ("OK", "SKIP"):
        out = (t.get("stdout") or "").splitlines()[-25:]
        print("\n--- " + sys.argv[2] + ": " + t["name"] + " (" + t["result"] + "), its last lines:")
        print("\n".join(out))' "$log" "$dir")
	fi
	total_pass=$((total_pass + p))
	total_fail=$((total_fail + f))
}

run_suite build-test -Db_sanitize=none
if [ $quick = 0 ]; then
	# the VM lane (tests/vm), the Debian package (tests/package.sh, which builds its own
	# binary) and the Kubernetes lane (the paths of e2e-nri and e2e-cri, through a kubelet)
	# run once, in the plain build
	TEST_ARGS="--no-suite vm --no-suite package --no-suite k8s" ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
		UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 run_suite build-asan -Dstatic=false -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug
fi
# the failed tests again, at the end, where a log cut to its first and last lines keeps them
[ -z "$failed_tails" ] || printf '%s\n' "$failed_tails"
echo "tests: $total_pass passed, $total_fail failed"
[ $total_fail = 0 ]

# SPDX-License-Identifier: Apache-2.0
# TAP output for the shell tests (sourced by tests/e2e/lib.sh, tests/cli.sh,
# tests/spec-cli.sh, tests/shim-fast.sh, tests/package.sh, tests/package-rpm.sh): each
# check is one "ok - ..." or "not ok - ..." line, counted in
# PASSES and FAILS; cant_run skips (exit 77), or fails under CI=true, where everything the
# test needs is installed.

PASSES=${PASSES:-0}
FAILS=${FAILS:-0}

cant_run() {
	if [ "${CI:-}" = true ]; then
		echo "FAIL: cannot run: $*" >&2
		exit 1
	fi
	echo "SKIP: $*" >&2
	exit 77
}

ok() {
	PASSES=$((PASSES + 1))
	echo "ok - $*"
}

not_ok() {
	FAILS=$((FAILS + 1))
	echo "not ok - $*"
}

# check DESCRIPTION COMMAND...: record the outcome of a command
check() {
	local what=$1
	shift
	if "$@"; then ok "$what"; else not_ok "$what"; fi
}

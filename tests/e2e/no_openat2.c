/* SPDX-License-Identifier: Apache-2.0 */
/*
 * no_openat2 COMMAND [ARGS...]: run COMMAND with openat2(2) failing with ENOSYS, the way
 * it fails on kernels older than 5.6, so that the component-walk fallback of
 * src/apply/rootfs.c is what resolves paths. The filter is inherited across exec.
 */
#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	scmp_filter_ctx ctx;
	int r;

	if (argc < 2) {
		fputs("usage: no_openat2 COMMAND [ARGS...]\n", stderr);
		return 2;
	}
	ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx) {
		fputs("no_openat2: seccomp_init failed\n", stderr);
		return 1;
	}
	r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(openat2), 0);
	if (r == 0)
		r = seccomp_load(ctx);
	seccomp_release(ctx);
	if (r < 0) {
		fprintf(stderr, "no_openat2: installing the filter: %s\n", strerror(-r));
		return 1;
	}
	execvp(argv[1], argv + 1);
	fprintf(stderr, "no_openat2: exec '%s': %s\n", argv[1], strerror(errno));
	return 127;
}

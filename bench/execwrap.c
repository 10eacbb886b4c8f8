/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The least any runtime shim costs (bench/bench.py, part 3c): a static program that
 * executes its arguments, as oci-rdma-runtime executes runc. Without arguments it exits 0
 * at once: the start of a static binary that does nothing. Built with EXECWRAP_NOOP it
 * exits 0 whatever its arguments: a runtime that does nothing (part 3g).
 */
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
#ifdef EXECWRAP_NOOP
	return 0;
#endif
	if (argc < 2)
		return 0;
	execv(argv[1], argv + 1);
	perror(argv[1]);
	return 127;
}

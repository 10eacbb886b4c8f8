/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vm_regmr DEVICE MIB: register MIB MiB of fresh memory with ibv_reg_mr on DEVICE, the
 * way NCCL registers its buffers, and print one line: "regmr DEVICE MIB ok" or
 * "regmr DEVICE MIB failed: STEP: ERROR". Exit 0 only on success. The VM lane runs it
 * as uid 1000 with no capability: pinning that much then depends on RLIMIT_MEMLOCK alone.
 */
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static int fail(const char *dev, unsigned long mib, const char *step, int e)
{
	printf("regmr %s %lu failed: %s: %s\n", dev, mib, step, strerror(e));
	return 1;
}

int main(int argc, char **argv)
{
	struct ibv_device **list = NULL;
	struct ibv_context *ctx = NULL;
	struct ibv_pd *pd = NULL;
	struct ibv_mr *mr = NULL;
	unsigned long mib;
	size_t len;
	void *buf;
	int n = 0;

	if (argc != 3) {
		fprintf(stderr, "usage: vm_regmr DEVICE MIB\n");
		return 2;
	}
	mib = strtoul(argv[2], NULL, 10);
	len = (size_t)mib << 20;
	list = ibv_get_device_list(&n);
	if (!list)
		return fail(argv[1], mib, "ibv_get_device_list", errno);
	for (int i = 0; i < n && !ctx; i++)
		if (strcmp(ibv_get_device_name(list[i]), argv[1]) == 0)
			ctx = ibv_open_device(list[i]);
	if (!ctx)
		return fail(argv[1], mib, "ibv_open_device", errno ? errno : ENODEV);
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		return fail(argv[1], mib, "ibv_alloc_pd", errno);
	buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		return fail(argv[1], mib, "mmap", errno);
	memset(buf, 1, len);
	mr = ibv_reg_mr(pd, buf, len,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!mr)
		return fail(argv[1], mib, "ibv_reg_mr", errno);
	printf("regmr %s %lu ok\n", argv[1], mib);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}

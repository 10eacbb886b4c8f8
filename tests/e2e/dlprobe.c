// SPDX-License-Identifier: Apache-2.0
/* What NCCL's loading of libibverbs finds in a container: dlopen("libibverbs.so.1") (after
 * "libibverbs.so", as NCCL tries them), the path the loader took it from, and how many
 * devices its ibv_get_device_list() lists. Dynamically linked: it runs on the image's own
 * loader and glibc. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <link.h>
#include <stdio.h>

int main(void)
{
	void *h = dlopen("libibverbs.so", RTLD_NOW);
	struct link_map *lm = NULL;
	void *(*list)(int *);
	int n = -1;

	if (!h)
		h = dlopen("libibverbs.so.1", RTLD_NOW);
	if (!h) {
		printf("libibverbs none: %s\n", dlerror());
		return 0;
	}
	if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm)
		printf("libibverbs %s\n", lm->l_name);
	list = (void *(*)(int *))dlsym(h, "ibv_get_device_list");
	if (!list)
		printf("devices none: no ibv_get_device_list\n");
	else if (list(&n))
		printf("devices %d\n", n);
	else
		printf("devices none: %s\n", strerror(errno));
	return 0;
}

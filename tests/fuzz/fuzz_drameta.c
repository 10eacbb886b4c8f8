/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: a container's KEP-5304 device metadata file (src/node/drameta.c), its text as
 * one request's file of a claim, and the input up to its first NUL as the file's path in the
 * container. A refusal names the file; a device kept is the file's driver's, with a name of
 * names' characters and attributes of their formats, found again by its pciBusID; a path
 * accepted has its three names non-empty. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "orh/node/drameta.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FILE_PATH ORH_DRA_META_DIR "/resourceclaimtemplates/rdma/nic/rdma.orh.test-metadata.json"

static void check_device(const struct orh_dra_meta *m, const struct orh_dra_device *d)
{
	if (!d->name[0] || strcmp(d->from.driver, "rdma.orh.test") ||
	    strspn(d->name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/") !=
		    strlen(d->name))
		abort();
	if (d->pci_bus_id[0] &&
	    (strlen(d->pci_bus_id) < 12 || !orh_dra_meta_find(m, d->pci_bus_id)))
		abort();
	if (d->pcie_root[0] && strncmp(d->pcie_root, "pci", 3))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct orh_dra_file f;
	struct orh_dra_meta m = { 0 };
	struct orh_err err = { 0 };
	char *path = malloc(size + 1);

	if (!path)
		return 0;
	memcpy(path, data, size);
	path[size] = '\0';
	if (orh_dra_meta_path(path, &f) && (!f.claim[0] || !f.request[0] || !f.driver[0]))
		abort();
	free(path);
	if (!orh_dra_meta_path(FILE_PATH, &f))
		abort();
	if (orh_dra_meta_parse((const char *)data, size, FILE_PATH, &f, &m, &err) == 0) {
		for (size_t i = 0; i < m.n; i++)
			check_device(&m, &m.v[i]);
	} else if (strncmp(err.msg, "DRA device metadata '" FILE_PATH "'",
			   sizeof("DRA device metadata '" FILE_PATH "'") - 1)) {
		abort();
	}
	orh_dra_meta_free(&m);
	return 0;
}

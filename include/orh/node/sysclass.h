/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The RDMA classes of sysfs as the host has them (src/node/sysclass.c): each class
 * directory's symlinks and regular files, read into a struct orh_sysview, whose keep, subset,
 * counts and id orh_sysview_decide() fills (orh/decide/sysview_decide.h). orh/apply/sysview.h tells the
 * whole of the container's view.
 */
#ifndef ORH_NODE_SYSCLASS_H
#define ORH_NODE_SYSCLASS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "orh/node/inventory.h"
#include "orh/base/util.h"

#define ORH_SYSVIEW_N_CLASSES 3
/* "infiniband", "infiniband_verbs", "infiniband_mad" */
extern const char *const orh_sysview_classes[ORH_SYSVIEW_N_CLASSES];

/* Entries and files a class directory may hold before it is refused (a node holds far
 * fewer: 2 per port for infiniband_mad). */
#define ORH_SYSVIEW_MAX_ENTRIES 4096
#define ORH_SYSVIEW_MAX_FILES 16
#define ORH_SYSVIEW_FILE_MAX_BYTES 4096

/* One symlink of a class directory. */
struct orh_sysview_link {
	char name[ORH_NAME_MAX];     /* "mlx5_0", "uverbs0", "umad1" */
	char ibdev[ORH_NAME_MAX];    /* the device it belongs to: the name itself for
				      * infiniband, its "ibdev" file for the others (empty
				      * when unreadable) */
	char target[PATH_MAX];       /* the symlink's target, as the host has it */
	bool keep;                   /* orh_sysview_decide(): the container sees it */
};

/* One regular file of a class directory (abi_version). */
struct orh_sysview_file {
	char name[ORH_NAME_MAX];
	char *data;
	size_t len;
};

struct orh_sysview_class {
	bool present;                /* the host has this class directory */
	struct orh_sysview_link *links;
	size_t n_links;
	struct orh_sysview_file *files;
	size_t n_files;
};

struct orh_sysview {
	struct orh_sysview_class cls[ORH_SYSVIEW_N_CLASSES];
	/* orh_sysview_decide(): some entry is left out, so the container gets the view */
	bool subset;
	size_t kept_devs, all_devs;  /* entries of infiniband kept, and there */
	char id[17];                 /* what is kept, hashed (hex): the directory's name */
};

/* Read the three class directories under <sysroot>/sys/class: each symlink's name and
 * target (and the ibdev file of the verbs and mad entries), each regular file. A missing
 * class is not present; other entries (a directory) are skipped. -errno, naming the path,
 * only when a directory cannot be listed or holds too much. */
int orh_sysview_read(const char *sysroot, struct orh_sysview *v, struct orh_err *err);
void orh_sysview_free(struct orh_sysview *v);

#endif

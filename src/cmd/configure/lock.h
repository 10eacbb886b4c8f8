/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lock.c: configure and install take turns on a root, for cmd_configure.c.
 */
#ifndef ORH_CONFIGURE_LOCK_H
#define ORH_CONFIGURE_LOCK_H

#include <limits.h>
#include <stdbool.h>

#include "orh/base/util.h"

/* How long a run waits for another one on the same root before it gives up. */
#define ORH_CONFIGURE_LOCK_WAIT_MS 5000

struct orh_cfg_lock {
	int fd;                   /* the lock file, held; -1: none */
	int dirfd;                /* its directory (O_PATH) */
	char name[NAME_MAX + 1];  /* its name there */
	bool sticky;              /* the directory is writable by others, with the sticky bit */
};

#define ORH_CFG_LOCK_INIT { .fd = -1, .dirfd = -1 }

/* The lock of the root rootfd (dir: its name, "" for /), taken within
 * ORH_CONFIGURE_LOCK_WAIT_MS. Where the process may not make or open the lock file (EACCES,
 * EPERM, EROFS) and optional is set, 0 is returned with no lock held (lk->fd -1): a run
 * that writes nothing goes on without it. -errno with err naming the lock file, and on a
 * timeout the pid that holds it. */
int orh_configure_lock(int rootfd, const char *dir, bool optional, struct orh_cfg_lock *lk,
		       struct orh_err *err);
/* Let go of lk (its file removed first, so that nothing is left where it was). */
void orh_configure_unlock(struct orh_cfg_lock *lk);

#endif

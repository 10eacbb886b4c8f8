/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The container's mounts (src/apply/mount.c): whether one propagates, and bind mounts
 * into its mount namespace from a child.
 */
#ifndef ORH_APPLY_MOUNT_H
#define ORH_APPLY_MOUNT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "orh/apply/target.h"
#include "orh/base/util.h"

/* Is mount `mnt` of the target's mount namespace a shared one (/proc/<pid>/mountinfo
 * "shared:N"), so that a mount made on it propagates to its peers, the host's included? */
int orh_mount_is_shared(const struct orh_target *t, uint64_t mnt, bool *shared,
			struct orh_err *err);

/* The same, and where it is mounted in that namespace (its mount point as mountinfo
 * writes it, into point, when not NULL). */
int orh_mount_info(const struct orh_target *t, uint64_t mnt, bool *shared, char *point,
		   size_t size, struct orh_err *err);

/* The same, and its file system's type (mountinfo's field after "-": "tmpfs"). */
int orh_mount_fstype(const struct orh_target *t, uint64_t mnt, bool *shared, char *fstype,
		     size_t size, struct orh_err *err);

/* Run fn(arg) in a forked child and hand its int result, then out_size bytes of `out`
 * (which fn fills in the child), back over a pipe. The child may setns; the parent's
 * namespaces never change. -errno when the child could not be run or died; else 0 with
 * *child_rc = fn's result. */
int orh_run_in_child(int (*fn)(void *), void *arg, void *out, size_t out_size,
		     int *child_rc, struct orh_err *err);

/* Enter the target's mount namespace (in a child orh_run_in_child() runs): 0 or -errno. */
int orh_enter_mntns(const struct orh_target *t);

/* Bind-mount the file behind src_fd (any fd; host mount namespace) onto the file behind
 * target_fd (an O_PATH fd inside the container) in the mount namespace of the target
 * (setns on its pidfd; its ns/mnt before Linux 5.8), from a forked child. With
 * `readonly`, the new mount is read-only. */
int orh_bind_into_container(const struct orh_target *t, int src_fd, int target_fd,
			    bool readonly, struct orh_err *err);
/* The same with the mount attributes attr_set (MOUNT_ATTR_RDONLY, _NOSUID, _NODEV,
 * _NOEXEC: mount_setattr(2)) set on the new mount. */
int orh_bind_into_container_attr(const struct orh_target *t, int src_fd, int target_fd,
				 uint64_t attr_set, struct orh_err *err);
/* n of them (at most ORH_BIND_MAX) from one child, which enters the namespace once:
 * src_fds[i] onto target_fds[i], in order; *done: how many were made (on a failure, the
 * ones before it stay). */
#define ORH_BIND_MAX 32
int orh_bind_many_into_container(const struct orh_target *t, const int *src_fds,
				 const int *target_fds, size_t n, uint64_t attr_set, size_t *done,
				 struct orh_err *err);

/* A new tmpfs (fsopen: options "size" and "mode" as given, nosuid, nodev, noexec) mounted
 * onto the directory behind target_fd (an O_PATH fd inside the container) in the target's
 * mount namespace, from a child: 0 or -errno with err filled. */
int orh_tmpfs_into_container(const struct orh_target *t, int target_fd, const char *size,
			     const char *mode, struct orh_err *err);

#endif

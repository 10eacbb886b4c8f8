/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The container's process, held from the start of the hook, and the checks that it is
 * the container of the bundle (src/apply/target.c).
 */
#ifndef ORH_APPLY_TARGET_H
#define ORH_APPLY_TARGET_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "orh/base/util.h"

/* The most of /proc/<pid>/mountinfo read */
#define ORH_MOUNTINFO_MAX (4 * 1024 * 1024)

/* The container's process, held from the start of the hook: every step that reads
 * /proc/<pid> or acts on the number checks afterwards that this process is still there,
 * so that what it read or did was this process's (a number is not reused before its
 * process is reaped). */
struct orh_target {
	pid_t pid;
	int pidfd;   /* pidfd_open(pid); -1 before Linux 5.3 (procfd alone then) */
	int procfd;  /* /proc/<pid>, opened after the pidfd and checked against it */
};

/* Take hold of pid: its pidfd, then its /proc directory. */
int orh_target_open(pid_t pid, struct orh_target *t, struct orh_err *err);
void orh_target_close(struct orh_target *t);
/* 0 while the process has not been reaped; -ESRCH ("pid N exited while <during>"). */
int orh_target_alive(const struct orh_target *t, const char *during, struct orh_err *err);
/* Read /proc/<pid>/<file> (at most max bytes) through procfd, then check that the
 * process is still there. */
int orh_target_read(const struct orh_target *t, const char *file, size_t max, char **out,
		    struct orh_err *err);

struct orh_fileid {
	dev_t dev;
	ino_t ino;
};

/* What the hook sees of the process, for orh_target_judge(). */
struct orh_target_view {
	bool pivoted;               /* its root is not the hook's root */
	struct orh_fileid root;     /* its root directory */
	struct orh_fileid want;     /* root.path, as the hook (the runtime's namespace) sees it */
	bool own_mntns;             /* not pivoted: its mount namespace is not the hook's */
	int seen_errno;             /* not pivoted: root.path could not be opened in it */
	struct orh_fileid seen;     /* not pivoted: root.path looked up in its namespace */
	bool mount_point;           /* not pivoted: root.path is a mount point there */
};

/* Is the process the container the runtime is creating from a bundle with this
 * root.path? After pivot_root (or chroot) its root must be root.path. Before it (runc's
 * and crun's createRuntime and prestart), it must be in a mount namespace other than the
 * hook's (which is the runtime's), and in it root.path must be the same directory as the
 * hook's root.path and a mount point (the runtime bind-mounts the rootfs onto itself
 * there before the hooks run). 0, or -EPERM naming the pid and what did not match. */
int orh_target_judge(pid_t pid, const char *rootfs, const struct orh_target_view *v,
		     struct orh_err *err);
/* Does /proc/<pid>/mountinfo text (modified in place) list `path` (absolute) as a mount
 * point? Repeated slashes, "." components and a trailing slash in path do not count. */
bool orh_mountinfo_has_mount_point(char *text, const char *path);
/* Look at the process and judge it; on success *out is the container's rootfs, an
 * O_PATH directory fd: its root after pivot_root, before it root.path looked up in its
 * mount namespace (where the rootfs and its /dev are mounted). */
int orh_target_open_rootfs(const struct orh_target *t, const char *rootfs, int *out,
			   struct orh_err *err);
/* The same for container id, created and not started by the runtime (the NRI plugin at
 * StartContainer, told its pid by the runtime; no bundle): one of the process's cgroups must
 * name id (as the CRI runtimes name a container's), and neither its root nor its mount
 * namespace may be the caller's. *out: its root, an O_PATH directory fd; *readonly: that
 * root is mounted read-only (the runtime remounts a read-only root before the start). */
int orh_target_open_started(const struct orh_target *t, const char *id, int *out,
			    bool *readonly, struct orh_err *err);

#endif

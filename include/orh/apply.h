/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Appliers: the thin parts of the live hook that change a running container
 * (src/container/{rootfs,devices,cgroup,rlimit,ncclconf,netns}.c). Each applies one part
 * of a struct orh_plan and nothing else; none of them logs (util.h error contract).
 *
 * Every path inside a container's root filesystem is resolved from one rootfs directory
 * fd with openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS), or by a component-by-component
 * walk (O_NOFOLLOW at each step, symlinks resolved by us against a stack of directory
 * fds, never above the root) where openat2 is missing and where directories must be
 * created; the final operation is a *at() call on the parent directory fd with a single
 * name that is never followed.
 */
#ifndef ORH_APPLY_H
#define ORH_APPLY_H

#include <jansson.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "orh/plan.h"
#include "orh/util.h"

/* ---- target.c ---------------------------------------------------------------- */

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

/* ---- rootfs.c ---------------------------------------------------------------- */

/* True once the component walk replaced openat2 (which failed with ENOSYS). */
bool orh_rootfs_fallback_active(void);

/* Open a trusted host directory as a rootfs fd (O_PATH | O_DIRECTORY). */
int orh_rootfs_open(const char *path, int *out, struct orh_err *err);

/* "Any mount" where a mount id is asked for (mount ids start at 0). */
#define ORH_MOUNT_ANY UINT64_MAX

/* The mount id of the file behind fd (statx STATX_MNT_ID, or /proc/self/fdinfo where
 * statx has none and with the walk). 0 or -errno. */
int orh_fd_mount_id(int fd, uint64_t *id);
/* Is mount `mnt` of the target's mount namespace a shared one (/proc/<pid>/mountinfo
 * "shared:N"), so that a mount made on it propagates to its peers, the host's included? */
int orh_mount_is_shared(const struct orh_target *t, uint64_t mnt, bool *shared,
			struct orh_err *err);

/* Resolve directory `path` inside the root (symlinks resolved as the container would,
 * never leaving the root). With `create`, missing directories are made with mode 0755.
 * With mnt (a mount id, or ORH_MOUNT_ANY), the directory must be on that mount and a missing
 * one is made only inside a directory on it: -EXDEV otherwise, nothing created there.
 * *out is an O_PATH directory fd. */
int orh_rootfs_dir(int rootfd, const char *path, bool create, uint64_t mnt, int *out,
		   struct orh_err *err);
/* Resolve the parent of `path` (see orh_rootfs_dir) and copy the final component, which
 * the caller must act on with *at() calls that do not follow it. */
int orh_rootfs_parent(int rootfd, const char *path, bool create, uint64_t mnt, int *dirfd,
		      char name[NAME_MAX + 1], struct orh_err *err);
/* The container's /dev: the root's own "dev" (made when missing), never through a
 * symlink, and whatever the runtime mounted on it (its tmpfs). */
int orh_rootfs_devdir(int rootfd, int *out, struct orh_err *err);

/* Run fn(arg) in a forked child and hand its int result, then out_size bytes of `out`
 * (which fn fills in the child), back over a pipe. The child may setns; the parent's
 * namespaces never change. -errno when the child could not be run or died; else 0 with
 * *child_rc = fn's result. */
int orh_run_in_child(int (*fn)(void *), void *arg, void *out, size_t out_size,
		     int *child_rc, struct orh_err *err);

/* Bind-mount the file behind src_fd (any fd; host mount namespace) onto the file behind
 * target_fd (an O_PATH fd inside the container) in the mount namespace of the target
 * (setns on its pidfd; its ns/mnt before Linux 5.8), from a forked child. With
 * `readonly`, the new mount is read-only. */
int orh_bind_into_container(const struct orh_target *t, int src_fd, int target_fd,
			    bool readonly, struct orh_err *err);

/* ---- devices.c --------------------------------------------------------------- */

struct orh_devices_result {
	unsigned created;   /* mknod'ed */
	unsigned kept;      /* already present with the right type and numbers */
	unsigned bound;     /* bind-mounted from the host (mknod gave EPERM) */
	struct orh_strv warnings; /* device nodes found with other numbers; the caller frees */
};

/* Make each node in the container: mknod with the plan's numbers and mode; on EPERM
 * bind-mount <host_root>/<path> after checking its st_rdev. The target is needed only for
 * that bind mount. Existing correct nodes are left alone; a device node there with other
 * numbers (the spec's, or the image's) is replaced, with a warning in res->warnings
 * (filled on failure too). Nodes are made only on the mount of the container's /dev
 * (orh_rootfs_devdir): a node whose directory is on another mount is kept when it is
 * already right, and is otherwise an -EXDEV error. */
int orh_devices_apply(int rootfd, const struct orh_target *t, const char *host_root,
		      const struct orh_devnode *nodes, size_t n, struct orh_devices_result *res,
		      struct orh_err *err);

/* ---- cgroup.c ---------------------------------------------------------------- */

struct orh_cgroup_result {
	bool v1;            /* devices.allow written */
	unsigned v2_progs;  /* BPF device programs replaced in the v2 cgroup */
	bool v2_open;       /* v2 cgroup has no device program: nothing to grant */
};

/* Allow "c MAJ:MIN rwm" for each node to the cgroups of the target (its
 * /proc/<pid>/cgroup): cgroup v1 devices controller when mounted, and the cgroup v2 BPF
 * device programs when any. */
int orh_cgroup_grant(const struct orh_target *t, const struct orh_devnode *nodes, size_t n,
		     struct orh_cgroup_result *res, struct orh_err *err);
/* The v2 part on an open cgroup directory fd (tests). *replaced = programs swapped. */
int orh_cgroup_v2_grant_fd(int cgfd, const struct orh_devnode *nodes, size_t n,
			   unsigned *replaced, bool *open, struct orh_err *err);

/* ---- rlimit.c ---------------------------------------------------------------- */

enum orh_memlock_outcome {
	ORH_MEMLOCK_RAISED = 0,   /* soft and hard set to the plan's limit */
	ORH_MEMLOCK_SOFT_ONLY,    /* hard limit could not be raised (EPERM): soft = hard */
	ORH_MEMLOCK_ALREADY,      /* the limits were already at least the plan's */
};

struct orh_memlock_result {
	enum orh_memlock_outcome outcome;
	uint64_t soft;      /* the limits now (RLIM_INFINITY as UINT64_MAX) */
	uint64_t hard;
};

/* Does the spec's process.rlimits list `type` ("RLIMIT_MEMLOCK")? */
bool orh_spec_has_rlimit(const json_t *spec, const char *type);
/* Raise RLIMIT_MEMLOCK of the target to limit (ORH_MEMLOCK_UNLIMITED = infinity).
 * Never lowers a limit. prlimit() takes a number: the target is checked to be still
 * there after each call. */
int orh_memlock_apply(const struct orh_target *t, uint64_t limit,
		      struct orh_memlock_result *res, struct orh_err *err);

/* ---- ncclconf.c -------------------------------------------------------------- */

#define ORH_NCCL_CONF_MAX_BYTES (1024 * 1024)
#define ORH_NCCL_MARK_BEGIN "# oci-rdma-hook begin: generated at container start, do not edit"
#define ORH_NCCL_MARK_END "# oci-rdma-hook end"

/* Merge env into the text of an existing /etc/nccl.conf (old may be NULL): every line of
 * the image is kept except a block an earlier run wrote (a well-formed one only: the begin
 * marker, NAME=VALUE lines, the end marker; a begin marker without its end, or any other
 * line between the markers, makes the lines the image's), and
 * NAME=VALUE is appended in a new block for each name the image does not define.
 * Returns the new text (malloc'd, NUL-terminated); *n_added = lines appended. Entries
 * with names or values that cannot be written as NCCL reads them are an error. */
int orh_ncclconf_merge(const char *old, size_t len, const struct orh_env_entry *env,
		       size_t n_env, char **out, size_t *n_added, struct orh_err *err);

struct orh_ncclconf_result {
	size_t added;
	bool bind_mounted;          /* read-only rootfs: generated file bound over it */
	bool foreign;               /* ... over a file on another mount than the root's */
	char generated[PATH_MAX];   /* the generated file outside the container, or "" */
};

/* Write the merged /etc/nccl.conf into the rootfs (temp file in /etc, renameat). With
 * readonly (spec root.readonly) or on EROFS, the file is written to
 * <state_dir>/nccl.conf, with the owner and the permission bits of the file it covers,
 * and bind-mounted read-only over an existing /etc/nccl.conf in the mount namespace of
 * the target. A symlink, FIFO or directory at /etc/nccl.conf is refused. Nothing is written on
 * another mount than the root's: where /etc or the file is on one (a volume), an existing
 * file is covered the same way unless that mount is shared, and no file is made there
 * (-EXDEV). */
int orh_ncclconf_apply(int rootfd, const struct orh_target *t, bool readonly,
		       const char *state_dir, const struct orh_env_entry *env, size_t n_env,
		       struct orh_ncclconf_result *res, struct orh_err *err);

/* ---- netns.c ----------------------------------------------------------------- */

#define ORH_NETNS_MAX_ADDRS 64

struct orh_netns_info {
	char default_if[IFNAMSIZ];  /* IPv4 default route's interface, "" when none */
	struct in_addr addrs[ORH_NETNS_MAX_ADDRS]; /* IPv4 addresses (not loopback) */
	size_t n_addrs;
};

/* Read a network namespace's IPv4 addresses and default route (rtnetlink) from a forked
 * child that setns()-es into nspath. */
int orh_netns_read(const char *nspath, struct orh_netns_info *out, struct orh_err *err);
/* The same for the namespace the target is in, from /proc/<pid>/net/route and
 * /proc/<pid>/net/fib_trie: no child, no namespace change. */
int orh_netns_read_target(const struct orh_target *t, struct orh_netns_info *out,
			  struct orh_err *err);
/* Pure parsers of those two files (exported for tests): the local IPv4 addresses
 * ("/32 host LOCAL" entries, loopback left out) and the default route's interface. */
void orh_netns_parse_fib_trie(const char *text, struct orh_netns_info *out);
void orh_netns_parse_route(const char *text, struct orh_netns_info *out);

#endif

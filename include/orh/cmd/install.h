/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `oci-rdma-hook install` (src/cmd/cmd_install.c, src/cmd/install_files.c,
 * src/cmd/install_engine.c): the installer image's entrypoint. It copies the binary, the
 * oci-rdma-runtime link, the node config and the hooks.d files into a host root, registers
 * the hook with the engine found there (configure's code, through orh_configure_under),
 * restarts or signals that engine, and once the engine reports the handler loaded, says so
 * (a ready file, a node-feature-discovery feature file). While it runs, it watches the
 * engine's config and configures again where it drifted (src/cmd/install_watch.c), not
 * ready meanwhile. On SIGTERM it reverts the engine's config and removes those marks; on
 * containerd, while a container of the handler runs, the config is kept and the undo marked
 * pending, finished by the runtime shim's delete of the last such container
 * (install_finish.c). The binary, the link, the hooks.d files and the node config stay for
 * the containers that still run through them, until `install --purge`.
 * What it added is recorded in a manifest under the root, so that an undo or a purge
 * removes that and nothing else.
 */
#ifndef ORH_CMD_INSTALL_H
#define ORH_CMD_INSTALL_H

#include <stdbool.h>
#include <stddef.h>

#include "orh/cmd/commands.h"
#include "orh/cmd/configure.h"
#include "orh/base/util.h"

/* The manifest, as the host knows it (under the root). */
#define ORH_INSTALL_MANIFEST "/var/lib/oci-rdma-hook/install.manifest"
/* An undo kept for running containers (the manifest's "pending" line) is finished by the
 * runtime shim: its `delete` of a container starts `install --uninstall --after-pid` (its
 * caller's PID, the engine's shim), which waits for that process to exit, then reverts the
 * engine unless containers still run through the handler (src/cmd/install_finish.c). Its
 * output is appended here; the purge removes the file. */
#define ORH_INSTALL_FINISH_LOG "/var/lib/oci-rdma-hook/finish.log"
/* The node-feature-discovery feature file that labels the node: NFD's local source turns
 * its line "feature.node.kubernetes.io/oci-rdma-hook-runtime=HANDLER" into that node
 * label, and drops the label when the file goes. */
#define ORH_INSTALL_LABEL "feature.node.kubernetes.io/oci-rdma-hook-runtime"
#define ORH_INSTALL_FEATURE_FILE "/etc/kubernetes/node-feature-discovery/features.d/oci-rdma-hook"

/* What a k3s or rke2 containerd template starts with: k3s's own template, then the lines
 * appended to it. install writes a template of this line alone where none is. */
#define ORH_INSTALL_TEMPLATE_BASE "{{ template \"base\" . }}\n"

/* One thing install added. Kinds: 'd' a directory it made, 'f' a file, 'l' a link, 'c' the
 * node config (kept by the undo, like 'f' and 'l'); 's' a mark of the installed state (the
 * feature file), 't' a containerd template it made (both removed by the undo). */
struct orh_inst_entry {
	char kind;
	char *path; /* host path */
};

struct orh_inst_manifest {
	char *engine;        /* the engine configured (its flavour: k3s, containerd, ...), NULL
			      * while none is */
	char *handler;
	char *engine_config; /* NULL: the engine's default */
	/* How the engine was configured, for an undo run later without the installer's
	 * arguments and environment: the shim the handler names, the engine's socket and the
	 * restart mode (NULL: the defaults). Saved with the engine line. */
	char *shim, *socket, *restart;
	/* The undo kept the engine's part for containers that still ran through the handler
	 * (ORH_INSTALL_FINISH_LOG: who finishes it) */
	bool pending;
	struct orh_inst_entry *v;
	size_t n;
};

/* Read root's manifest into m (empty when there is none). 0 or -errno. */
int orh_inst_load(const char *root, struct orh_inst_manifest *m, struct orh_err *err);
/* Write m to root's manifest, making (and recording) its directory. 0 or -errno. */
int orh_inst_save(const char *root, struct orh_inst_manifest *m, struct orh_err *err);
void orh_inst_free(struct orh_inst_manifest *m);
bool orh_inst_has(const struct orh_inst_manifest *m, const char *path);
/* Record a directory made for install (by configure: a drop-in directory), to be removed
 * by the undo once empty. */
void orh_inst_add_dir(struct orh_inst_manifest *m, const char *path);
/* Record a file that something else writes, for the purge to remove. */
void orh_inst_add_file(struct orh_inst_manifest *m, const char *path);

/* Put data at the host path under root with mode, making (and recording) the missing
 * directories, unless something that install did not add is there (kept: *what says so).
 * A path install added is rewritten (removed, then written anew) when its content or its
 * mode differs; the node config (kind 'c') is compared without configure's blocks (the
 * runtime block configure adds to it). The manifest is saved before each write. *what:
 * "created", "updated", "unchanged" or "kept". 0 or -errno. */
int orh_inst_put(const char *root, struct orh_inst_manifest *m, char kind, const char *path,
		 const char *data, size_t len, unsigned mode, const char **what,
		 struct orh_err *err);
/* A symbolic link path -> target, on the same terms. */
int orh_inst_link(const char *root, struct orh_inst_manifest *m, const char *path,
		  const char *target, const char **what, struct orh_err *err);
/* The undo's part: remove the entries of kind ('s' or 't'; a 't' only where it holds
 * exactly base, else it is kept as edited and no longer listed), then the directories
 * install made that are empty now; m loses what is gone and is saved. done gets one line
 * per path removed or kept. 0 or -errno (the first failure; the rest is still done). */
int orh_inst_undo_kind(const char *root, struct orh_inst_manifest *m, char kind,
		       const char *base, struct orh_strv *done, struct orh_err *err);
/* The purge: remove what m lists, in reverse order, then the manifest and the directories
 * install made. done gets one line per path removed or kept. 0 or -errno (the first
 * failure; the rest is still done). */
int orh_inst_remove_all(const char *root, struct orh_inst_manifest *m, struct orh_strv *done,
			struct orh_err *err);

/* ---- the kept undo finished later, and the install lock (install_finish.c) ---- */

/* Lock root's install directory (the manifest's) for this process's life: with wait, for up
 * to 30 s while another holds it; without, at once. *fd -1 where nothing is installed yet.
 * 0, or -EWOULDBLOCK (said in err) or -errno. */
int orh_inst_lock(const char *root, bool wait, int *fd, struct orh_err *err);
/* Wait up to timeout_s for process pid to exit: true once it has (or never was). */
bool orh_inst_wait_exit(long pid, unsigned timeout_s);
/* The runtime shim's `delete`: where the root it was installed under holds a pending undo,
 * start its finish, detached (`install --uninstall --after-pid` the shim's caller). Costs
 * a readlink, and where the binary is an installed one, a read of the manifest. */
void orh_inst_finish_later(void);

/* ---- the engine (install_engine.c) ---- */

enum orh_inst_restart {
	ORH_RESTART_DEFAULT,
	ORH_RESTART_SIGNAL,  /* SIGHUP to the PID behind the socket */
	ORH_RESTART_SYSTEMD, /* systemctl try-restart UNITS, chrooted into the root */
	ORH_RESTART_NONE,
};

struct orh_inst_engine {
	enum orh_engine engine;
	const char *flavour;   /* "containerd", "k3s", "rke2", "crio", "docker", "podman" */
	char *config;          /* the file configure edits (a host path) */
	char *rendered;        /* the file the engine reads: config, or a template's config.toml */
	char *socket;          /* NULL: none to find the engine by */
	const char *units;     /* the systemd units, space-separated */
	const char *const *binaries; /* where the engine's binary may be (containerd's) */
	enum orh_inst_restart restart;
	int signalled;         /* the PID sent SIGHUP; 0: none */
	bool listened;         /* an engine listened on the socket when it was restarted */
};

/* The engine under root: flavour (a flavour or engine name) when given, else found from
 * CONTAINERD_CONFIG or CONTAINERD_SOCKET in the environment, else from the files and
 * sockets under root (rke2, k3s, containerd, CRI-O, docker, podman). config and socket
 * override the flavour's (NULL: the environment's, else the flavour's; for a plain
 * containerd with none, the config the command line of the containerd behind the socket
 * names, where one listens and is visible, else the default). A k3s or rke2
 * config is a template beside the rendered config.toml, never the rendered file. notes
 * says what was chosen where that is not plain. 0 or -errno. */
int orh_inst_engine_find(const char *root, const char *flavour, const char *config,
			 const char *socket, struct orh_inst_engine *e, struct orh_strv *notes,
			 struct orh_err *err);
void orh_inst_engine_free(struct orh_inst_engine *e);
/* Is name one of the engines (flavours) orh_inst_engine_find knows? */
bool orh_inst_engine_known(const char *name);
/* Restart e as mode says (ORH_RESTART_DEFAULT: the flavour's way), recording in e what
 * was signalled. 0 or -errno. */
int orh_inst_engine_restart(const char *root, struct orh_inst_engine *e,
			    enum orh_inst_restart mode, struct orh_strv *notes,
			    struct orh_err *err);
/* Has the engine behind e's socket loaded handler with shim, as it reports it (containerd:
 * the binary of the socket's peer, /proc/PID/exe, run chrooted into root for the `config
 * dump` of the config its command line names, which must be e's rendered file; CRI-O:
 * `crio status config`; docker: `docker info`, both through the socket)? 1 with *what
 * saying how it was seen, 0 with *why saying what is missing (no engine listening, one
 * signalled and not back, its PID not in this namespace, its binary unreadable, another
 * config read, a dump without the handler), -errno. */
int orh_inst_engine_loaded(const char *root, const struct orh_inst_engine *e,
			   const char *handler, const char *shim, char **what, char **why,
			   struct orh_err *err);

/* The containers that still run through shim on e's engine, as this PID namespace shows
 * them (the host's: hostPID): each of containerd's runc v2 shims (comm containerd-shim*)
 * whose bundle (its working directory) holds an options.json whose binary_name is shim,
 * and whose -address is the socket of e under root (compared by inode, through the shim's
 * /proc root), as a line in users; one whose bundle or socket cannot be looked at counts
 * too, said so. containerd 2.x looks the handler up in its config to exec into such a
 * container, so the undo keeps it while any runs. The number found. */
size_t orh_inst_engine_users(const char *root, const struct orh_inst_engine *e,
			     const char *shim, struct orh_strv *users);

/* configure (src/cmd/configure/cmd_configure.c) with every file under root: the plan for
 * req, written, in turn with other runs on root (src/cmd/configure/lock.c: -EWOULDBLOCK
 * naming the holder after 5 s). changed: "created|changed|removed PATH" per file. 0 or
 * -errno. */
int orh_configure_under(const char *root, const struct orh_configure_req *req,
			const char *node_config, struct orh_strv *changed, struct orh_strv *notes,
			struct orh_err *err);
/* configure's --check under root, in process: files gets the plan (each file read, with
 * new or remove set where it is not as configure would leave it); nothing is written. 0 or
 * -errno. */
int orh_configure_check_under(const char *root, const struct orh_configure_req *req,
			      const char *node_config, struct orh_cfg_files *files,
			      struct orh_strv *notes, struct orh_err *err);

/* ---- the watch: install reconciles while it runs (install_watch.c) ---- */

/* A full check this often, whatever inotify says (a change it cannot see: a directory made
 * after the watch was set, an overflow). */
#define ORH_INST_RESYNC_S 60
/* The re-asserts' pace: the first at once; then at least ORH_INST_PACE_MIN_S apart, the gap
 * doubled (to ORH_INST_PACE_MAX_S) for each one that follows the last within
 * ORH_INST_PACE_QUIET_S after its gap, and back to the least after a quiet that long. */
#define ORH_INST_PACE_MIN_S 10
#define ORH_INST_PACE_MAX_S 320
#define ORH_INST_PACE_QUIET_S 60

struct orh_inst_pace {
	long long last; /* when the last re-assert ran (monotonic seconds) */
	unsigned gap;   /* seconds after last before the next may run; 0: none ran yet */
};

/* Seconds to wait at now before a re-assert may run: 0, run it now. */
unsigned orh_inst_pace_wait(const struct orh_inst_pace *p, long long now);
/* A re-assert ran at now. */
void orh_inst_pace_done(struct orh_inst_pace *p, long long now);
/* The drift in a plan: the path of each file configure would change (new or remove), in
 * the plan's order, into drifted. The number of such files. */
size_t orh_inst_drift(const struct orh_cfg_files *files, struct orh_strv *drifted);
/* The directories to watch: that of config (the engine's file), of every file the plan
 * read, and of each of containerd's imports that config names (a drop-in directory where no
 * file is yet), each once, into dirs (host paths). */
void orh_inst_watch_dirs(const struct orh_cfg_files *files, const char *config,
			 struct orh_strv *dirs);

/* The watch's inotify instance on directories under a root. */
struct orh_inst_watch {
	int fd;                 /* -1: none */
	struct orh_strv dirs;   /* the directories watched (host paths), by watch descriptor */
	int *wd;
};

/* Watch each of dirs under root (those that exist; the others are looked for again at the
 * next call). 0 or -errno. */
int orh_inst_watch_set(struct orh_inst_watch *w, const char *root, const struct orh_strv *dirs,
		       struct orh_err *err);
/* Read the events waiting, adding the host path of each entry changed to changed (once
 * each); true where the kernel's queue overflowed (anything may have changed). */
bool orh_inst_watch_read(struct orh_inst_watch *w, struct orh_strv *changed);
void orh_inst_watch_free(struct orh_inst_watch *w);

int orh_cmd_install(struct orh_ctx *ctx, int argc, char **argv);

#endif

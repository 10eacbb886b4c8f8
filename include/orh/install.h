/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `oci-rdma-hook install` (src/cmd/cmd_install.c, src/cmd/install_files.c): the installer
 * image's entrypoint. It copies the binary, the oci-rdma-runtime link, the node config and
 * the hooks.d files into a host root, registers the hook with the engine found there
 * (configure's code, through orh_configure_under), restarts or signals that engine, and on
 * SIGTERM undoes all of it. What it added is recorded in a manifest under the root, so that
 * an undo removes that and nothing else.
 */
#ifndef ORH_INSTALL_H
#define ORH_INSTALL_H

#include <stdbool.h>
#include <stddef.h>

#include "orh/commands.h"
#include "orh/configure.h"
#include "orh/util.h"

/* The manifest, as the host knows it (under the root). */
#define ORH_INSTALL_MANIFEST "/var/lib/oci-rdma-hook/install.manifest"
/* The node-feature-discovery feature file that labels the node: NFD's local source turns
 * its line "feature.node.kubernetes.io/oci-rdma-hook-runtime=HANDLER" into that node
 * label, and drops the label when the file goes. */
#define ORH_INSTALL_LABEL "feature.node.kubernetes.io/oci-rdma-hook-runtime"
#define ORH_INSTALL_FEATURE_FILE "/etc/kubernetes/node-feature-discovery/features.d/oci-rdma-hook"

/* One thing install added. */
struct orh_inst_entry {
	char kind;  /* 'd' a directory it made, 'f' a file, 'l' a link, 'c' the node config */
	char *path; /* host path */
};

struct orh_inst_manifest {
	char *engine;        /* the engine configured, NULL while none is */
	char *handler;
	char *engine_config; /* NULL: the engine's default */
	struct orh_inst_entry *v;
	size_t n;
};

/* Read root's manifest into m (empty when there is none). 0 or -errno. */
int orh_inst_load(const char *root, struct orh_inst_manifest *m, struct orh_err *err);
/* Write m to root's manifest, making (and recording) its directory. 0 or -errno. */
int orh_inst_save(const char *root, struct orh_inst_manifest *m, struct orh_err *err);
void orh_inst_free(struct orh_inst_manifest *m);
bool orh_inst_has(const struct orh_inst_manifest *m, const char *path);

/* Put data at the host path under root with mode, making (and recording) the missing
 * directories, unless something that install did not add is there (kept: *what says so).
 * A path install added is rewritten (removed, then written anew) when its content or its
 * mode differs, except the node config (kind 'c'), which is never rewritten once there.
 * The manifest is saved before each write. *what: "created", "updated", "unchanged" or
 * "kept". 0 or -errno. */
int orh_inst_put(const char *root, struct orh_inst_manifest *m, char kind, const char *path,
		 const char *data, size_t len, unsigned mode, const char **what,
		 struct orh_err *err);
/* A symbolic link path -> target, on the same terms. */
int orh_inst_link(const char *root, struct orh_inst_manifest *m, const char *path,
		  const char *target, const char **what, struct orh_err *err);
/* Remove what m lists, in reverse order, then the manifest and the directories install
 * made. The node config is kept where it differs from conf_default (an edited config);
 * done gets one line per path removed or kept. 0 or -errno (the first failure; the rest
 * is still done). */
int orh_inst_remove_all(const char *root, struct orh_inst_manifest *m, const char *conf_default,
			size_t conf_len, struct orh_strv *done, struct orh_err *err);

/* configure (src/cmd/configure/cmd_configure.c) with every file under root: the plan for
 * req, written. changed: "created|changed|removed PATH" per file. 0 or -errno. */
int orh_configure_under(const char *root, const struct orh_configure_req *req,
			const char *node_config, struct orh_strv *changed, struct orh_strv *notes,
			struct orh_err *err);

int orh_cmd_install(struct orh_ctx *ctx, int argc, char **argv);

#endif

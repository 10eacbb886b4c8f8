/* SPDX-License-Identifier: Apache-2.0 */
/*
 * engines.c: what the engine files of src/cmd/configure/ share: reading a file into the list
 * of files a plan touches, TOML look-ups that name the file and line, drop-in directories,
 * and the node config's runtime block. Each engine_*.c computes one engine's changes (its
 * entry point in orh/cmd/configure.h); cmd_configure.c dispatches to them.
 */
#ifndef ORH_CONFIGURE_ENGINES_PRIV_H
#define ORH_CONFIGURE_ENGINES_PRIV_H

#include "orh-config.h"
#include "orh/cmd/configure.h"

#ifndef ORH_CONTAINERS_HOOKS_DIR
#define ORH_CONTAINERS_HOOKS_DIR "/usr/share/containers/oci/hooks.d"
#endif
#ifndef ORH_OWN_HOOKS_DIR
#define ORH_OWN_HOOKS_DIR "/usr/share/oci-rdma-hook/hooks.d"
#endif

/* Our drop-in's name in an engine's drop-in directory (CRI-O, podman). */
#define ORH_DROPIN_NAME "99-oci-rdma-hook.conf"
/* hooks_dir when no config sets it: containers/common's default for podman, CRI-O's */
#define ORH_ENGINE_HOOKS_DIR "/usr/share/containers/oci/hooks.d"

/* The engine's main config: --engine-config, else its default. */
const char *cfg_engine_path(const struct orh_configure_req *req);
/* Read path (NULL content when it does not exist) into a new entry of files. */
int cfg_add_file(const struct orh_cfg_reader *rd, struct orh_cfg_files *files, const char *path,
		 struct orh_cfg_file **out, struct orh_err *err);
/* Scan a file read (its operator's text: configure's blocks left out when strip). */
int cfg_scan(const struct orh_cfg_file *f, bool strip, struct orh_toml *t, struct orh_err *err);
/* A string value at key, or NULL; an error naming the file and line when the key holds
 * something else. */
int cfg_get_string(const struct orh_toml *t, const char *file, const char *key, char **out,
		   struct orh_err *err);
/* The runtime an engine names, as the shim must be told it: NULL for runc (the shim finds
 * it itself), an absolute path as it is, another bare name where the shim would look.
 * -ENOENT when a bare name is nowhere. */
int cfg_shim_runtime(const struct orh_cfg_reader *rd, const char *name, char **out,
		     struct orh_strv *notes);
/* The node config's runtime block for this engine (see engines.c). */
int cfg_node_runtime(const struct orh_configure_req *req, const char *node_config,
		     const struct orh_cfg_reader *rd, const char *runtime,
		     struct orh_cfg_files *files, struct orh_strv *notes, struct orh_err *err);
/* The files an engine reads beside our drop-in: main_path (may be absent), then dir's *.conf
 * (podman), or every file under dir, recursively (every: CRI-O), in lexical order, without
 * ours; *first is the index of the first of them in files. */
int cfg_read_dropins(const struct orh_cfg_reader *rd, const char *main_path, const char *dir,
		     bool every, struct orh_cfg_files *files, size_t *first,
		     struct orh_err *err);
/* The last string array (*set) or string set at key in files[first..]. */
int cfg_last_array(const struct orh_cfg_files *files, size_t first, const char *key,
		   struct orh_strv *out, bool *set, struct orh_err *err);
int cfg_last_string(const struct orh_cfg_files *files, size_t first, const char *key, char **out,
		    struct orh_err *err);
/* A file of configure's own at path (added to files unless it is there already): written
 * whole (text), or removed (text NULL). */
int cfg_own_file(const struct orh_cfg_reader *rd, const char *path, const char *text,
		 struct orh_cfg_files *files, struct orh_cfg_file **out, struct orh_err *err);
/* Is there a file at path (that can be read)? */
bool cfg_file_exists(const struct orh_cfg_reader *rd, const char *path);
/* Does the directory of glob hold a name it matches, other than name? */
bool cfg_dir_has_other(const struct orh_cfg_reader *rd, const char *glob, const char *name);
/* Our drop-in in dir: written whole (text), or removed (text NULL). */
int cfg_own_dropin(const struct orh_cfg_reader *rd, const char *dir, const char *text,
		   struct orh_cfg_files *files, struct orh_err *err);

#endif

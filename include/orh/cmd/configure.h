/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `oci-rdma-hook configure`: registering the hook with a container engine
 * (src/cmd/configure/). The engine code computes, from the text of the files it read, the
 * text each file must hold afterwards (struct orh_cfg_file: new, remove); cmd_configure.c
 * reads the files, prints the changes (--dry-run) or writes them, and nothing else.
 *
 * Engine configs are TOML (containerd, CRI-O, podman) or JSON (docker). Debian has no C
 * TOML library, and an edit must keep every other line and comment of an operator's file,
 * so TOML is read by a line scanner of its own (toml.c) that knows what these files use:
 * tables, dotted and quoted keys, strings, booleans, numbers, arrays (also over several
 * lines) and one-line inline tables. What configure adds is a block between marker
 * comments, appended to a file (containerd's config.toml, the node config) or a whole
 * file of its own (a drop-in); --undo removes exactly that.
 */
#ifndef ORH_CMD_CONFIGURE_H
#define ORH_CMD_CONFIGURE_H

#include <stdbool.h>
#include <stddef.h>

#include "orh/base/util.h"

/* ---- TOML, read line by line (toml.c) ---- */

/* Segments of a key path are joined with this byte: "plugins" ORH_TOML_SEP "io.containerd..." */
#define ORH_TOML_SEP "\x1f"

struct orh_toml_entry {
	char *key;       /* the full path: table path, then the key's own path */
	char *value;     /* the value's source text (NULL for a table header) */
	unsigned line;   /* 1-based line of the key or header */
	size_t start;    /* byte offset of the line */
	size_t end;      /* byte offset past the entry's last line (its newline included) */
	bool array;      /* a header of an array of tables, [[...]] */
};

struct orh_toml {
	struct orh_toml_entry *v;
	size_t n;
};

/* Scan text (name is used in messages: "NAME:LINE: ..."). 0 or -EINVAL. */
int orh_toml_scan(const char *text, const char *name, struct orh_toml *out, struct orh_err *err);
void orh_toml_free(struct orh_toml *t);
/* The last entry with a value (no table header) whose key is exactly key (segments joined
 * by ORH_TOML_SEP), else NULL. */
const struct orh_toml_entry *orh_toml_get(const struct orh_toml *t, const char *key);
/* The first entry whose key is key or lies under it, else NULL. */
const struct orh_toml_entry *orh_toml_find_under(const struct orh_toml *t, const char *key);
/* Decode a string value ("..." or '...'); false when it is no one-line string. */
bool orh_toml_string(const char *value, char **out);
/* A boolean value; false when it is neither true nor false. */
bool orh_toml_bool(const char *value, bool *out);
/* An array of strings; false when it is anything else. */
bool orh_toml_string_array(const char *value, struct orh_strv *out);
/* A key path from its segments (NULL-terminated): a new string. */
char *orh_toml_key(const char *first, ...) __attribute__((sentinel));
/* "s" as a TOML basic string, quoted: a new string. */
char *orh_toml_quote(const char *s);
/* ["a", "b"]: a new string. */
char *orh_toml_array(const struct orh_strv *sv);

/* ---- a block of configure's own inside a file (block.c) ---- */

/* The block is
 *     # >>> oci-rdma-hook configure --engine ENGINE[ --handler H][ (new file)]\n
 *     BODY
 *     # <<< oci-rdma-hook configure --engine ENGINE[ --handler H]\n
 * appended after one "\n" to a file that exists, or written after `header` to a file
 * that did not ("(new file)": --undo then removes the file when only `header` is left). */
struct orh_block {
	const char *id;      /* "--engine containerd --handler rdma" */
	const char *body;    /* lines, each ending in "\n" */
	const char *header;  /* what a new file starts with ("" for none) */
};

/* The text of the file with the block in place: old (NULL: the file does not exist) with
 * the block appended, or its earlier block replaced. *out is NULL when old already holds
 * exactly this block. 0 or -EINVAL (a begin marker without its end). */
int orh_block_install(const char *old, const char *name, const struct orh_block *b,
		      char **out, struct orh_err *err);
/* The text of the file without the block: *out is NULL when old holds no such block;
 * *remove is set when the file was made by configure and holds nothing but b's header and
 * the block. */
int orh_block_remove(const char *old, const char *name, const struct orh_block *b, char **out,
		     bool *remove, struct orh_err *err);
/* The body of b's block (by its id) in old, a new string; NULL when there is none. */
char *orh_block_body(const char *old, const struct orh_block *b);
/* old with every line of every block of configure's (any id, a begin marker and the end
 * marker after it) left out: what the operator wrote. A new string. */
char *orh_block_strip_all(const char *old);

/* ---- the engines (engines.c) ---- */

enum orh_engine {
	ORH_ENGINE_CONTAINERD,
	ORH_ENGINE_CRIO,
	ORH_ENGINE_DOCKER,
	ORH_ENGINE_PODMAN,
};

/* One file configure reads and may change. */
struct orh_cfg_file {
	char *path;        /* as the engine knows it (no --root) */
	char *old;         /* its content; NULL when it does not exist */
	char *new;         /* what it must hold; NULL: leave it as it is */
	bool remove;       /* delete it (undo of a file configure made) */
	bool mkdir;        /* its directory may have to be made */
};

struct orh_cfg_files {
	struct orh_cfg_file *v;
	size_t n;
};

/* What `configure` was asked (all paths as the engine's host knows them). */
struct orh_configure_req {
	enum orh_engine engine;
	const char *engine_config; /* NULL: the engine's default */
	const char *handler;       /* runtime handler name (containerd, crio, docker) */
	const char *shim;          /* the installed oci-rdma-runtime */
	const char *runtime;       /* NULL: found from the engine's config and packaging */
	bool undo;
};

/* Reads files through this: the content of path (NULL when it does not exist), or an
 * error. Paths are host paths; the reader adds --root. names: the entries of a
 * directory (a sorted list), for drop-in directories. */
struct orh_cfg_reader {
	int (*read)(void *arg, const char *path, char **out, struct orh_err *err);
	int (*list)(void *arg, const char *dir, struct orh_strv *names, struct orh_err *err);
	/* Is path an executable file (under --root)? */
	bool (*executable)(void *arg, const char *path);
	void *arg;
	/* Is path a directory (under --root)? NULL: none is. */
	bool (*is_dir)(void *arg, const char *path);
};

/* Default paths. */
const char *orh_engine_name(enum orh_engine e);
int orh_engine_from_name(const char *s, enum orh_engine *e);
/* The engine's main config where nothing else is named (install's flavours use it too). */
const char *orh_engine_default_config(enum orh_engine e);

/* The changes for req: every file read is in files (with new/remove set where it must
 * change). node_config: the node config's path (its runtime block). notes: what the
 * operator should know (the runtime found, what to restart). 0, or -errno with err
 * naming the file and the field. */
int orh_configure_plan(const struct orh_configure_req *req, const char *node_config,
		       const struct orh_cfg_reader *rd, struct orh_cfg_files *files,
		       struct orh_strv *notes, struct orh_err *err);
void orh_cfg_files_free(struct orh_cfg_files *f);

/* ---- each engine's plan (src/cmd/configure/engine_*.c), which orh_configure_plan() calls
 * once it checked the request; node_config is the node config's path ---- */

int cfg_containerd(const struct orh_configure_req *req, const char *node_config,
		   const struct orh_cfg_reader *rd, struct orh_cfg_files *files,
		   struct orh_strv *notes, struct orh_err *err);
int cfg_crio(const struct orh_configure_req *req, const char *node_config,
	     const struct orh_cfg_reader *rd, struct orh_cfg_files *files,
	     struct orh_strv *notes, struct orh_err *err);
int cfg_docker(const struct orh_configure_req *req, const char *node_config,
	       const struct orh_cfg_reader *rd, struct orh_cfg_files *files,
	       struct orh_strv *notes, struct orh_err *err);
int cfg_podman(const struct orh_configure_req *req, const struct orh_cfg_reader *rd,
	       struct orh_cfg_files *files, struct orh_strv *notes, struct orh_err *err);

#endif

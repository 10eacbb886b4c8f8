/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cd_view.c: containerd's config as containerd reads it, for engine_containerd.c.
 */
#ifndef ORH_CONFIGURE_CD_VIEW_H
#define ORH_CONFIGURE_CD_VIEW_H

#include <stdio.h>

#include "orh/cmd/configure.h"

/* Our drop-in's name in containerd's imported directory: after nvidia-ctk's 99-nvidia.toml */
#define CD_DROPIN "99-oci-rdma-hook.toml"

struct cd_src {              /* one file containerd reads */
	size_t fi;           /* its index in the plan's files */
	long version;        /* its config version (an import without one: the main file's) */
	bool ours;           /* our drop-in (left out of the merge) */
	struct orh_toml t;   /* its text, configure's marked blocks left out */
};

struct cd_ent {              /* one entry of the merged CRI runtime plugin table */
	const struct orh_toml_entry *e;
	const char *rel;     /* its key below the plugin's table */
	size_t src;          /* the file it comes from (index in src) */
};

struct cd_view {
	struct cd_src *src;  /* the main file first, then the imports in containerd's order */
	size_t n;
	long version;        /* the main file's (2 when there is none) */
	bool merge_keys;     /* 2.x: imported plugin tables merge key by key; 1.x: replace */
	struct cd_ent *ents; /* the CRI runtime plugin's table, merged, ours left out */
	size_t nents;
};

/* The CRI runtime plugin's name in a config of this version. */
const char *cd_plugin_of(long version);
/* Read main_path and everything it imports into files and v. */
int cd_view_read(const struct orh_cfg_reader *rd, struct orh_cfg_files *files,
		 const char *main_path, struct cd_view *v, struct orh_err *err);
void cd_view_free(struct cd_view *v);
/* The view as it will be once the main file imports entry too. */
int cd_view_import(const struct orh_cfg_reader *rd, struct orh_cfg_files *files,
		   struct cd_view *v, const char *entry, struct orh_err *err);
/* The last merged value at rel (below the plugin's table), else NULL. */
const struct cd_ent *cd_view_get(const struct cd_view *v, const char *rel);
/* In one file: the last value at rel, or the first entry at or below rel; else NULL. */
const struct orh_toml_entry *cd_src_get(const struct cd_src *s, const char *rel);
const struct orh_toml_entry *cd_src_find_under(const struct cd_src *s, const char *rel);
/* Is rel (a key path, whole or below the plugin's table) prefix, or below it? Every key is
 * below "" (cd_src_find_under(s, ""): any entry of the plugin's table in s). */
bool cd_rel_under(const char *rel, const char *prefix);
/* The merged table as TOML under [plugins."plugin"...], every key below skip left out. */
int cd_view_emit(const struct cd_view *v, const char *plugin, const char *skip, FILE *out,
		 struct orh_err *err);

#endif

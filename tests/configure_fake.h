/* SPDX-License-Identifier: Apache-2.0 */
/* configure's engines' plans on files held in memory: what test_configure.c and
 * test_configure_cd.c share. */
#ifndef ORH_TESTS_CONFIGURE_FAKE_H
#define ORH_TESTS_CONFIGURE_FAKE_H

#include <criterion/criterion.h>
#include <string.h>

#include "orh/cmd/configure.h"

struct fake_fs {
	const char *path[8];
	const char *text[8];
	const char *exe[8];
};

static inline int fake_read(void *arg, const char *path, char **out,
			    struct orh_err *err)
{
	struct fake_fs *fs = arg;

	*out = NULL;
	for (size_t i = 0; i < 8 && fs->path[i]; i++)
		if (!strcmp(fs->path[i], path))
			*out = orh_xstrdup(fs->text[i]);
	return 0;
}

static inline int fake_list(void *arg, const char *dir, struct orh_strv *names,
			    struct orh_err *err)
{
	struct fake_fs *fs = arg;
	size_t n = strlen(dir);

	for (size_t i = 0; i < 8 && fs->path[i]; i++)
		if (!strncmp(fs->path[i], dir, n) && fs->path[i][n] == '/' &&
		    !strchr(fs->path[i] + n + 1, '/'))
			orh_strv_push(names, orh_xstrdup(fs->path[i] + n + 1));
	return 0;
}

static inline bool fake_exe(void *arg, const char *path)
{
	struct fake_fs *fs = arg;

	for (size_t i = 0; i < 8 && fs->exe[i]; i++)
		if (!strcmp(fs->exe[i], path))
			return true;
	return false;
}

static inline int plan(struct fake_fs *fs, struct orh_configure_req *req,
		       struct orh_cfg_files *files, struct orh_err *err)
{
	struct orh_cfg_reader rd = { fake_read, fake_list, fake_exe, fs, NULL };
	struct orh_strv notes = { 0 };
	int r;

	if (!req->shim)
		req->shim = "/usr/bin/oci-rdma-runtime";
	if (!req->handler)
		req->handler = "rdma";
	r = orh_configure_plan(req, "/etc/oci-rdma-hook/oci-rdma-hook.conf", &rd, files, &notes, err);
	orh_strv_free(&notes);
	return r;
}

static inline const struct orh_cfg_file *file(const struct orh_cfg_files *f,
					       const char *path)
{
	for (size_t i = 0; i < f->n; i++)
		if (!strcmp(f->v[i].path, path))
			return &f->v[i];
	return NULL;
}

static inline size_t count(const char *text, const char *what)
{
	size_t n = 0;

	for (const char *p = text; (p = strstr(p, what)); p++)
		n++;
	return n;
}

#define CD_MAIN "/etc/containerd/config.toml"
#define CD_OURS "/etc/containerd/conf.d/99-oci-rdma-hook.toml"
#define CD_NODE "/etc/oci-rdma-hook/oci-rdma-hook.conf"
#define CRI "[plugins.\"io.containerd.grpc.v1.cri\""

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * podman: a containers.conf.d drop-in whose hooks_dir adds the directory holding the
 * precreate registration (read by no other engine) to what podman read before
 * (include/orh/cmd/configure.h).
 */
#include <string.h>

#include "engines_priv.h"

int cfg_podman(const struct orh_configure_req *req, const struct orh_cfg_reader *rd,
	       struct orh_cfg_files *files, struct orh_strv *notes, struct orh_err *err)
{
	_cleanup_free_ char *dir = orh_xasprintf("%s.d", cfg_engine_path(req));
	_cleanup_free_ char *key = orh_toml_key("engine", "hooks_dir", NULL);
	_cleanup_free_ char *list = NULL, *text = NULL;
	struct orh_cfg_file *f = NULL;
	struct orh_strv dirs = { 0 };
	size_t first = files->n, rest = 0;
	bool set = false;
	int r;

	/* containers.conf is read after the distribution's defaults file */
	r = cfg_add_file(rd, files, "/usr/share/containers/containers.conf", &f, err);
	if (r >= 0)
		r = cfg_read_dropins(rd, cfg_engine_path(req), dir, false, files, &rest, err);
	if (r < 0 || req->undo)
		return r < 0 ? r : cfg_own_dropin(rd, dir, NULL, files, err);
	r = cfg_last_array(files, first, key, &dirs, &set, err);
	if (r < 0) {
		orh_strv_free(&dirs);
		return r;
	}
	if (!set)
		orh_strv_push(&dirs, orh_xstrdup(ORH_ENGINE_HOOKS_DIR));
	/* createRuntime and poststop (a build installed elsewhere than the package) */
	if (!orh_strv_contains(&dirs, ORH_CONTAINERS_HOOKS_DIR))
		orh_strv_push(&dirs, orh_xstrdup(ORH_CONTAINERS_HOOKS_DIR));
	if (!orh_strv_contains(&dirs, ORH_OWN_HOOKS_DIR))
		orh_strv_push(&dirs, orh_xstrdup(ORH_OWN_HOOKS_DIR));
	list = orh_toml_array(&dirs);
	orh_strv_free(&dirs);
	text = orh_xasprintf("# Written by `oci-rdma-hook configure --engine podman`;\n"
			     "# `oci-rdma-hook configure --engine podman --undo` removes this file.\n"
			     "# The directories podman read before, and the one holding\n"
			     "# oci-rdma-hook's precreate registration, which only podman reads.\n"
			     "[engine]\n"
			     "hooks_dir = %s\n",
			     list);
	r = cfg_own_dropin(rd, dir, text, files, err);
	if (r >= 0)
		orh_strv_pushf(notes, "podman: hooks_dir gains %s (precreate); it applies to the "
			       "next podman command", ORH_OWN_HOOKS_DIR);
	return r;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The node config the NRI plugin decides with (include/orh/cmd/nri_plugin.h). A plugin the
 * runtime started from its plugin_path gets its config in Configure (the text of the
 * runtime's plugin_config_path file): that text, parsed as the node config file is, replaces
 * the file's from then on; an empty one leaves the file's. The text is also written to
 * ORH_RUN_DIR/.nri-<IDX>-<NAME>.conf, root's, 0644: the --config of the nccl-conf stage the
 * answers register, which decides again from the same config. Each CreateContainer reads the
 * config again (a file, or a ConfigMap, that changed applies to the next container).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orh/base/atomic.h"
#include "orh/cmd/nri_plugin.h"
#include "orh/apply/record.h"

#define CONFIGURE_NAME "Configure's config"

static char *text;       /* Configure's config; NULL: the node config file's */
static char *written;    /* where it was written for the stage */
static const char *file_path;   /* the node config file and whether it was named */
static bool file_explicit, file_saved;

int orh_nri_config_set(struct orh_ctx *ctx, const char *id, const char *cfg_text,
		       struct orh_err *err)
{
	struct orh_config parsed;
	_cleanup_close_ int dirfd = -1;
	_cleanup_free_ char *name = NULL;
	int r;

	if (!file_saved) {
		file_path = ctx->config_path;
		file_explicit = ctx->config_explicit;
		file_saved = true;
	}
	free(text);
	text = NULL;
	ctx->config_path = file_path;
	ctx->config_explicit = file_explicit;
	if (!cfg_text || !*cfg_text)
		return 0;
	if (strlen(cfg_text) > ORH_CONFIG_MAX_BYTES)
		return orh_fail(err, EFBIG, "%s: larger than %d bytes", CONFIGURE_NAME,
				ORH_CONFIG_MAX_BYTES);
	orh_config_defaults(&parsed);
	r = orh_config_parse_string(&parsed, CONFIGURE_NAME, cfg_text, err);
	orh_config_free(&parsed);
	if (r < 0)
		return r;
	/* the stage's copy, made as the first state directory makes the run dir */
	name = orh_xasprintf(".nri-%s.conf", id);
	if (mkdir(ORH_RUN_DIR, 0755) < 0 && errno != EEXIST)
		return orh_fail_errno(err, errno, "%s: writing it for the hook stage: creating '%s'",
				      CONFIGURE_NAME, ORH_RUN_DIR);
	dirfd = open(ORH_RUN_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dirfd < 0)
		return orh_fail_errno(err, errno, "%s: writing it for the hook stage: opening '%s'",
				      CONFIGURE_NAME, ORH_RUN_DIR);
	r = orh_replace_at(dirfd, name, &(struct orh_replace){
		.type = S_IFREG, .mode = 0644, .chown = true, .data = cfg_text,
		.len = strlen(cfg_text), .sweep = true }, err);
	if (r < 0)
		return orh_err_prefix(err, "%s: writing it for the hook stage", CONFIGURE_NAME);
	free(written);
	written = orh_xasprintf("%s/%s", ORH_RUN_DIR, name);
	text = orh_xstrdup(cfg_text);
	ctx->config_path = written;
	ctx->config_explicit = true;
	return 0;
}

int orh_nri_config_reload(struct orh_ctx *ctx)
{
	int r;

	orh_config_free(&ctx->cfg);
	orh_config_defaults(&ctx->cfg);
	orh_err_clear(&ctx->config_err);
	if (text)
		r = orh_config_parse_string(&ctx->cfg, CONFIGURE_NAME, text, &ctx->config_err);
	else
		r = orh_config_load(&ctx->cfg, ctx->config_path, ctx->config_explicit,
				    &ctx->config_err);
	if (r < 0) {
		orh_config_free(&ctx->cfg);
		orh_config_defaults(&ctx->cfg);
	}
	if (!ctx->sysroot_opt)
		ctx->sysroot = ctx->cfg.sysroot ? ctx->cfg.sysroot : "/";
	return r;
}

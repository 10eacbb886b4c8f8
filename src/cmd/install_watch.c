/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The installer's watch (include/orh/cmd/install.h): while `install` runs, the directories of
 * the engine's config files are watched with inotify, and configure's check runs again when
 * something in them changes (and every ORH_INST_RESYNC_S seconds). This file holds what
 * that loop decides from (the drift in a plan, the directories to watch, the pace of the
 * re-asserts: pure) and the inotify instance; cmd_install.c runs the loop.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "orh/cmd/install.h"

/* What changes a file in a watched directory, or the directory itself. */
#define WATCH_MASK                                                                         \
	(IN_CLOSE_WRITE | IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB |  \
	 IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

unsigned orh_inst_pace_wait(const struct orh_inst_pace *p, long long now)
{
	long long t;

	if (!p->gap)
		return 0;
	t = p->last + p->gap - now;
	return t > 0 ? (unsigned)t : 0;
}

void orh_inst_pace_done(struct orh_inst_pace *p, long long now)
{
	bool again = p->gap && now - p->last < (long long)p->gap + ORH_INST_PACE_QUIET_S;

	if (!again)
		p->gap = ORH_INST_PACE_MIN_S;
	else if (p->gap < ORH_INST_PACE_MAX_S)
		p->gap = p->gap * 2 > ORH_INST_PACE_MAX_S ? ORH_INST_PACE_MAX_S : p->gap * 2;
	p->last = now;
}

size_t orh_inst_drift(const struct orh_cfg_files *files, struct orh_strv *drifted)
{
	size_t n = 0;

	for (size_t i = 0; i < files->n; i++)
		if (files->v[i].new || files->v[i].remove) {
			orh_strv_push(drifted, orh_xstrdup(files->v[i].path));
			n++;
		}
	return n;
}

static void push_dir_of(struct orh_strv *dirs, const char *path)
{
	_cleanup_free_ char *dir = orh_xstrdup(path);
	char *slash = strrchr(dir, '/');

	if (!slash)
		return;
	if (slash == dir)
		slash[1] = '\0';
	else
		*slash = '\0';
	if (!orh_strv_contains(dirs, dir))
		orh_strv_push(dirs, TAKE_PTR(dir));
}

/* The directory of each of containerd's imports in text (the main config at path), where
 * no file matches them yet: a relative entry is under path's directory. */
static void push_imports(struct orh_strv *dirs, const char *path, const char *text)
{
	_cleanup_free_ char *key = orh_toml_key("imports", NULL);
	struct orh_toml t = { 0 };
	struct orh_strv imports = { 0 };
	struct orh_err ignored = { 0 };
	const struct orh_toml_entry *e;

	if (orh_toml_scan(text, path, &t, &ignored) == 0 && (e = orh_toml_get(&t, key)) &&
	    orh_toml_string_array(e->value, &imports))
		for (size_t i = 0; i < imports.n; i++) {
			_cleanup_free_ char *p = NULL;
			const char *slash = strrchr(path, '/');

			if (imports.v[i][0] != '/' && slash)
				p = orh_xasprintf("%.*s/%s", (int)(slash - path), path,
						  imports.v[i]);
			push_dir_of(dirs, p ? p : imports.v[i]);
		}
	orh_strv_free(&imports);
	orh_toml_free(&t);
}

void orh_inst_watch_dirs(const struct orh_cfg_files *files, const char *config,
			 struct orh_strv *dirs)
{
	if (config)
		push_dir_of(dirs, config);
	for (size_t i = 0; i < files->n; i++) {
		push_dir_of(dirs, files->v[i].path);
		if (config && files->v[i].old && !strcmp(files->v[i].path, config))
			push_imports(dirs, config, files->v[i].old);
	}
}

static ssize_t index_of(const struct orh_inst_watch *w, const char *dir)
{
	for (size_t i = 0; i < w->dirs.n; i++)
		if (!strcmp(w->dirs.v[i], dir))
			return (ssize_t)i;
	return -1;
}

int orh_inst_watch_set(struct orh_inst_watch *w, const char *root, const struct orh_strv *dirs,
		       struct orh_err *err)
{
	if (w->fd < 0) {
		w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
		if (w->fd < 0)
			return orh_fail_errno(err, errno, "inotify_init1");
	}
	for (size_t i = 0; i < dirs->n; i++) {
		_cleanup_free_ char *p = orh_xasprintf("%s%s", root, dirs->v[i]);
		ssize_t k = index_of(w, dirs->v[i]);
		int wd;

		if (k >= 0 && w->wd[k] >= 0)
			continue;
		wd = inotify_add_watch(w->fd, p, WATCH_MASK);
		if (wd < 0 && errno != ENOENT && errno != ENOTDIR)
			return orh_fail_errno(err, errno, "watching '%s'", p);
		if (k < 0) {
			orh_strv_push(&w->dirs, orh_xstrdup(dirs->v[i]));
			w->wd = orh_xrealloc(w->wd, w->dirs.n * sizeof(*w->wd));
			k = (ssize_t)w->dirs.n - 1;
		}
		w->wd[k] = wd;
	}
	return 0;
}

bool orh_inst_watch_read(struct orh_inst_watch *w, struct orh_strv *changed)
{
	char buf[16 * (sizeof(struct inotify_event) + NAME_MAX + 1)]
		__attribute__((aligned(__alignof__(struct inotify_event))));
	bool overflow = false;
	ssize_t n;

	while (w->fd >= 0 && (n = read(w->fd, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;
			_cleanup_free_ char *path = NULL;
			size_t k;

			p += sizeof(*ev) + ev->len;
			if (ev->mask & IN_Q_OVERFLOW)
				overflow = true;
			for (k = 0; k < w->dirs.n && w->wd[k] != ev->wd; k++)
				;
			if (k == w->dirs.n)
				continue;
			if (ev->mask & IN_IGNORED)
				w->wd[k] = -1; /* gone: watched again once it is back */
			path = ev->len && ev->name[0] ?
				       orh_xasprintf("%s%s%s", w->dirs.v[k],
						     strcmp(w->dirs.v[k], "/") ? "/" : "", ev->name) :
				       orh_xstrdup(w->dirs.v[k]);
			if (!orh_strv_contains(changed, path))
				orh_strv_push(changed, TAKE_PTR(path));
		}
	}
	return overflow;
}

void orh_inst_watch_free(struct orh_inst_watch *w)
{
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
	orh_strv_free(&w->dirs);
	free(w->wd);
	w->wd = NULL;
}

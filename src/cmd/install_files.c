/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What `install` adds under a host root, and its removal (include/orh/cmd/install.h). Each
 * directory made, file or link written is recorded in the manifest before the next step,
 * so that an undo or a purge, also one after a killed installer, removes what was added
 * and nothing that was there before. The undo removes the marks of the installed state and
 * the templates it made; the purge removes the rest.
 *
 * The manifest is text: "engine NAME HANDLER CONFIG" ("-": the engine's default config)
 * while the engine is configured, with "shim PATH", "socket PATH" and "restart MODE" where
 * they were given and "pending" while an undo kept it for running containers; then one
 * line per entry, "KIND PATH", in the order added.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orh/base/atomic.h"
#include "orh/cmd/install.h"
#include "orh/base/rootfs.h"

#define INST_MANIFEST_MAX_BYTES (1024 * 1024)
#define INST_COMPARE_MAX_BYTES (256 * 1024 * 1024)

void orh_inst_free(struct orh_inst_manifest *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->v[i].path);
	free(m->v);
	free(m->engine);
	free(m->handler);
	free(m->engine_config);
	free(m->shim);
	free(m->socket);
	free(m->restart);
	memset(m, 0, sizeof(*m));
}

bool orh_inst_has(const struct orh_inst_manifest *m, const char *path)
{
	for (size_t i = 0; i < m->n; i++)
		if (!strcmp(m->v[i].path, path))
			return true;
	return false;
}

static void add_entry(struct orh_inst_manifest *m, char kind, const char *path)
{
	m->v = orh_xgrow(m->v, m->n + 1, sizeof(*m->v));
	m->v[m->n++] = (struct orh_inst_entry){ .kind = kind, .path = orh_xstrdup(path) };
}

void orh_inst_add_dir(struct orh_inst_manifest *m, const char *path)
{
	add_entry(m, 'd', path);
}

void orh_inst_add_file(struct orh_inst_manifest *m, const char *path)
{
	add_entry(m, 'f', path);
}

static bool ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), t = strlen(tail);

	return n >= t && !strcmp(s + n - t, tail);
}

static int parse_line(struct orh_inst_manifest *m, char *line, unsigned no, struct orh_err *err)
{
	const struct {
		const char *key;
		char **v;
	} how[] = { { "shim", &m->shim }, { "socket", &m->socket }, { "restart", &m->restart } };
	char *a = NULL, *b = NULL, *c = NULL;

	if (!*line || line[0] == '#')
		return 0;
	if (!strncmp(line, "engine ", 7)) {
		a = line + 7;
		b = strchr(a, ' ');
		c = b ? strchr(b + 1, ' ') : NULL;
		if (!c)
			return orh_fail(err, EINVAL, "%s:%u: an engine line without its three values",
					ORH_INSTALL_MANIFEST, no);
		*b++ = '\0';
		*c++ = '\0';
		m->engine = orh_xstrdup(a);
		m->handler = orh_xstrdup(b);
		m->engine_config = strcmp(c, "-") ? orh_xstrdup(c) : NULL;
		return 0;
	}
	if (!strcmp(line, "pending")) {
		m->pending = true;
		return 0;
	}
	for (size_t i = 0; i < ORH_ARRAY_SIZE(how); i++)
		if (orh_startswith(line, how[i].key) && line[strlen(how[i].key)] == ' ') {
			a = line + strlen(how[i].key) + 1;
			if (!*a || strchr(a, ' '))
				return orh_fail(err, EINVAL, "%s:%u: a %s line without its one value",
						ORH_INSTALL_MANIFEST, no, how[i].key);
			free(*how[i].v);
			*how[i].v = orh_xstrdup(a);
			return 0;
		}
	if (!line[0] || !strchr("dflcst", line[0]) || line[1] != ' ' || line[2] != '/' ||
	    strstr(line, "/../") || strstr(line, "/./") || strstr(line, "//") ||
	    ends_with(line, "/..") || ends_with(line, "/."))
		return orh_fail(err, EINVAL, "%s:%u: not 'KIND /PATH' (a path without '.', '..' "
				"or empty components)", ORH_INSTALL_MANIFEST, no);
	add_entry(m, line[0], line + 2);
	return 0;
}

/* dirfd of the host path's directory under root, and its last component in *name. The
 * directory is resolved inside root (symlinks followed, absolute ones from root, never above
 * it: orh_rootfs_parent()), so that nothing outside root is written or removed; with
 * create, the directories on the way that a link leads to are made. */
static int open_parent_at(const char *root, const char *path, bool create, const char **name,
			  struct orh_err *err)
{
	_cleanup_close_ int rootfd = -1, pfd = -1;
	char last[NAME_MAX + 1];
	int fd, r;

	*name = strrchr(path, '/') + 1;
	r = orh_rootfs_open(*root ? root : "/", &rootfd, err);
	if (r >= 0)
		r = orh_rootfs_parent(rootfd, path, create, ORH_MOUNT_ANY, &pfd, last, err);
	if (r < 0)
		return orh_err_prefix(err, "under the root '%s'", *root ? root : "/");
	fd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return orh_fail_errno(err, errno, "opening the directory of '%s%s'", root, path);
	return fd;
}

static int open_parent(const char *root, const char *path, const char **name, struct orh_err *err)
{
	return open_parent_at(root, path, false, name, err);
}

int orh_inst_load(const char *root, struct orh_inst_manifest *m, struct orh_err *err)
{
	_cleanup_free_ char *p = orh_xasprintf("%s" ORH_INSTALL_MANIFEST, root);
	struct orh_err ignored = { 0 };
	const char *name = NULL;
	_cleanup_close_ int dirfd = open_parent(root, ORH_INSTALL_MANIFEST, &name, &ignored);
	_cleanup_close_ int fd = dirfd < 0 ? -1 : openat(dirfd, name, O_RDONLY | O_CLOEXEC |
							 O_NOCTTY | O_NOFOLLOW | O_NONBLOCK);
	_cleanup_free_ char *text = NULL;
	char *line = NULL, *next = NULL;
	size_t len = 0;
	unsigned no = 0;
	int r = 0;

	memset(m, 0, sizeof(*m));
	if ((dirfd < 0 && dirfd == -ENOENT) || (fd < 0 && errno == ENOENT))
		return 0;
	if (dirfd < 0)
		return orh_fail(err, -dirfd, "opening '%s': %s", p, ignored.msg);
	if (fd < 0)
		return orh_fail_errno(err, errno, "opening '%s'", p);
	r = orh_read_fd_all(fd, INST_MANIFEST_MAX_BYTES, &text, &len);
	if (r < 0)
		return orh_fail_errno(err, r, "reading '%s'", p);
	for (line = text; r >= 0 && line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		r = parse_line(m, line, ++no, err);
	}
	if (r < 0)
		orh_inst_free(m);
	return r;
}

/* mkdir -p of the host directory dir under root, inside it (open_parent()); each directory
 * made is recorded. */
static int make_dirs(const char *root, struct orh_inst_manifest *m, const char *dir,
		     struct orh_err *err)
{
	_cleanup_free_ char *p = orh_xasprintf("%s/", dir);

	for (char *q = p + 1; *q; q++) {
		_cleanup_close_ int dirfd = -1;
		const char *name = NULL;

		if (*q != '/')
			continue;
		*q = '\0';
		dirfd = open_parent_at(root, p, true, &name, err);
		if (dirfd < 0)
			return dirfd;
		if (mkdirat(dirfd, name, 0755) == 0)
			add_entry(m, 'd', p);
		else if (errno != EEXIST)
			return orh_fail_errno(err, errno, "creating '%s%s'", root, p);
		*q = '/';
	}
	return 0;
}

static char *manifest_text(const struct orh_inst_manifest *m)
{
	char *text = orh_xstrdup("# oci-rdma-hook install: what it added under this root, "
				 "removed in reverse order by its undo and purge\n");

	if (m->engine) {
		char *t = orh_xasprintf("%sengine %s %s %s\n", text, m->engine, m->handler,
					m->engine_config ? m->engine_config : "-");
		free(text);
		text = t;
	}
	for (size_t i = 0; m->engine && i < 3; i++) {
		const char *k[] = { "shim", "socket", "restart" };
		const char *v[] = { m->shim, m->socket, m->restart };
		char *t = v[i] ? orh_xasprintf("%s%s %s\n", text, k[i], v[i]) : NULL;

		if (t) {
			free(text);
			text = t;
		}
	}
	if (m->engine && m->pending) {
		char *t = orh_xasprintf("%spending\n", text);

		free(text);
		text = t;
	}
	for (size_t i = 0; i < m->n; i++) {
		char *t = orh_xasprintf("%s%c %s\n", text, m->v[i].kind, m->v[i].path);
		free(text);
		text = t;
	}
	return text;
}

int orh_inst_save(const char *root, struct orh_inst_manifest *m, struct orh_err *err)
{
	_cleanup_free_ char *dir = orh_xstrdup(ORH_INSTALL_MANIFEST);
	_cleanup_free_ char *text = NULL;
	_cleanup_close_ int dirfd = -1;
	const char *name = NULL;
	int r;

	*strrchr(dir, '/') = '\0';
	r = make_dirs(root, m, dir, err);
	if (r < 0)
		return r;
	text = manifest_text(m);
	dirfd = open_parent(root, ORH_INSTALL_MANIFEST, &name, err);
	if (dirfd < 0)
		return dirfd;
	r = orh_write_atomic(dirfd, name, text, strlen(text), 0644, err);
	return r < 0 ? orh_err_prefix(err, "writing %s%s", root, ORH_INSTALL_MANIFEST) : 0;
}

static bool exists_at(const char *root, const char *path)
{
	_cleanup_close_ int dirfd = -1;
	struct orh_err ignored = { 0 };
	const char *name = NULL;
	struct stat st;

	dirfd = open_parent(root, path, &name, &ignored);
	return dirfd >= 0 && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* Does dirfd/name hold exactly data (unblocked: once configure's blocks, and the empty
 * lines before them, are left out)? */
static bool same_content(int dirfd, const char *name, const char *data, size_t len,
			 bool unblocked)
{
	_cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
	_cleanup_free_ char *old = NULL, *own = NULL;
	size_t n = 0;

	if (fd < 0 || orh_read_fd_all(fd, INST_COMPARE_MAX_BYTES, &old, &n) < 0)
		return false;
	if (unblocked && strlen(old) == n) {
		size_t k;

		own = orh_block_strip_all(old);
		/* less the empty line configure puts before its block */
		k = strlen(own);
		while (k > len && k >= 2 && own[k - 1] == '\n' && own[k - 2] == '\n')
			k--;
		return k == len && !memcmp(own, data, len);
	}
	return n == len && !memcmp(old, data, len);
}

int orh_inst_put(const char *root, struct orh_inst_manifest *m, char kind, const char *path,
		 const char *data, size_t len, unsigned mode, const char **what,
		 struct orh_err *err)
{
	_cleanup_free_ char *dir = orh_xstrdup(path);
	_cleanup_close_ int dirfd = -1;
	const char *name = NULL;
	bool ours = orh_inst_has(m, path);
	struct stat st;
	int r;

	*strrchr(dir, '/') = '\0';
	r = *dir ? make_dirs(root, m, dir, err) : 0;
	if (r < 0)
		return r;
	dirfd = open_parent(root, path, &name, err);
	if (dirfd < 0)
		return dirfd;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		/* there before: never rewritten */
		*what = "kept";
		if (ours && same_content(dirfd, name, data, len, kind == 'c') &&
		    (st.st_mode & 07777) == mode)
			*what = "unchanged";
		if (!ours || !strcmp(*what, "unchanged"))
			return orh_inst_save(root, m, err);
		/* a file of our own with other content: the new one, with the image's mode */
		*what = "updated";
		if (unlinkat(dirfd, name, 0) < 0)
			return orh_fail_errno(err, errno, "removing '%s%s'", root, path);
	} else {
		*what = "created";
		add_entry(m, kind, path);
	}
	r = orh_inst_save(root, m, err);
	if (r >= 0)
		r = orh_write_atomic(dirfd, name, data, len, mode, err);
	return r < 0 ? orh_err_prefix(err, "writing '%s%s'", root, path) : 0;
}

int orh_inst_link(const char *root, struct orh_inst_manifest *m, const char *path,
		  const char *target, const char **what, struct orh_err *err)
{
	_cleanup_close_ int dirfd = -1;
	const char *name = NULL;
	char old[4096] = "";
	ssize_t n;
	int r;

	dirfd = open_parent(root, path, &name, err);
	if (dirfd < 0)
		return dirfd;
	n = readlinkat(dirfd, name, old, sizeof(old) - 1);
	if (n >= 0 || errno != ENOENT) {
		if (n >= 0)
			old[n] = '\0';
		*what = orh_inst_has(m, path) && n >= 0 && !strcmp(old, target) ? "unchanged"
										 : "kept";
		return 0;
	}
	*what = "created";
	add_entry(m, 'l', path);
	r = orh_inst_save(root, m, err);
	if (r >= 0 && symlinkat(target, dirfd, name) < 0)
		r = orh_fail_errno(err, errno, "linking '%s%s' to '%s'", root, path, target);
	return r;
}

/* Remove one entry (a directory: where it is empty). 1 removed, 0 gone already or kept
 * (a directory not empty), -errno. */
static int remove_one(const char *root, const struct orh_inst_entry *e, struct orh_err *err)
{
	_cleanup_close_ int dirfd = -1;
	const char *name = NULL;

	dirfd = open_parent(root, e->path, &name, err);
	if (dirfd < 0)
		return dirfd == -ENOENT ? 0 : dirfd;
	if (unlinkat(dirfd, name, e->kind == 'd' ? AT_REMOVEDIR : 0) == 0)
		return 1;
	if (errno == ENOENT || (e->kind == 'd' && (errno == ENOTEMPTY || errno == EEXIST)))
		return 0;
	return orh_fail_errno(err, errno, "removing '%s%s'", root, e->path);
}

/* Drop entry i of m. */
static void drop_entry(struct orh_inst_manifest *m, size_t i)
{
	free(m->v[i].path);
	memmove(&m->v[i], &m->v[i + 1], (m->n - i - 1) * sizeof(*m->v));
	m->n--;
}

/* Is the host path under root exactly text? */
static bool holds(const char *root, const char *path, const char *text)
{
	_cleanup_close_ int dirfd = -1;
	const char *name = NULL;
	struct orh_err ignored = { 0 };

	dirfd = open_parent(root, path, &name, &ignored);
	return dirfd >= 0 && same_content(dirfd, name, text, strlen(text), false);
}

/* Remove entry i (kept where r already failed: e2 then takes the error); done says so. */
static int remove_listed(const char *root, struct orh_inst_manifest *m, size_t i, int r,
			 struct orh_strv *done, struct orh_err *err)
{
	struct orh_err e2 = { 0 };
	int r2 = remove_one(root, &m->v[i], r < 0 ? &e2 : err);

	if (r2 > 0)
		orh_strv_pushf(done, "removed %s", m->v[i].path);
	if (r2 >= 0 && (r2 > 0 || m->v[i].kind != 'd'))
		drop_entry(m, i);
	return r < 0 ? r : r2 < 0 ? r2 : 0;
}

int orh_inst_undo_kind(const char *root, struct orh_inst_manifest *m, char kind,
		       const char *base, struct orh_strv *done, struct orh_err *err)
{
	int r = 0, r2;

	for (size_t i = m->n; i-- > 0;) {
		if (m->v[i].kind != kind)
			continue;
		if (kind == 't' && !holds(root, m->v[i].path, base) &&
		    exists_at(root, m->v[i].path)) {
			orh_strv_pushf(done, "kept %s (edited)", m->v[i].path);
			drop_entry(m, i);
			continue;
		}
		r = remove_listed(root, m, i, r, done, err);
	}
	for (size_t i = m->n; i-- > 0;)
		if (m->v[i].kind == 'd')
			r = remove_listed(root, m, i, r, done, err);
	r2 = orh_inst_save(root, m, r < 0 ? &(struct orh_err){ 0 } : err);
	return r < 0 ? r : r2;
}

int orh_inst_remove_all(const char *root, struct orh_inst_manifest *m, struct orh_strv *done,
			struct orh_err *err)
{
	struct orh_inst_entry man = { .kind = 'f', .path = (char *)ORH_INSTALL_MANIFEST };
	struct orh_err e2 = { 0 };
	int r = 0, r2;

	for (size_t i = m->n; i-- > 0;)
		if (m->v[i].kind != 'd')
			r = remove_listed(root, m, i, r, done, err);
	r2 = remove_one(root, &man, r < 0 ? &e2 : err);
	if (r2 > 0)
		orh_strv_pushf(done, "removed %s", ORH_INSTALL_MANIFEST);
	r = r < 0 ? r : r2 < 0 ? r2 : 0;
	for (size_t i = m->n; i-- > 0;) {
		if (m->v[i].kind != 'd')
			continue;
		r2 = remove_one(root, &m->v[i], r < 0 ? &e2 : err);
		if (r2 > 0)
			orh_strv_pushf(done, "removed %s", m->v[i].path);
		else if (r2 == 0 && exists_at(root, m->v[i].path))
			orh_strv_pushf(done, "kept %s (not empty)", m->v[i].path);
		r = r < 0 ? r : r2 < 0 ? r2 : 0;
	}
	return r;
}

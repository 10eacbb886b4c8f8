/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The RDMA classes of sysfs as the host has them (include/orh/node/sysclass.h): each class
 * directory's symlinks (name, target, the ibdev file behind the verbs and mad entries)
 * and its regular files. Reads only.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orh/node/sysclass.h"

const char *const orh_sysview_classes[ORH_SYSVIEW_N_CLASSES] = {
	"infiniband",
	"infiniband_verbs",
	"infiniband_mad",
};

static int add_link(int dfd, const char *dir, const char *name, bool own_name,
		    struct orh_sysview_class *c, struct orh_err *err)
{
	struct orh_sysview_link *l = NULL;
	char path[ORH_NAME_MAX + 8];
	ssize_t n;

	if (c->n_links >= ORH_SYSVIEW_MAX_ENTRIES)
		return orh_fail(err, E2BIG, "'%s' holds more than %d entries", dir,
				ORH_SYSVIEW_MAX_ENTRIES);
	if (strlen(name) >= ORH_NAME_MAX)
		return 0; /* no device or node has such a name: never kept */
	c->links = orh_xgrow(c->links, c->n_links, sizeof(*c->links));
	l = &c->links[c->n_links];
	memset(l, 0, sizeof(*l));
	n = readlinkat(dfd, name, l->target, sizeof(l->target));
	if (n < 0 || (size_t)n >= sizeof(l->target))
		return 0; /* gone since the listing, or too long: left out */
	l->target[n] = '\0';
	orh_strlcpy(l->name, name, sizeof(l->name));
	if (own_name) {
		orh_strlcpy(l->ibdev, name, sizeof(l->ibdev));
	} else {
		snprintf(path, sizeof(path), "%s/ibdev", name);
		if (orh_read_file_at(dfd, path, l->ibdev, sizeof(l->ibdev)) < 0)
			l->ibdev[0] = '\0';
		orh_strstrip(l->ibdev);
	}
	c->n_links++;
	return 0;
}

static int add_file(int dfd, const char *dir, const char *name, struct orh_sysview_class *c,
		    struct orh_err *err)
{
	char buf[ORH_SYSVIEW_FILE_MAX_BYTES];
	struct orh_sysview_file *f = NULL;
	ssize_t n;

	if (c->n_files >= ORH_SYSVIEW_MAX_FILES)
		return orh_fail(err, E2BIG, "'%s' holds more than %d files", dir,
				ORH_SYSVIEW_MAX_FILES);
	if (strlen(name) >= ORH_NAME_MAX)
		return 0;
	n = orh_read_file_at(dfd, name, buf, sizeof(buf));
	if (n < 0)
		return orh_fail_errno(err, (int)-n, "reading '%s/%s'", dir, name);
	c->files = orh_xgrow(c->files, c->n_files, sizeof(*c->files));
	f = &c->files[c->n_files++];
	memset(f, 0, sizeof(*f));
	orh_strlcpy(f->name, name, sizeof(f->name));
	f->data = orh_xmalloc((size_t)n + 1);
	memcpy(f->data, buf, (size_t)n + 1);
	f->len = (size_t)n;
	return 0;
}

static int cmp_link(const void *a, const void *b)
{
	return strcmp(((const struct orh_sysview_link *)a)->name,
		      ((const struct orh_sysview_link *)b)->name);
}

static int cmp_file(const void *a, const void *b)
{
	return strcmp(((const struct orh_sysview_file *)a)->name,
		      ((const struct orh_sysview_file *)b)->name);
}

static int read_class(const char *sysroot, size_t k, struct orh_sysview_class *c,
		      struct orh_err *err)
{
	_cleanup_free_ char *dir = orh_xasprintf("%s/sys/class/%s",
						 strcmp(sysroot, "/") ? sysroot : "",
						 orh_sysview_classes[k]);
	struct dirent *de;
	_cleanup_dir_ DIR *d = NULL;
	int dfd, r = 0;

	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 && errno == ENOENT)
		return 0;
	if (dfd < 0 || !(d = fdopendir(dfd))) {
		r = orh_fail_errno(err, errno, "opening '%s'", dir);
		if (dfd >= 0)
			close(dfd);
		return r;
	}
	c->present = true;
	while (r == 0 && (errno = 0, de = readdir(d))) {
		struct stat st;

		if (de->d_name[0] == '.' ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISLNK(st.st_mode))
			r = add_link(dirfd(d), dir, de->d_name, k == 0, c, err);
		else if (S_ISREG(st.st_mode))
			r = add_file(dirfd(d), dir, de->d_name, c, err);
	}
	if (r == 0 && errno)
		r = orh_fail_errno(err, errno, "listing '%s'", dir);
	/* in name order: the view's id does not depend on the listing's order */
	if (c->n_links)
		qsort(c->links, c->n_links, sizeof(*c->links), cmp_link);
	if (c->n_files)
		qsort(c->files, c->n_files, sizeof(*c->files), cmp_file);
	return r;
}

int orh_sysview_read(const char *sysroot, struct orh_sysview *v, struct orh_err *err)
{
	memset(v, 0, sizeof(*v));
	for (size_t k = 0; k < ORH_SYSVIEW_N_CLASSES; k++) {
		int r = read_class(sysroot ? sysroot : "/", k, &v->cls[k], err);

		if (r < 0) {
			orh_sysview_free(v);
			return r;
		}
	}
	return 0;
}

void orh_sysview_free(struct orh_sysview *v)
{
	for (size_t k = 0; k < ORH_SYSVIEW_N_CLASSES; k++) {
		for (size_t i = 0; i < v->cls[k].n_files; i++)
			free(v->cls[k].files[i].data);
		free(v->cls[k].files);
		free(v->cls[k].links);
	}
	memset(v, 0, sizeof(*v));
}

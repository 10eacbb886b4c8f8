/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The containers' state directories in the run dir (orh/apply/statedir.h): a directory's name
 * from its container's id, made root-only, its JSON files loaded, the entries the hook
 * makes in it told from others, and its removal.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orh/apply/statedir.h"

bool orh_state_id_usable(const char *id)
{
	size_t n = id ? strlen(id) : 0;

	if (n == 0 || n > NAME_MAX || !strcmp(id, ".") || !strcmp(id, ".."))
		return false;
	return strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
			  "_+.-") == n;
}

bool orh_state_dir_name(const char *id, char out[NAME_MAX + 1])
{
	if (!orh_state_id_usable(id))
		return false;
	memcpy(out, id, strlen(id) + 1);
	if (out[0] == '.')
		out[0] = ORH_STATE_DOT;
	return true;
}

bool orh_state_id_of_dir(const char *name, char out[NAME_MAX + 1])
{
	if (name[0] == '.' || strlen(name) > NAME_MAX)
		return false;
	memcpy(out, name, strlen(name) + 1);
	if (out[0] == ORH_STATE_DOT)
		out[0] = '.';
	return orh_state_id_usable(out);
}

char *orh_state_dir_path(const char *run_dir, const char *id)
{
	char name[NAME_MAX + 1];

	return orh_state_dir_name(id, name) ? orh_xasprintf("%s/%s", run_dir, name) : NULL;
}

int orh_state_dir_open(const char *state_dir, bool *created, struct orh_err *err)
{
	char parent[PATH_MAX];
	char *slash;
	int fd;

	*created = false;
	snprintf(parent, sizeof(parent), "%s", state_dir);
	slash = strrchr(parent, '/');
	if (slash && slash != parent) {
		*slash = '\0';
		if (mkdirat(AT_FDCWD, parent, 0755) < 0 && errno != EEXIST)
			return orh_fail_errno(err, errno, "making '%s'", parent);
	}
	if (mkdirat(AT_FDCWD, state_dir, 0700) == 0)
		*created = true;
	else if (errno != EEXIST)
		return orh_fail_errno(err, errno, "making '%s'", state_dir);
	fd = open(state_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return orh_fail_errno(err, errno, "opening '%s'", state_dir);
	return fd;
}

char *orh_state_file_read(int dirfd, const char *path, size_t max, struct stat *st,
			  size_t *len)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *buf = NULL;

	*len = 0;
	/* nothing but a regular file is opened (a device's open may act), and none waits */
	if (fstatat(dirfd, path, st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st->st_mode))
		return NULL;
	fd = openat(dirfd, path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, st) < 0 || !S_ISREG(st->st_mode) || (size_t)st->st_size > max)
		return NULL;
	/* one read for the whole file (json_loadfd would read it a byte at a time) */
	buf = orh_xmalloc((size_t)st->st_size + 1);
	while (*len <= (size_t)st->st_size) {
		ssize_t n = read(fd, buf + *len, (size_t)st->st_size + 1 - *len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		*len += (size_t)n;
	}
	if (*len > (size_t)st->st_size)
		return NULL; /* it grew while read: not a file written whole */
	buf[*len] = '\0';
	return TAKE_PTR(buf);
}

json_t *orh_state_file_load(int dirfd, const char *path, size_t max, struct stat *st)
{
	size_t len;
	_cleanup_free_ char *buf = orh_state_file_read(dirfd, path, max, st, &len);

	return buf ? json_loadb(buf, len, 0, NULL) : NULL;
}

bool orh_state_entry_ours(const char *name)
{
	static const char *const files[] = { ORH_STATE_NCCL_CONF, ORH_RECORD_FILE,
					     ORH_HANDOFF_FILE, ORH_START_FILE };

	for (size_t i = 0; i < ORH_ARRAY_SIZE(files); i++) {
		size_t n = strlen(files[i]);

		if (!strcmp(name, files[i]) ||
		    (name[0] == '.' && !strncmp(name + 1, files[i], n) &&
		     orh_startswith(name + 1 + n, ".orh-")))
			return true;
	}
	return false;
}

bool orh_state_dir_remove_at(int runfd, const char *name)
{
	int fd = openat(runfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct dirent *de;
	_cleanup_dir_ DIR *dir = NULL;

	if (fd < 0 || !(dir = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	while ((de = readdir(dir)))
		if (orh_state_entry_ours(de->d_name))
			unlinkat(dirfd(dir), de->d_name, 0);
	return unlinkat(runfd, name, AT_REMOVEDIR) == 0;
}

bool orh_state_dir_remove(const char *run_dir, const char *id)
{
	_cleanup_close_ int runfd = open(run_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	char name[NAME_MAX + 1];

	return orh_state_dir_name(id, name) && runfd >= 0 && orh_state_dir_remove_at(runfd, name);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sweep of the run dir (orh/apply/sweep.h): the state directories of containers that are
 * gone, looked at in turns from where the last sweep stopped, and the sysfs views that no
 * container whose state directory is left links to.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "orh/base/atomic.h"
#include "orh/apply/record.h"
#include "orh/apply/statedir.h"
#include "orh/apply/sweep.h"
#include "orh/apply/sysview.h"

/* Is the state directory runfd/name stale: its record's container gone, as seen from the
 * namespaces `here`, or no record and older than ORH_RECORD_ORPHAN_SECONDS? */
static bool stale(int runfd, const char *name, const char *proc, const struct orh_ns_ids *here)
{
	char path[PATH_MAX];
	struct stat st;
	json_t *rec;
	bool gone;

	if (fstatat(runfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode) ||
	    st.st_uid != geteuid())
		return false;
	snprintf(path, sizeof(path), "%s/" ORH_RECORD_FILE, name);
	if (faccessat(runfd, path, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT && time(NULL) - st.st_mtime > ORH_RECORD_ORPHAN_SECONDS;
	rec = orh_record_load_at(runfd, path);
	gone = rec && orh_record_liveness(rec, proc, here) == ORH_ALIVE_NO;
	json_decref(rec);
	return gone;
}

/* Has a sweep of runfd run in the last `every` seconds (the mtime of ORH_RECORD_SWEPT)?
 * If not, cursor gets the name of the last state directory it looked at ("" for none).
 * Only a regular file is opened, without blocking. */
static bool swept_lately(int runfd, unsigned every, char cursor[NAME_MAX + 1])
{
	_cleanup_close_ int fd = -1;
	struct stat st;
	ssize_t n;

	cursor[0] = '\0';
	if (fstatat(runfd, ORH_RECORD_SWEPT, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
		return false;
	if (every && time(NULL) - st.st_mtime < (time_t)every)
		return true;
	fd = openat(runfd, ORH_RECORD_SWEPT,
		    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return false;
	n = read(fd, cursor, NAME_MAX);
	cursor[n > 0 ? n : 0] = '\0';
	return false;
}

/* Mark that a sweep runs now and looks at `last` last: a new ORH_RECORD_SWEPT (renamed
 * over whatever is there, a FIFO included). */
static void mark_swept(int runfd, const char *last)
{
	struct orh_replace how = { .type = S_IFREG, .mode = 0600, .data = last,
				   .len = strlen(last), .sweep = true };
	struct orh_err err = { 0 };

	orh_replace_at(runfd, ORH_RECORD_SWEPT, &how, &err);
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names under runfd that may be state directories (the run dir's own start with a
 * dot), sorted; at most ORH_RECORD_SWEEP_LIST_MAX. */
static size_t list_names(int runfd, char ***out)
{
	int fd = openat(runfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *de;
	char **v = NULL;
	size_t n = 0;
	_cleanup_dir_ DIR *dir = NULL;

	*out = NULL;
	if (fd < 0 || !(dir = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	while ((de = readdir(dir)) && n < ORH_RECORD_SWEEP_LIST_MAX) {
		if (de->d_name[0] == '.')
			continue;
		v = orh_xgrow(v, n, sizeof(*v));
		v[n++] = orh_xstrdup(de->d_name);
	}
	if (n)
		qsort(v, n, sizeof(*v), cmp_names);
	*out = v;
	return n;
}

/* The state directories: ORH_RECORD_SWEEP_MAX at most, in the order of their names, from
 * the first after cursor (around to the first name after the last); the mark names the
 * last of them. */
static int sweep_dirs(int runfd, char *const *names, size_t n, const char *cursor,
		      const char *skip, const char *proc)
{
	size_t start = 0, count = n < ORH_RECORD_SWEEP_MAX ? n : ORH_RECORD_SWEEP_MAX;
	struct orh_ns_ids here;
	int removed = 0;

	while (start < n && strcmp(names[start], cursor) <= 0)
		start++;
	if (start == n)
		start = 0;
	mark_swept(runfd, count ? names[(start + count - 1) % n] : "");
	orh_ns_ids_read(proc, &here);
	for (size_t k = 0; k < count; k++) {
		size_t i = (start + k) % n;

		if (strcmp(names[i], skip) && stale(runfd, names[i], proc, &here) &&
		    orh_state_dir_remove_at(runfd, names[i]))
			removed++;
	}
	return removed;
}

int orh_record_sweep(const char *run_dir, const char *proc, const char *skip_id,
		     unsigned every)
{
	_cleanup_close_ int runfd = open(run_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	char cursor[NAME_MAX + 1], skip[NAME_MAX + 1] = "";
	char **names = NULL;
	int removed = 0;
	size_t n;

	if (runfd < 0 || swept_lately(runfd, every, cursor))
		return 0;
	if (skip_id && !orh_state_dir_name(skip_id, skip))
		skip[0] = '\0';
	n = list_names(runfd, &names);
	removed = sweep_dirs(runfd, names, n, cursor, skip, proc);
	/* a view stays while a container whose state directory is left links to it */
	removed += orh_sysview_sweep(runfd, ORH_SYSVIEW_SUBDIR, ORH_RECORD_ORPHAN_SECONDS);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return removed;
}

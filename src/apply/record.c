/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The record of what was done for one container (orh/apply/record.h): what the spec holds for
 * it, the atomic write of its text (record_text.c writes it) into its state directory
 * (orh/apply/statedir.h), and whether its container is there.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "orh/base/atomic.h"
#include "orh/apply/record.h"
#include "orh/apply/statedir.h"
#include "orh/apply/spec.h"
#include "orh/apply/sysview.h"

/* The sysfs view whose class directory the spec mounts (the spec edit's), into id. */
static void spec_view(const json_t *spec, char id[17])
{
	const size_t n = strlen(ORH_SYSVIEW_DIR "/");
	const json_t *m;
	size_t i;

	json_array_foreach(json_object_get(spec, "mounts"), i, m) {
		const char *src = json_string_value(json_object_get(m, "source"));

		if (!src || strncmp(src, ORH_SYSVIEW_DIR "/", n) || strlen(src + n) < 17 ||
		    src[n + 16] != '/')
			continue;
		memcpy(id, src + n, 16);
		id[16] = '\0';
		if (orh_sysview_id_valid(id))
			return;
	}
	id[0] = '\0';
}

void orh_record_spec(struct orh_record_in *rec, const json_t *spec)
{
	const json_t *devs = json_object_get(json_object_get(spec, "linux"), "devices");
	const json_t *rl = json_object_get(json_object_get(spec, "process"), "rlimits"), *e;
	size_t i;

	spec_view(spec, rec->sysfs_view);
	rec->spec_devices = 0;
	json_array_foreach(devs, i, e)
		if (orh_startswith(json_string_value(json_object_get(e, "path")) ?: "", ORH_DEV_DIR))
			rec->spec_devices++;
	json_array_foreach(rl, i, e) {
		uint64_t v = UINT64_MAX;

		if (strcmp(json_string_value(json_object_get(e, "type")) ?: "", "RLIMIT_MEMLOCK"))
			continue;
		/* a value past int64 (unlimited) is a marker (orh_json_get_u64) */
		rec->spec_memlock_set = true;
		rec->spec_memlock = orh_json_get_u64(json_object_get(e, "soft"), &v) ? v : UINT64_MAX;
	}
}

/* The container's link to the sysfs view its record names, if any: in the views'
 * directory beside its state directory. */
static int write_view_link(const char *state_dir, const char *id, struct orh_err *err)
{
	const char *name = strrchr(state_dir, '/');
	_cleanup_free_ char *base = NULL;

	if (!orh_sysview_id_valid(id))
		return 0;
	base = name ? orh_xasprintf("%.*s/" ORH_SYSVIEW_SUBDIR, (int)(name - state_dir), state_dir)
		    : orh_xstrdup(ORH_SYSVIEW_SUBDIR);
	return orh_sysview_link(base, name ? name + 1 : state_dir, id, err);
}

int orh_record_write(const char *state_dir, const struct orh_record_in *in,
		     struct orh_err *err)
{
	size_t len = 0;
	_cleanup_free_ char *text = orh_record_text(in, &len); /* one line: inspect indents it */
	_cleanup_close_ int dirfd = -1;
	struct orh_replace how = { .type = S_IFREG, .mode = 0644 };
	bool created;
	int r;

	if (!text)
		return orh_fail(err, EINVAL, "formatting the record: a string of it is not UTF-8");
	dirfd = orh_state_dir_open(state_dir, &created, err);
	if (dirfd < 0)
		return dirfd;
	/* the link first: the sweep reads no record for the views; a record is written even
	 * where the link could not be (its error is returned then) */
	r = write_view_link(state_dir, in->sysfs_view, err);
	how.data = text;
	how.len = len;
	how.what = ORH_RECORD_FILE;
	if (orh_replace_at(dirfd, ORH_RECORD_FILE, &how, err) < 0)
		return -err->code;
	return r;
}

void orh_ns_ids_read(const char *proc, struct orh_ns_ids *ns)
{
	char path[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "%s/self/ns/pid", proc);
	ns->pid = stat(path, &st) == 0 ? (unsigned long long)st.st_ino : 0;
	snprintf(path, sizeof(path), "%s/self/ns/mnt", proc);
	ns->mnt = stat(path, &st) == 0 ? (unsigned long long)st.st_ino : 0;
}

/* The start time of pid under proc; 0 when it is gone or unreadable. */
static unsigned long long start_time_of(const char *proc, long pid)
{
	char path[PATH_MAX], buf[1024];
	unsigned long long t = 0;

	snprintf(path, sizeof(path), "%s/%ld/stat", proc, pid);
	if (orh_read_file_at(AT_FDCWD, path, buf, sizeof(buf)) < 0 ||
	    orh_stat_start_time(buf, &t) < 0)
		return 0;
	return t;
}

/* A record the runtime shim wrote for a container it served alone (no stage, so no pid):
 * the container is there while its bundle's config.json is the one the shim wrote and the
 * runtime holds its state. */
static bool bundle_alive(const json_t *b)
{
	const char *path = json_string_value(json_object_get(b, "path"));
	_cleanup_free_ char *name = NULL;
	struct stat st;

	if (!path)
		return false;
	const char *rstate = json_string_value(json_object_get(b, "runtime_state"));
	json_int_t since = json_integer_value(json_object_get(b, "since"));

	name = orh_xasprintf("%s/config.json", path);
	if (stat(name, &st) < 0 ||
	    (json_int_t)st.st_dev != json_integer_value(json_object_get(b, "config_dev")) ||
	    (json_int_t)st.st_ino != json_integer_value(json_object_get(b, "config_ino")))
		return false;
	/* `runc run` leaves the bundle as it was, and its state goes when the container does;
	 * the runtime makes that state after the shim wrote the record */
	return !rstate || stat(rstate, &st) == 0 ||
	       (json_int_t)time(NULL) - since < ORH_RECORD_RUNTIME_GRACE;
}

enum orh_alive orh_record_liveness(const json_t *rec, const char *proc,
				   const struct orh_ns_ids *here)
{
	const json_t *version = json_object_get(rec, "version");
	json_int_t pid = json_integer_value(json_object_get(rec, "pid"));
	json_int_t st = json_integer_value(json_object_get(rec, "start_time"));
	json_int_t ns = json_integer_value(json_object_get(rec, pid > 0 ? "pid_ns" : "mnt_ns"));

	if (!json_is_integer(version) || json_integer_value(version) != ORH_RECORD_VERSION)
		return ORH_ALIVE_UNKNOWN;
	/* a pid is a number of the writer's pid namespace, a bundle's path one of its mount
	 * namespace: elsewhere they name something else, or nothing */
	if (ns <= 0 || (unsigned long long)ns != (pid > 0 ? here->pid : here->mnt))
		return ORH_ALIVE_UNKNOWN;
	if (pid <= 0)
		return bundle_alive(json_object_get(rec, "bundle")) ? ORH_ALIVE_YES : ORH_ALIVE_NO;
	return start_time_of(proc, (long)pid) == (unsigned long long)st && st != 0
		       ? ORH_ALIVE_YES
		       : ORH_ALIVE_NO;
}

bool orh_record_alive(const json_t *rec, const char *proc)
{
	struct orh_ns_ids here;

	orh_ns_ids_read(proc, &here);
	return orh_record_liveness(rec, proc, &here) == ORH_ALIVE_YES;
}

json_t *orh_record_load_at(int dirfd, const char *path)
{
	struct stat st;

	return orh_state_file_load(dirfd, path, ORH_RECORD_MAX_BYTES, &st);
}

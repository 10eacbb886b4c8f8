/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The record of what was done for one container (orh/record.h): built from values, the
 * parsing of /proc/<pid>/limits and stat, the atomic write, whether its container is
 * there, and the names of the state directories.
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

#include "orh/atomic.h"
#include "orh/handoff.h"
#include "orh/record.h"
#include "orh/spec.h"
#include "orh/sysview.h"

static json_t *limit_json(uint64_t v)
{
	return v == UINT64_MAX ? json_string("unlimited") : json_integer((json_int_t)v);
}

static const char *act_name(enum orh_activation_result a)
{
	return a == ORH_ACT_REQUESTED ? "requested" : a == ORH_ACT_DEFAULT ? "default" : "skip";
}

static json_t *strv_json(const struct orh_strv *sv)
{
	json_t *a = json_array();

	for (size_t i = 0; sv && i < sv->n; i++)
		json_array_append_new(a, json_string(sv->v[i]));
	return a;
}

/* Text from the image (a path, a file name), safe in the record: valid UTF-8, no control
 * characters (orh_text_escape). */
static json_t *image_text(const char *s)
{
	_cleanup_free_ char *t = orh_text_escape(s ? s : "");

	return json_string(t);
}

/* The image checks: what the image's libibverbs would load for each device given, its NCCL
 * copies (the one PyTorch loads marked), what was not read, and the reading's cost. */
static json_t *image_json(const struct orh_decision *d)
{
	const struct orh_image *img = &d->image;
	const struct orh_image_verdict *v = &d->image_verdict;
	json_t *o = json_object(), *devs = json_array(), *nccl = json_array();
	json_t *notes = json_array();

	json_object_set_new(o, "libibverbs", img->verbs[0] ? image_text(img->verbs) : json_null());
	if (img->verbs[0])
		json_object_set_new(o, "found_by", json_string(img->verbs_from_cache
							       ? "ld.so.cache"
							       : "the loader's directories"));
	json_object_set_new(o, "abi", img->abi ? json_integer(img->abi) : json_null());
	json_object_set_new(o, "driver_files", json_integer((json_int_t)img->n_driver_files));
	for (size_t i = 0; i < v->n_devs; i++) {
		const struct orh_image_provider *p = v->devs[i].found;
		json_t *e = json_pack("{s:s, s:o}", "device", v->devs[i].dev->name, "provider",
				      v->devs[i].provider ? json_string(v->devs[i].provider)
							  : json_null());

		json_object_set_new(e, "state", json_string(p ? orh_provider_state_name(p->state)
							     : "not judged (provider not known)"));
		if (p && p->config[0])
			json_object_set_new(e, "config", image_text(p->config));
		if (p && p->library[0])
			json_object_set_new(e, "library", image_text(p->library));
		if (p && p->other[0])
			json_object_set_new(e, "other_abi", json_pack("{s:o, s:i}", "library",
					    image_text(p->other), "abi", (int)p->other_abi));
		json_array_append_new(devs, e);
	}
	json_object_set_new(o, "devices", devs);
	json_object_set_new(o, "usable", json_integer((json_int_t)v->usable));
	for (size_t i = 0; i < img->n_nccl; i++) {
		const struct orh_image_nccl *c = &img->nccl[i];
		json_t *e = json_pack("{s:o, s:s, s:o, s:b}", "version",
				      c->version[0] ? json_string(c->version) : json_null(), "from",
				      c->from == ORH_NCCL_PIP ? "pip" : "library", "path",
				      image_text(c->path), "pytorch", c->pytorch);

		if (c->package[0])
			json_object_set_new(e, "package", image_text(c->package));
		json_array_append_new(nccl, e);
	}
	json_object_set_new(o, "nccl", nccl);
	for (size_t i = 0; i < img->notes.n; i++)
		json_array_append_new(notes, image_text(img->notes.v[i]));
	json_object_set_new(o, "notes", notes);
	json_object_set_new(o, "opens", json_integer(img->opens));
	json_object_set_new(o, "time_ms", json_real(img->ms));
	return o;
}

/* The plan: the HCAs used, the GID index per port, the socket interface, each port's
 * reason, the nodes and the memlock the decision sets. */
static json_t *plan_json(const struct orh_decision *d, const char *netns_if)
{
	const struct orh_plan *p = &d->plan;
	const struct orh_env_entry *ifname = orh_plan_env_get(p, "NCCL_SOCKET_IFNAME");
	static const char *const port_keys[] = { "hca", "port", "state", "used", "reason" };
	json_t *ports = json_array(), *nodes = json_array(), *o;

	for (size_t i = 0; i < p->n_ports; i++) {
		const struct orh_port_choice *c = &p->ports[i];
		json_t *vals[] = {
			json_string(c->dev->name), json_integer(c->port->num),
			json_string(c->port->state_text), json_boolean(c->used),
			json_string(c->reason),
		};

		o = orh_json_object_of(ORH_ARRAY_SIZE(port_keys), port_keys, vals);
		if (o && c->gid_index >= 0) {
			json_object_set_new(o, "gid_index", json_integer(c->gid_index));
			json_object_set_new(o, "gid_from_container",
					    json_boolean(c->gid_from_container));
		}
		json_array_append_new(ports, o);
	}
	for (size_t i = 0; i < p->n_nodes; i++)
		json_array_append_new(nodes, json_string(p->nodes[i].path));
	o = json_pack("{s:o, s:o, s:s, s:s}", "ports", ports, "nodes", nodes,
		      "preset", orh_preset_name(p->preset),
		      "socket_ifname", ifname ? ifname->value : "");
	json_object_set_new(o, "netns_default_if", json_string(netns_if ? netns_if : ""));
	if (d->memlock.set)
		json_object_set_new(o, "memlock", limit_json(d->memlock.limit));
	return o;
}

/* The character devices the spec gave the container (rule 8), by number. */
static json_t *given_json(const struct orh_container_facts *f)
{
	json_t *a = json_array();

	for (size_t i = 0; i < f->n_devs; i++) {
		char s[32];

		snprintf(s, sizeof(s), "%u:%u", f->devs[i].major, f->devs[i].minor);
		json_array_append_new(a, json_string(s));
	}
	return a;
}

static json_t *steps_json(const struct orh_record_in *in)
{
	json_t *o = json_object();

	for (size_t i = 0; i < in->n_steps && i < ORH_ARRAY_SIZE(in->step_names); i++)
		json_object_set_new(o, in->step_names[i], json_real(in->step_ms[i]));
	return o;
}

static void set_nodes(json_t *rec, const struct orh_record_in *in)
{
	if (in->nodes_error)
		json_object_set_new(rec, "nodes", json_pack("{s:s}", "error", in->nodes_error));
	else if (in->nodes_created >= 0)
		json_object_set_new(rec, "nodes",
				    json_pack("{s:I, s:I, s:I}", "created",
					      (json_int_t)in->nodes_created, "kept",
					      (json_int_t)in->nodes_kept, "bound",
					      (json_int_t)in->nodes_bound));
}

static void set_memlock(json_t *rec, const struct orh_record_in *in)
{
	json_t *m = json_object();

	if (in->memlock)
		json_object_set_new(m, "step", json_string(in->memlock));
	if (in->memlock_known) {
		json_object_set_new(m, "before", json_pack("{s:o, s:o}",
			"soft", limit_json(in->memlock_soft_before),
			"hard", limit_json(in->memlock_hard_before)));
		json_object_set_new(m, "after", json_pack("{s:o, s:o}",
			"soft", limit_json(in->memlock_soft_after),
			"hard", limit_json(in->memlock_hard_after)));
	}
	if (in->spec_memlock_set)
		json_object_set_new(m, "in_spec", limit_json(in->spec_memlock));
	json_object_set_new(rec, "memlock", m);
}

static void set_conf(json_t *rec, const struct orh_record_in *in)
{
	json_t *c;

	if (!in->conf)
		return;
	c = json_pack("{s:s, s:s, s:I}", "path", "/etc/nccl.conf", "result", in->conf,
		      "added", (json_int_t)in->conf_added);
	if (in->conf_bound_from && *in->conf_bound_from)
		json_object_set_new(c, "bind_mounted_from", json_string(in->conf_bound_from));
	if (in->conf_kept)
		json_object_set_new(c, "image_lines_kept", strv_json(in->conf_kept));
	json_object_set_new(rec, "nccl_conf", c);
}

json_t *orh_record_build(const struct orh_record_in *in)
{
	const struct orh_decision *d = in->d;
	json_t *rec, *warn;

	rec = json_pack("{s:i, s:s, s:s, s:I, s:I}", "version", ORH_RECORD_VERSION,
			"id", in->id ? in->id : "", "stage", in->stage,
			"pid", (json_int_t)in->pid, "start_time", (json_int_t)in->start_time);
	if (in->ns.pid)
		json_object_set_new(rec, "pid_ns", json_integer((json_int_t)in->ns.pid));
	if (in->ns.mnt)
		json_object_set_new(rec, "mnt_ns", json_integer((json_int_t)in->ns.mnt));
	if (in->edited_by)
		json_object_set_new(rec, "edited_by", json_string(in->edited_by));
	json_object_set_new(rec, "activation", json_pack("{s:s, s:s, s:b}", "result",
				act_name(d->act), "why", d->why, "asked", d->asked));
	json_object_set_new(rec, "given_devices", given_json(&d->facts));
	if (in->spec_devices >= 0)
		json_object_set_new(rec, "spec_devices", json_integer(in->spec_devices));
	if (d->have_plan) {
		json_object_set_new(rec, "plan", plan_json(d, in->netns_if));
		json_object_set_new(rec, "node_read", json_string(in->node_from || in->bundle
								  ? "by the runtime shim"
								  : "by this stage"));
	}
	if (in->node_from)
		json_object_set_new(rec, "node_from", json_string(in->node_from));
	if (in->bundle && in->bundle_config) {
		json_t *b = json_pack("{s:s, s:I, s:I, s:I}", "path", in->bundle,
				      "config_dev", (json_int_t)in->bundle_config->st_dev,
				      "config_ino", (json_int_t)in->bundle_config->st_ino,
				      "since", (json_int_t)time(NULL));

		if (in->runtime_state)
			json_object_set_new(b, "runtime_state", json_string(in->runtime_state));
		json_object_set_new(rec, "bundle", b);
	}
	if (d->have_plan && d->image_verdict.checked)
		json_object_set_new(rec, "image", image_json(d));
	set_nodes(rec, in);
	if (in->sysfs_view[0])
		json_object_set_new(rec, "sysfs_view", json_pack("s++", ORH_SYSVIEW_DIR, "/",
								 in->sysfs_view));
	if (in->cgroup)
		json_object_set_new(rec, "cgroup", json_string(in->cgroup));
	set_memlock(rec, in);
	set_conf(rec, in);
	warn = strv_json(&d->warnings);
	for (size_t i = 0; d->have_plan && i < d->image_verdict.warnings.n; i++)
		json_array_append_new(warn, image_text(d->image_verdict.warnings.v[i]));
	for (size_t i = 0; in->warnings && i < in->warnings->n; i++)
		json_array_append_new(warn, json_string(in->warnings->v[i]));
	json_object_set_new(rec, "warnings", warn);
	json_object_set_new(rec, "time_ms", json_pack("{s:f, s:o}", "total", in->total_ms,
						      "steps", steps_json(in)));
	if (in->shim_ms)
		json_object_set(json_object_get(rec, "time_ms"), "shim", (json_t *)in->shim_ms);
	return rec;
}

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

/* The container's link to the sysfs view its record names, if any: in the views'
 * directory beside its state directory. */
static int write_view_link(const char *state_dir, const json_t *rec, struct orh_err *err)
{
	const char *view = json_string_value(json_object_get(rec, "sysfs_view"));
	const char *id = view && strrchr(view, '/') ? strrchr(view, '/') + 1 : view;
	const char *name = strrchr(state_dir, '/');
	_cleanup_free_ char *base = NULL;

	if (!id || !orh_sysview_id_valid(id))
		return 0;
	base = name ? orh_xasprintf("%.*s/" ORH_SYSVIEW_SUBDIR, (int)(name - state_dir), state_dir)
		    : orh_xstrdup(ORH_SYSVIEW_SUBDIR);
	return orh_sysview_link(base, name ? name + 1 : state_dir, id, err);
}

int orh_record_write(const char *state_dir, const json_t *rec, struct orh_err *err)
{
	size_t len = 0;
	_cleanup_free_ char *text = orh_json_dump(rec, &len); /* one line: inspect indents it */
	_cleanup_close_ int dirfd = -1;
	struct orh_replace how = { .type = S_IFREG, .mode = 0644 };
	bool created;
	int r;

	if (!text)
		return orh_fail(err, ENOMEM, "formatting the record");
	dirfd = orh_state_dir_open(state_dir, &created, err);
	if (dirfd < 0)
		return dirfd;
	/* the link first: the sweep reads no record for the views; a record is written even
	 * where the link could not be (its error is returned then) */
	r = write_view_link(state_dir, rec, err);
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

json_t *orh_state_file_load(int dirfd, const char *path, size_t max, struct stat *st)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;

	/* nothing but a regular file is opened (a device's open may act), and none waits */
	if (fstatat(dirfd, path, st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st->st_mode))
		return NULL;
	fd = openat(dirfd, path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, st) < 0 || !S_ISREG(st->st_mode) || (size_t)st->st_size > max)
		return NULL;
	/* one read for the whole file (json_loadfd would read it a byte at a time) */
	buf = orh_xmalloc((size_t)st->st_size + 1);
	while (len <= (size_t)st->st_size) {
		ssize_t n = read(fd, buf + len, (size_t)st->st_size + 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	if (len > (size_t)st->st_size)
		return NULL; /* it grew while read: not a file written whole */
	return json_loadb(buf, len, 0, NULL);
}

json_t *orh_record_load_at(int dirfd, const char *path)
{
	struct stat st;

	return orh_state_file_load(dirfd, path, ORH_RECORD_MAX_BYTES, &st);
}

bool orh_state_entry_ours(const char *name)
{
	static const char *const files[] = { "nccl.conf", ORH_RECORD_FILE, ORH_HANDOFF_FILE };

	for (size_t i = 0; i < ORH_ARRAY_SIZE(files); i++) {
		size_t n = strlen(files[i]);

		if (!strcmp(name, files[i]) ||
		    (name[0] == '.' && !strncmp(name + 1, files[i], n) &&
		     orh_startswith(name + 1 + n, ".orh-")))
			return true;
	}
	return false;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Parsing what the runtime hands over: the OCI state on a hook's stdin and the bundle's
 * config.json (whether a container is activated is activation.c's).
 *
 * Everything here is bounded and strict: documents larger than their limit, duplicate
 * keys, and fields of the wrong type are errors that name the document and the field.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "orh/base/json.h"
#include "orh/decide/oci.h"
#include "orh/node/drameta.h"

static int load_json(const char *buf, size_t len, size_t max, size_t flags,
		     const char *name, json_t **out, struct orh_err *err)
{
	json_error_t jerr;
	json_t *root = NULL;

	*out = NULL;
	if (!buf)
		return orh_fail(err, EINVAL, "%s: no data", name);
	if (len > max)
		return orh_fail(err, EFBIG, "%s: %zu bytes, more than the limit of %zu",
				name, len, max);
	if (len == 0)
		return orh_fail(err, EINVAL, "%s: empty document", name);
	root = json_loadb(buf, len, JSON_REJECT_DUPLICATES | flags, &jerr);
	if (!root)
		return orh_fail(err, EINVAL, "%s: line %d column %d: %s", name, jerr.line,
				jerr.column, jerr.text);
	if (!json_is_object(root)) {
		json_decref(root);
		return orh_fail(err, EINVAL, "%s: the document is not a JSON object", name);
	}
	*out = root;
	return 0;
}

/* An optional string member: absent or null -> *out = NULL. */
static int opt_string(const json_t *obj, const char *key, const char *name,
		      const char *field, const char **out, struct orh_err *err)
{
	const json_t *v = json_object_get(obj, key);

	*out = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return orh_fail(err, EINVAL, "%s: field '%s' is not a string", name, field);
	if (strlen(json_string_value(v)) != json_string_length(v))
		return orh_fail(err, EINVAL, "%s: field '%s' holds a NUL byte", name, field);
	*out = json_string_value(v);
	return 0;
}

static int check_annotations(const json_t *a, const char *name, const char *field,
			     struct orh_err *err)
{
	const char *key = NULL;
	json_t *v = NULL;

	if (!json_is_object(a))
		return orh_fail(err, EINVAL, "%s: field '%s' is not an object", name, field);
	json_object_foreach((json_t *)a, key, v) {
		if (!json_is_string(v))
			return orh_fail(err, EINVAL, "%s: field '%s.%s' is not a string", name,
					field, key);
	}
	return 0;
}

void orh_oci_state_free(struct orh_oci_state *st)
{
	if (!st)
		return;
	free(st->id);
	free(st->bundle);
	free(st->status);
	if (st->annotations)
		json_decref(st->annotations);
	memset(st, 0, sizeof(*st));
}

int orh_oci_state_parse(const char *buf, size_t len, struct orh_oci_state *st,
			struct orh_err *err)
{
	static const char name[] = "OCI state";
	_cleanup_json_ json_t *root = NULL;
	const char *ver = NULL, *id = NULL, *status = NULL, *bundle = NULL;
	const json_t *pid = NULL, *ann = NULL;
	json_int_t pidv = 0;
	int r;

	memset(st, 0, sizeof(*st));
	r = load_json(buf, len, ORH_STATE_MAX_BYTES, 0, name, &root, err);
	if (r < 0)
		return r;

	r = opt_string(root, "ociVersion", name, "ociVersion", &ver, err);
	if (r < 0)
		return r;
	if (!ver || !*ver)
		return orh_fail(err, EINVAL, "%s: field 'ociVersion' is missing", name);

	r = opt_string(root, "id", name, "id", &id, err);
	if (r < 0)
		return r;
	if (!id || !*id)
		return orh_fail(err, EINVAL, "%s: field 'id' is missing", name);
	if (strlen(id) > 1024)
		return orh_fail(err, EINVAL, "%s: field 'id' is longer than 1024 bytes", name);

	r = opt_string(root, "status", name, "status", &status, err);
	if (r < 0)
		return r;

	r = opt_string(root, "bundle", name, "bundle", &bundle, err);
	if (r < 0)
		return r;
	if (!bundle || !*bundle)
		return orh_fail(err, EINVAL, "%s: field 'bundle' is missing", name);
	if (bundle[0] != '/')
		return orh_fail(err, EINVAL, "%s: field 'bundle' is not an absolute path: '%s'",
				name, bundle);
	if (strlen(bundle) >= PATH_MAX)
		return orh_fail(err, ENAMETOOLONG, "%s: field 'bundle' is too long", name);

	pid = json_object_get(root, "pid");
	if (pid && !json_is_null(pid)) {
		if (!json_is_integer(pid))
			return orh_fail(err, EINVAL, "%s: field 'pid' is not an integer", name);
		pidv = json_integer_value(pid);
		if (pidv < 0 || pidv > INT_MAX)
			return orh_fail(err, ERANGE, "%s: field 'pid' is out of range: %" JSON_INTEGER_FORMAT,
					name, pidv);
	}

	ann = json_object_get(root, "annotations");
	if (ann && json_is_null(ann))
		ann = NULL;
	if (ann) {
		r = check_annotations(ann, name, "annotations", err);
		if (r < 0)
			return r;
	}

	st->id = orh_xstrdup(id);
	st->bundle = orh_xstrdup(bundle);
	st->status = orh_xstrdup(status ? status : "");
	st->pid = (pid_t)pidv;
	st->annotations = ann ? json_incref((json_t *)ann) : NULL;
	return 0;
}

/* The parts of a spec this project reads or edits, with the type each must have, so that
 * the appliers can rely on them. A path's components are object keys; "[]" after one
 * stands for each element of that array. An absent or null member is not checked, and an
 * entry comes after the entries of the members above it, which have checked their type. */
enum spec_type {
	SPEC_OBJECT,
	SPEC_STRING,     /* without a NUL byte */
	SPEC_OBJECTS,    /* an array of objects */
	SPEC_STRINGS,    /* an array of strings without a NUL byte */
	SPEC_STRING_MAP, /* an object whose members are strings (annotations) */
};

static const struct spec_field {
	const char *path;
	enum spec_type type;
} spec_schema[] = {
	{ "process", SPEC_OBJECT },
	{ "process.env", SPEC_STRINGS },
	{ "process.rlimits", SPEC_OBJECTS },
	{ "process.capabilities", SPEC_OBJECT },
	{ "process.capabilities.bounding", SPEC_STRINGS },
	{ "process.capabilities.effective", SPEC_STRINGS },
	{ "process.capabilities.permitted", SPEC_STRINGS },
	{ "process.capabilities.inheritable", SPEC_STRINGS },
	{ "process.capabilities.ambient", SPEC_STRINGS },
	{ "linux", SPEC_OBJECT },
	{ "linux.devices", SPEC_OBJECTS },
	{ "linux.namespaces", SPEC_OBJECTS },
	{ "linux.namespaces[].type", SPEC_STRING },
	{ "linux.namespaces[].path", SPEC_STRING },
	{ "linux.resources", SPEC_OBJECT },
	{ "linux.resources.devices", SPEC_OBJECTS },
	{ "annotations", SPEC_STRING_MAP },
	/* the lists the spec edit adds its hooks to */
	{ "hooks", SPEC_OBJECT },
	{ "hooks.createRuntime", SPEC_OBJECTS },
	{ "hooks.prestart", SPEC_OBJECTS },
	{ "hooks.poststop", SPEC_OBJECTS },
};

/* the longest field a message names: a schema path with its indices */
#define SPEC_FIELD_MAX 128
/* the most keys and indices a field's name is made of (the schema's paths have four) */
#define SPEC_TRAIL_MAX 16

/* Where a check is in the spec: the keys and indices walked to it. Its name is written
 * only for a message, where a check fails. */
struct trail {
	int n;
	struct {
		const char *key; /* NULL: an index */
		size_t len;
		size_t idx;
	} seg[SPEC_TRAIL_MAX];
};

/* shown (len bytes used) with fmt's text appended, cut at SPEC_FIELD_MAX: its length */
static size_t append(char *shown, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static size_t append(char *shown, size_t len, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(shown + len, SPEC_FIELD_MAX - len, fmt, ap);
	va_end(ap);
	return n < 0 ? len : len + (size_t)n < SPEC_FIELD_MAX ? len + (size_t)n : SPEC_FIELD_MAX - 1;
}

/* the field t is at, as a message names it ("linux.namespaces[2].type") */
static const char *trail_name(const struct trail *t, char shown[SPEC_FIELD_MAX])
{
	size_t len = 0;

	shown[0] = '\0';
	for (int i = 0; i < t->n; i++)
		len = t->seg[i].key ? append(shown, len, "%s%.*s", len ? "." : "",
					     (int)t->seg[i].len, t->seg[i].key)
				    : append(shown, len, "[%zu]", t->seg[i].idx);
	return shown;
}

static bool trail_push(struct trail *t, const char *key, size_t len, size_t idx)
{
	if (t->n >= SPEC_TRAIL_MAX)
		return false;
	t->seg[t->n].key = key;
	t->seg[t->n].len = len;
	t->seg[t->n++].idx = idx;
	return true;
}

/* the schema's paths are shorter than a trail holds: kept so that no check is skipped */
static int too_deep(const char *name, const struct trail *t, struct orh_err *err)
{
	char shown[SPEC_FIELD_MAX];

	return orh_fail(err, EINVAL, "%s: field '%s' is nested too deep", name,
			trail_name(t, shown));
}

static int not_a(const char *name, const struct trail *t, const char *what,
		 struct orh_err *err)
{
	char shown[SPEC_FIELD_MAX];

	return orh_fail(err, EINVAL, "%s: field '%s' is not %s", name, trail_name(t, shown), what);
}

static int check_string(const json_t *v, const char *name, const struct trail *t,
			struct orh_err *err)
{
	char shown[SPEC_FIELD_MAX];

	if (!json_is_string(v))
		return not_a(name, t, "a string", err);
	if (strlen(json_string_value(v)) != json_string_length(v))
		return orh_fail(err, EINVAL, "%s: field '%s' holds a NUL byte", name,
				trail_name(t, shown));
	return 0;
}

/* v, the value of the field t is at, against type. */
static int check_type(const json_t *v, enum spec_type type, const char *name,
		      struct trail *t, struct orh_err *err)
{
	char shown[SPEC_FIELD_MAX];
	size_t i = 0;
	json_t *e = NULL;
	int r = 0;

	switch (type) {
	case SPEC_OBJECT:
		return json_is_object(v) ? 0 : not_a(name, t, "an object", err);
	case SPEC_STRING:
		return check_string(v, name, t, err);
	case SPEC_STRING_MAP:
		return check_annotations(v, name, trail_name(t, shown), err);
	case SPEC_OBJECTS:
	case SPEC_STRINGS:
		if (!json_is_array(v))
			return not_a(name, t, "an array", err);
		if (!trail_push(t, NULL, 0, 0))
			return too_deep(name, t, err);
		json_array_foreach(v, i, e) {
			t->seg[t->n - 1].idx = i;
			if (type == SPEC_STRINGS)
				r = check_string(e, name, t, err);
			else
				r = json_is_object(e) ? 0 : not_a(name, t, "an object", err);
			if (r < 0)
				break;
		}
		t->n--;
		return r;
	}
	return 0;
}

/* The members of v that rest (a schema path's tail) names, against f's type; t holds
 * where v is. */
static int check_at(const json_t *v, const char *rest, struct trail *t,
		    const struct spec_field *f, const char *name, struct orh_err *err)
{
	const char *dot = strchr(rest, '.');
	size_t n = dot ? (size_t)(dot - rest) : strlen(rest);
	bool each = n > 2 && !strncmp(rest + n - 2, "[]", 2);
	size_t kn = each ? n - 2 : n;
	char key[64];
	const json_t *c = NULL;
	size_t i = 0;
	json_t *e = NULL;
	int r = 0;

	if (kn >= sizeof(key))
		kn = sizeof(key) - 1;
	memcpy(key, rest, kn);
	key[kn] = '\0';
	if (!trail_push(t, rest, kn, 0))
		return too_deep(name, t, err);
	c = json_object_get(v, key);
	if (!c || json_is_null(c))
		r = 0;
	else if (!each)
		/* a member of another type: the entry of c said so */
		r = !dot ? check_type(c, f->type, name, t, err)
			 : json_is_object(c) ? check_at(c, dot + 1, t, f, name, err) : 0;
	else if (json_is_array(c) && !trail_push(t, NULL, 0, 0))
		r = too_deep(name, t, err);
	else if (json_is_array(c)) {
		json_array_foreach(c, i, e) {
			t->seg[t->n - 1].idx = i;
			if (!dot)
				r = check_type(e, f->type, name, t, err);
			else
				r = json_is_object(e) ? check_at(e, dot + 1, t, f, name, err) : 0;
			if (r < 0)
				break;
		}
		t->n--;
	}
	t->n--;
	return r;
}

static int check_spec(const json_t *spec, const char *name, struct orh_err *err)
{
	for (size_t i = 0; i < ORH_ARRAY_SIZE(spec_schema); i++) {
		struct trail t = { .n = 0 };
		int r = check_at(spec, spec_schema[i].path, &t, &spec_schema[i], name, err);

		if (r < 0)
			return r;
	}
	return 0;
}

int orh_spec_parse(const char *buf, size_t len, const char *name, json_t **spec,
		   struct orh_err *err)
{
	_cleanup_json_ json_t *root = NULL;
	_cleanup_free_ char *escaped = NULL;
	size_t escaped_len = 0, n_big = 0, n_seen = 0;
	struct orh_err quiet = { 0 };
	int r;

	*spec = NULL;
	if (!name)
		name = "config.json";
	if (buf && len > ORH_SPEC_MAX_BYTES)
		return orh_fail(err, EFBIG, "%s: %zu bytes, more than the limit of %d", name,
				len, ORH_SPEC_MAX_BYTES);
	/* Integers above INT64_MAX (unlimited rlimits) become markers jansson can hold. */
	if (buf) {
		r = orh_json_u64_escape(buf, len, &escaped, &escaped_len, &n_big);
		if (r < 0)
			return orh_fail_errno(err, r, "%s", name);
	}
	/* Without markers, a document that parses without JSON_ALLOW_NUL holds no NUL in any
	 * string, and the walk that looks for one is not needed. Where that parse fails, the
	 * document is parsed as below, which names what is wrong. */
	if (!escaped && load_json(buf, len, ORH_SPEC_MAX_BYTES, 0, name, &root, &quiet) < 0)
		root = NULL;
	if (!root) {
		r = load_json(escaped ? escaped : buf, escaped ? escaped_len : len,
			      ORH_SPEC_MAX_BYTES + n_big * 16, JSON_ALLOW_NUL, name, &root, err);
		if (r < 0)
			return r;
		if (orh_json_u64_count(root, &n_seen) < 0 || n_seen != n_big)
			return orh_fail(err, EINVAL, "%s: a string holds a NUL byte", name);
	}
	r = check_spec(root, name, err);
	if (r < 0)
		return r;
	*spec = TAKE_PTR(root);
	return 0;
}

int orh_spec_load_at(int dirfd, const char *file, const char *name, json_t **spec,
		     struct orh_err *err)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *buf = NULL;
	struct stat sb;
	size_t len = 0;
	int r;

	*spec = NULL;
	fd = openat(dirfd, file, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW);
	if (fd < 0)
		return orh_fail(err, errno, "opening '%s': %s", name,
				errno == ELOOP ? "a symbolic link" : strerror(errno));
	if (fstat(fd, &sb) < 0)
		return orh_fail_errno(err, errno, "'%s': fstat", name);
	if (!S_ISREG(sb.st_mode))
		return orh_fail(err, EINVAL, "'%s' is not a regular file", name);
	if (sb.st_size > ORH_SPEC_MAX_BYTES)
		return orh_fail(err, EFBIG, "'%s': %lld bytes, more than the limit of %d",
				name, (long long)sb.st_size, ORH_SPEC_MAX_BYTES);
	r = orh_read_fd_all(fd, ORH_SPEC_MAX_BYTES, &buf, &len);
	if (r < 0)
		return orh_fail(err, r, "reading '%s': %s", name,
				r == -EFBIG ? "larger than the limit" : strerror(-r));
	return orh_spec_parse(buf, len, name, spec, err);
}

int orh_spec_load(const char *bundle, json_t **spec, struct orh_err *err)
{
	_cleanup_close_ int dirfd = -1;
	_cleanup_free_ char *name = NULL;

	*spec = NULL;
	if (!bundle || !*bundle)
		return orh_fail(err, EINVAL, "no bundle directory given");
	name = orh_xasprintf("%s/config.json", bundle);
	dirfd = open(bundle, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return orh_fail_errno(err, errno, "opening bundle '%s'", bundle);
	return orh_spec_load_at(dirfd, "config.json", name, spec, err);
}

int orh_spec_load_file(const char *path, json_t **spec, struct orh_err *err)
{
	_cleanup_free_ char *dir = orh_xstrdup(path);
	char *slash = strrchr(dir, '/');
	const char *file = path;
	_cleanup_close_ int dirfd = -1;

	*spec = NULL;
	if (slash) {
		file = path + (slash - dir) + 1;
		if (slash == dir)
			slash[1] = '\0';
		else
			*slash = '\0';
	}
	dirfd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return orh_fail_errno(err, errno, "opening the directory of '%s'", path);
	return orh_spec_load_at(dirfd, file, path, spec, err);
}

const json_t *orh_spec_env(const json_t *spec)
{
	const json_t *env = json_object_get(json_object_get(spec, "process"), "env");

	return json_is_null(env) ? NULL : env;
}

bool orh_spec_has_rlimit(const json_t *spec, const char *type)
{
	const json_t *rl = json_object_get(json_object_get(spec, "process"), "rlimits");
	size_t i;
	const json_t *e;

	if (!json_is_array(rl))
		return false;
	json_array_foreach(rl, i, e) {
		const char *t = json_string_value(json_object_get(e, "type"));

		if (t && strcmp(t, type) == 0)
			return true;
	}
	return false;
}

size_t orh_spec_dra_meta_mounts(const json_t *spec, const char **out, size_t max)
{
	const json_t *m;
	struct orh_dra_file f;
	size_t i, n = 0;

	json_array_foreach(json_object_get(spec, "mounts"), i, m) {
		const char *dst = json_string_value(json_object_get(m, "destination"));

		if (!orh_dra_meta_path(dst, &f))
			continue;
		if (n < max)
			out[n] = dst;
		n++;
	}
	return n;
}

bool orh_spec_env_has(const json_t *spec, const char *name)
{
	const json_t *env = json_object_get(json_object_get(spec, "process"), "env");
	size_t n = strlen(name), i = 0;
	json_t *e = NULL;

	if (!json_is_array(env) || n == 0)
		return false;
	json_array_foreach(env, i, e) {
		const char *s = json_string_value(e);

		/* "NAME=value", and also a bare "NAME" (runc refuses it, but it is the
		 * user's name all the same). */
		if (s && strncmp(s, name, n) == 0 && (s[n] == '=' || s[n] == '\0'))
			return true;
	}
	return false;
}

int orh_spec_netns(const json_t *spec, bool *has_netns, const char **path)
{
	const json_t *ns = json_object_get(json_object_get(spec, "linux"), "namespaces");
	size_t i = 0;
	json_t *e = NULL;

	*has_netns = false;
	*path = NULL;
	if (!ns || json_is_null(ns))
		return 0;
	if (!json_is_array(ns))
		return -EINVAL;
	json_array_foreach(ns, i, e) {
		const json_t *t = json_object_get(e, "type");
		const json_t *p = json_object_get(e, "path");

		if (!json_is_string(t))
			return -EINVAL;
		if (strcmp(json_string_value(t), "network") != 0)
			continue;
		if (*has_netns)
			return -EINVAL; /* two network entries: refuse to guess */
		*has_netns = true;
		if (p && !json_is_null(p)) {
			if (!json_is_string(p))
				return -EINVAL;
			if (json_string_length(p) > 0)
				*path = json_string_value(p);
		}
	}
	return 0;
}

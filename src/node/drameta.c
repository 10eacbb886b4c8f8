/* SPDX-License-Identifier: Apache-2.0 */
/* A container's DRA device metadata, KEP-5304 (include/orh/node/drameta.h). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orh/base/rootfs.h"
#include "orh/node/drameta.h"

#define STR_(x) #x
#define STR(x) STR_(x)

static const char *const known_versions[] = {
	"metadata.resource.k8s.io/v1beta1",
	"metadata.resource.k8s.io/v1alpha1",
};

/* ---------------------------------------------------------------- the path */

static bool name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '_' || c == '-';
}

/* The component at *p (up to '/' or the end) into out; *p moved past it and its '/'. */
static bool component(const char **p, char *out, size_t size)
{
	size_t n = 0;

	while ((*p)[n] && (*p)[n] != '/') {
		if (!name_char((*p)[n]) || n + 1 >= size)
			return false;
		out[n] = (*p)[n];
		n++;
	}
	out[n] = '\0';
	if (n == 0 || !strcmp(out, ".") || !strcmp(out, ".."))
		return false;
	*p += n + ((*p)[n] == '/');
	return true;
}

bool orh_dra_meta_path(const char *path, struct orh_dra_file *f)
{
	static const char base[] = ORH_DRA_META_DIR "/";
	char kind[32], file[ORH_DRA_NAME_MAX + sizeof(ORH_DRA_META_SUFFIX)];
	const char *p = path;
	size_t n, sfx = strlen(ORH_DRA_META_SUFFIX);

	memset(f, 0, sizeof(*f));
	if (!path || strncmp(path, base, sizeof(base) - 1))
		return false;
	p += sizeof(base) - 1;
	if (!component(&p, kind, sizeof(kind)) || !component(&p, f->claim, sizeof(f->claim)) ||
	    !component(&p, f->request, sizeof(f->request)) ||
	    !component(&p, file, sizeof(file)) || *p)
		return false;
	if (!strcmp(kind, "resourceclaimtemplates"))
		f->template = true;
	else if (strcmp(kind, "resourceclaims"))
		return false;
	n = strlen(file);
	if (n <= sfx || strcmp(file + n - sfx, ORH_DRA_META_SUFFIX))
		return false;
	file[n - sfx] = '\0';
	return orh_strlcpy(f->driver, file, sizeof(f->driver)) == 0;
}

/* ---------------------------------------------------------------- the text */

/* dddd:bb:dd.f, a domain of 4 to 8 lowercase hex digits (the kernel's names) */
static bool is_bus_id(const char *s)
{
	size_t d = strspn(s, "0123456789abcdef");

	return d >= 4 && d <= 8 && strlen(s) == d + 8 && s[d] == ':' &&
	       strspn(s + d + 1, "0123456789abcdef") == 2 && s[d + 3] == ':' &&
	       strspn(s + d + 4, "0123456789abcdef") == 2 && s[d + 6] == '.' &&
	       s[d + 7] >= '0' && s[d + 7] <= '7';
}

/* pcidddd:bb, as the kernel names a host bridge */
static bool is_root(const char *s)
{
	size_t d = strncmp(s, "pci", 3) ? 0 : strspn(s + 3, "0123456789abcdef");

	return d >= 4 && d <= 8 && strlen(s) == d + 6 && s[3 + d] == ':' &&
	       strspn(s + d + 4, "0123456789abcdef") == 2;
}

struct ctx {
	const char *file;
	struct orh_err *err;
	char at[160];                   /* the field being read: "requests[0].devices[1]" */
};

static int bad(struct ctx *c, const char *field, const char *what)
{
	return orh_fail(c->err, EINVAL, "DRA device metadata '%s': field '%s%s%s': %s", c->file,
			c->at, c->at[0] && field[0] ? "." : "", field, what);
}

/* A string member of o, checked to fit size and to be names' characters when `name` */
static int str_of(struct ctx *c, const json_t *o, const char *key, bool required, bool name,
		  char *out, size_t size)
{
	const json_t *v = json_object_get(o, key);
	const char *s = json_string_value(v);

	out[0] = '\0';
	if (!v && !required)
		return 0;
	if (!s)
		return bad(c, key, v ? "not a string" : "missing");
	for (const char *q = s; name && *q; q++)
		if (!name_char(*q) && *q != '/')
			return bad(c, key, "not a name (letters, digits, '.', '_', '-', '/')");
	if (!*s && required)
		return bad(c, key, "empty");
	if (orh_strlcpy(out, s, size) < 0)
		return bad(c, key, "too long");
	return 0;
}

/* attributes["<name>"], a {"string": ...} that `ok` accepts, into out (absent: "") */
static int attribute(struct ctx *c, const json_t *attrs, const char *name,
		     bool (*ok)(const char *), const char *what, char *out, size_t size)
{
	const json_t *a = json_object_get(attrs, name);
	char field[96];
	const char *s;

	out[0] = '\0';
	if (!a)
		return 0;
	snprintf(field, sizeof(field), "attributes[\"%s\"].string", name);
	s = json_string_value(json_object_get(a, "string"));
	if (!json_is_object(a) || !s)
		return bad(c, field, "not a string attribute");
	if (!ok(s) || orh_strlcpy(out, s, size) < 0)
		return bad(c, field, what);
	return 0;
}

static int device(struct ctx *c, const json_t *d, const struct orh_dra_file *from,
		  struct orh_dra_device *out)
{
	const json_t *attrs = json_object_get(d, "attributes");
	int r;

	memset(out, 0, sizeof(*out));
	out->from = *from;
	if (!json_is_object(d))
		return bad(c, "", "not an object");
	r = str_of(c, d, "name", true, true, out->name, sizeof(out->name));
	if (r == 0)
		r = str_of(c, d, "driver", true, true, out->from.driver, sizeof(out->from.driver));
	if (r == 0 && strcmp(out->from.driver, from->driver))
		return bad(c, "driver", "not the driver the file's name says");
	if (r == 0 && attrs && !json_is_object(attrs))
		return bad(c, "attributes", "not an object");
	if (r == 0)
		r = attribute(c, attrs, "resource.kubernetes.io/pciBusID", is_bus_id,
			      "not a PCI bus ID (dddd:bb:dd.f)", out->pci_bus_id,
			      sizeof(out->pci_bus_id));
	if (r == 0)
		r = attribute(c, attrs, "resource.kubernetes.io/pcieRoot", is_root,
			      "not a PCIe root (pcidddd:bb)", out->pcie_root,
			      sizeof(out->pcie_root));
	return r;
}

/* One DeviceMetadata object of a known version: its devices into *tmp. */
static int object(struct ctx *c, const json_t *o, const struct orh_dra_file *from,
		  struct orh_dra_meta *tmp)
{
	const json_t *reqs = json_object_get(o, "requests"), *rq, *d;
	size_t i, k, len = strlen(from->request);
	char name[ORH_DRA_NAME_MAX];
	int r;

	if (reqs && !json_is_array(reqs))
		return bad(c, "requests", "not an array");
	if (json_array_size(reqs) > ORH_DRA_META_MAX_REQUESTS)
		return bad(c, "requests", "more requests than " STR(ORH_DRA_META_MAX_REQUESTS));
	json_array_foreach(reqs, i, rq) {
		const json_t *devs = json_object_get(rq, "devices");

		snprintf(c->at, sizeof(c->at), "requests[%zu]", i);
		if (!json_is_object(rq))
			return bad(c, "", "not an object");
		r = str_of(c, rq, "name", true, true, name, sizeof(name));
		if (r < 0)
			return r;
		/* the path's request, or one of its subrequests ("gpu/high-memory") */
		if (strncmp(name, from->request, len) || (name[len] && name[len] != '/'))
			return bad(c, "name", "not the request the file's path says");
		if (devs && !json_is_array(devs))
			return bad(c, "devices", "not an array");
		json_array_foreach(devs, k, d) {
			if (tmp->n == ORH_DRA_META_MAX_DEVICES)
				return bad(c, "devices", "more devices than "
					   STR(ORH_DRA_META_MAX_DEVICES));
			snprintf(c->at, sizeof(c->at), "requests[%zu].devices[%zu]", i, k);
			r = device(c, d, from, &tmp->v[tmp->n]);
			if (r < 0)
				return r;
			tmp->n++;
		}
	}
	return 0;
}

static bool known(const char *version)
{
	for (size_t i = 0; i < ORH_ARRAY_SIZE(known_versions); i++)
		if (version && !strcmp(version, known_versions[i]))
			return true;
	return false;
}

int orh_dra_meta_parse(const char *text, size_t len, const char *file,
		       const struct orh_dra_file *from, struct orh_dra_meta *out,
		       struct orh_err *err)
{
	struct orh_dra_meta tmp = { .v = orh_xcalloc(ORH_DRA_META_MAX_DEVICES,
						     sizeof(*tmp.v)) };
	struct ctx c = { .file = file, .err = err };
	size_t off = 0;
	int r = 0, n_obj = 0;

	for (;;) {
		json_error_t je;
		json_t *o;
		const char *version, *kind;

		while (off < len && strchr(" \t\r\n", text[off]) && text[off])
			off++;
		if (off >= len) {
			r = orh_fail(err, EINVAL, "DRA device metadata '%s': no DeviceMetadata "
				     "object of a known apiVersion (%s, %s)", file,
				     known_versions[0], known_versions[1]);
			break;
		}
		c.at[0] = '\0';
		if (++n_obj > ORH_DRA_META_MAX_OBJECTS) {
			r = orh_fail(err, EINVAL, "DRA device metadata '%s': more than %d objects",
				     file, ORH_DRA_META_MAX_OBJECTS);
			break;
		}
		o = json_loadb(text + off, len - off, JSON_DISABLE_EOF_CHECK |
			       JSON_REJECT_DUPLICATES, &je);
		if (!o) {
			r = orh_fail(err, EINVAL, "DRA device metadata '%s': object %d: not JSON "
				     "(line %d: %s)", file, n_obj, je.line, je.text);
			break;
		}
		off += (size_t)je.position;
		version = json_string_value(json_object_get(o, "apiVersion"));
		kind = json_string_value(json_object_get(o, "kind"));
		if (!json_is_object(o) || !version || !kind || strcmp(kind, "DeviceMetadata")) {
			r = orh_fail(err, EINVAL, "DRA device metadata '%s': object %d: not a "
				     "DeviceMetadata (fields 'apiVersion', 'kind')", file, n_obj);
		} else if (known(version)) {
			r = object(&c, o, from, &tmp);
			json_decref(o);
			break; /* the first version known here is the one read */
		}
		json_decref(o);
		if (r < 0)
			break;
	}
	if (r == 0) {
		out->v = orh_xrealloc(out->v, (out->n + tmp.n + 1) * sizeof(*out->v));
		memcpy(out->v + out->n, tmp.v, tmp.n * sizeof(*tmp.v));
		out->n += tmp.n;
	}
	free(tmp.v);
	return r;
}

/* ---------------------------------------------------------------- the files */

static int read_one(int rootfd, uint64_t root_mnt, const char *path, const struct orh_dra_file *f,
		    struct orh_dra_meta *out, struct orh_err *err)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *buf = orh_xmalloc(ORH_DRA_META_MAX_BYTES + 1);
	uint64_t mnt = 0;
	struct stat st;
	size_t got = 0;
	int r = orh_rootfs_open_file(rootfd, path, &fd, &st);

	if (r < 0)
		return orh_fail_errno(err, r, "DRA device metadata '%s': opening it in the "
				      "container", path);
	if (root_mnt != ORH_MOUNT_ANY && (orh_fd_mount_id(fd, &mnt) < 0 || mnt == root_mnt))
		return orh_fail(err, EPERM, "DRA device metadata '%s': not a file mounted there "
				"(the container's root filesystem holds it)", path);
	while (got <= ORH_DRA_META_MAX_BYTES) {
		ssize_t n = read(fd, buf + got, ORH_DRA_META_MAX_BYTES + 1 - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return orh_fail_errno(err, errno, "DRA device metadata '%s': reading it",
					      path);
		if (n == 0)
			break;
		got += (size_t)n;
	}
	if (got > ORH_DRA_META_MAX_BYTES)
		return orh_fail(err, EFBIG, "DRA device metadata '%s': larger than %d bytes", path,
				ORH_DRA_META_MAX_BYTES);
	buf[got] = '\0';
	return orh_dra_meta_parse(buf, got, path, f, out, err);
}

void orh_dra_meta_read(int rootfd, uint64_t root_mnt, const char *const *paths, size_t n,
		       struct orh_dra_meta *out, struct orh_strv *warnings)
{
	struct orh_dra_file f;
	size_t looked = 0;

	for (size_t i = 0; i < n; i++) {
		struct orh_err err = { 0 };
		bool again = false;

		for (size_t k = 0; k < i && !again; k++)
			again = !strcmp(paths[k], paths[i]);
		if (again || !orh_dra_meta_path(paths[i], &f))
			continue;
		if (++looked > ORH_DRA_META_MAX_FILES) {
			orh_strv_pushf(warnings, "DRA device metadata: more than %d files mounted; "
				       "'%s' and those after it are not read",
				       ORH_DRA_META_MAX_FILES, paths[i]);
			return;
		}
		if (read_one(rootfd, root_mnt, paths[i], &f, out, &err) < 0)
			orh_strv_pushf(warnings, "%s; its devices are not used", err.msg);
		else
			out->n_files++;
	}
}

const struct orh_dra_device *orh_dra_meta_find(const struct orh_dra_meta *m,
					       const char *pci_bus_id)
{
	for (size_t i = 0; m && pci_bus_id && pci_bus_id[0] && i < m->n; i++)
		if (!strcmp(m->v[i].pci_bus_id, pci_bus_id))
			return &m->v[i];
	return NULL;
}

void orh_dra_meta_free(struct orh_dra_meta *m)
{
	free(m->v);
	memset(m, 0, sizeof(*m));
}

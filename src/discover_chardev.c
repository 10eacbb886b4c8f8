/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Discovery of the character devices of the node's RDMA devices: uverbsN
 * (sys/class/infiniband_verbs), umadN and issmN (sys/class/infiniband_mad, per port) and
 * rdma_cm (sys/class/misc). Each entry names its device in `ibdev` and its number in
 * `dev`; an entry that cannot be read is skipped with a warning naming the file.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "discover_priv.h"

static struct orh_device *find_dev(struct orh_inventory *inv, const char *name)
{
	for (size_t i = 0; i < inv->n_devs; i++)
		if (strcmp(inv->devs[i].name, name) == 0)
			return &inv->devs[i];
	return NULL;
}

static bool read_chardev(struct scan *sc, int classfd, const char *classwhere, const char *ent,
			 struct orh_chardev *cd)
{
	char path[128], buf[VALUE_MAX];

	snprintf(path, sizeof(path), "%s/dev", ent);
	if (!disc_read_required(sc, classfd, classwhere, path, buf, sizeof(buf)))
		return false;
	if (orh_parse_devnum(buf, &cd->major, &cd->minor) < 0) {
		disc_warn(sc, "skipping '%s/%s': garbled value '%.32s'", classwhere, path, buf);
		return false;
	}
	orh_strlcpy(cd->name, ent, sizeof(cd->name));
	cd->present = true;
	return true;
}

/* Open sys/class/<name> and list it; where names it for warnings. Returns the
 * directory's fd, or -1 when it cannot be read (a class the kernel does not have). */
static int open_class(struct scan *sc, const char *rootname, const char *name, char *where,
		      size_t size, struct orh_strv *ents)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "sys/class/%s", name);
	snprintf(where, size, "%s/%s", rootname, path);
	fd = openat(sc->root, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0 && disc_list_dir(fd, ".", ents) < 0) {
		orh_strv_free(ents);
		close(fd);
		return -1;
	}
	return fd;
}

/* The device a class entry (uverbsN, umadN, issmN) belongs to, from its ibdev file;
 * NULL when unreadable, or a device that vanished or was skipped. */
static struct orh_device *entry_dev(struct scan *sc, int classfd, const char *where,
				    const char *ent)
{
	char path[128], ibdev[VALUE_MAX];

	snprintf(path, sizeof(path), "%s/ibdev", ent);
	if (!disc_read_required(sc, classfd, where, path, ibdev, sizeof(ibdev)))
		return NULL;
	return find_dev(sc->inv, ibdev);
}

static void scan_uverbs(struct scan *sc, const char *rootname)
{
	char where[512];
	struct orh_strv ents = { 0 };
	_cleanup_close_ int classfd = open_class(sc, rootname, "infiniband_verbs", where,
						 sizeof(where), &ents);

	if (classfd < 0)
		return;
	if (!disc_plan_mode(sc))
		disc_read_value(sc, classfd, "abi_version", sc->inv->uverbs_abi,
				sizeof(sc->inv->uverbs_abi));
	for (size_t i = 0; i < ents.n; i++) {
		struct orh_chardev cd = { 0 };
		struct orh_device *d;

		if (!orh_startswith(ents.v[i], "uverbs"))
			continue;
		d = entry_dev(sc, classfd, where, ents.v[i]);
		if (d && read_chardev(sc, classfd, where, ents.v[i], &cd))
			d->uverbs = cd;
	}
	orh_strv_free(&ents);
}

static void scan_mad(struct scan *sc, const char *rootname)
{
	char where[512];
	struct orh_strv ents = { 0 };
	_cleanup_close_ int classfd = open_class(sc, rootname, "infiniband_mad", where,
						 sizeof(where), &ents);

	if (classfd < 0)
		return;
	for (size_t i = 0; i < ents.n; i++) {
		char path[128], port[32];
		bool umad = orh_startswith(ents.v[i], "umad");
		struct orh_chardev cd = { 0 };
		unsigned long long pnum;
		struct orh_device *d;

		if (!umad && !orh_startswith(ents.v[i], "issm"))
			continue;
		d = entry_dev(sc, classfd, where, ents.v[i]);
		if (!d)
			continue;
		snprintf(path, sizeof(path), "%s/port", ents.v[i]);
		if (!disc_read_required(sc, classfd, where, path, port, sizeof(port)))
			continue;
		if (orh_parse_uint(port, 255, &pnum) < 0) {
			disc_warn(sc, "skipping '%s/%s': garbled value '%.32s'", where, path, port);
			continue;
		}
		if (!read_chardev(sc, classfd, where, ents.v[i], &cd))
			continue;
		cd.port = (unsigned)pnum;
		for (size_t p = 0; p < d->n_ports; p++)
			if (d->ports[p].num == pnum) {
				if (umad)
					d->ports[p].umad = cd;
				else
					d->ports[p].issm = cd;
			}
	}
	orh_strv_free(&ents);
}

void disc_scan_chardevs(struct scan *sc, const char *rootname)
{
	struct orh_inventory *inv = sc->inv;

	scan_uverbs(sc, rootname);
	if (sc->opts->mad)
		scan_mad(sc, rootname);
	if (read_chardev(sc, sc->root, rootname, "sys/class/misc/rdma_cm", &inv->rdma_cm))
		strcpy(inv->rdma_cm.name, "rdma_cm");
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Discovery of the character devices of the node's RDMA devices: uverbsN
 * (sys/class/infiniband_verbs), umadN and issmN (sys/class/infiniband_mad, per port) and
 * rdma_cm (sys/class/misc). Each entry names its device in `ibdev` and its number in
 * `dev`; an entry that cannot be read is skipped with a warning naming the file.
 *
 * A number becomes a 0666 node and an rwm grant in every container, so one wrong value
 * must not hand out another device (1:11 is /dev/kmsg): it is taken only when it is a
 * number the kernel gives that kind of RDMA device (orh_devnum_is_rdma; the dynamic
 * majors from <sysroot>/proc/devices) and the kernel's own reverse map,
 * <sysroot>/sys/dev/char/MAJ:MIN, leads to the very class entry that named it.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "discover_chardev.h"
#include "sysfs.h"

#define PROC_DEVICES_MAX (64 * 1024) /* a few hundred lines on a busy host */

static const char *const kind_names[] = {
	[ORH_CHARDEV_UVERBS] = "uverbs",
	[ORH_CHARDEV_UMAD] = "umad",
	[ORH_CHARDEV_ISSM] = "issm",
	[ORH_CHARDEV_RDMA_CM] = "rdma_cm",
};

/* RDMA's dynamic majors, read from <sysroot>/proc/devices the first time a number
 * outside the fixed regions is checked; NULL when that file cannot be read or parsed
 * (one warning says so, and only fixed numbers pass). */
static const struct orh_rdma_majors *rdma_majors(struct scan *sc, const char *rootname)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *text = NULL;
	int r;

	if (sc->dyn_state == 0) {
		sc->dyn_state = -1;
		(*sc->reads)++;
		fd = openat(sc->root, "proc/devices", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
		r = fd < 0 ? -errno : orh_read_fd_all(fd, PROC_DEVICES_MAX, &text, NULL);
		if (r == 0)
			r = orh_parse_proc_devices(text, &sc->dyn);
		if (r == 0)
			sc->dyn_state = 1;
		else
			disc_warn(sc, "'%s/proc/devices': %s: dynamic RDMA numbers are refused",
				  rootname, r == -EINVAL && text ? "garbled" : strerror(-r));
	}
	return sc->dyn_state > 0 ? &sc->dyn : NULL;
}

/* Take cd's number only when it is one RDMA uses for `kind` and the kernel's reverse map
 * /sys/dev/char/MAJ:MIN leads to the class entry <dirfd>/<ent> (where/ent in warnings)
 * that named it; else warn, naming the file and the value. */
static bool devnum_checked(struct scan *sc, const char *rootname, int dirfd, const char *where,
			   const char *ent, enum orh_chardev_kind kind,
			   const struct orh_chardev *cd)
{
	char rev[64], other[NAME_MAX + 1];
	struct stat entry, dev;

	if (!orh_devnum_is_rdma(kind, cd->major, cd->minor, NULL) &&
	    (kind == ORH_CHARDEV_RDMA_CM ||
	     !orh_devnum_is_rdma(kind, cd->major, cd->minor, rdma_majors(sc, rootname)))) {
		disc_warn(sc,
			  "skipping '%s/%s/dev': %u:%u is not a number the kernel gives %s (%s)",
			  where, ent, cd->major, cd->minor, kind_names[kind],
			  orh_chardev_kind_numbers(kind));
		return false;
	}
	/* sys/dev/char/MAJ:MIN, by hand: once for every device */
	orh_put_uint(stpcpy(orh_put_uint(stpcpy(rev, "sys/dev/char/"), cd->major), ":"), cd->minor);
	(*sc->reads)++;
	if (fstatat(sc->root, rev, &dev, 0) < 0) {
		disc_warn(sc,
			  "skipping '%s/%s/dev': %u:%u is no device the kernel has ('%s/%s': %s)",
			  where, ent, cd->major, cd->minor, rootname, rev, strerror(errno));
		return false;
	}
	if (fstatat(dirfd, ent, &entry, 0) < 0) {
		disc_warn(sc, "skipping '%s/%s': %s", where, ent, strerror(errno));
		return false;
	}
	if (dev.st_dev != entry.st_dev || dev.st_ino != entry.st_ino) {
		disc_link_basename(sc->root, rev, other, sizeof(other));
		disc_warn(sc,
			  "skipping '%s/%s/dev': %u:%u is the device of '%s' ('%s/%s'), not of "
			  "this entry",
			  where, ent, cd->major, cd->minor, other[0] ? other : "another entry",
			  rootname, rev);
		return false;
	}
	return true;
}

/* <ent><file> into path, by hand where it fits (the usual case, once for every entry);
 * snprintf's truncation otherwise. */
static void ent_path(char *path, size_t size, const char *ent, const char *file)
{
	size_t n = strlen(ent), f = strlen(file);

	if (n + f >= size) {
		snprintf(path, size, "%s%s", ent, file);
		return;
	}
	memcpy(path, ent, n);
	memcpy(path + n, file, f + 1);
}

static struct orh_device *find_dev(struct orh_inventory *inv, const char *name)
{
	for (size_t i = 0; i < inv->n_devs; i++)
		if (strcmp(inv->devs[i].name, name) == 0)
			return &inv->devs[i];
	return NULL;
}

/* Read <classfd>/<ent>/dev into cd; warnings name it from classwhere. */
static bool read_chardev(struct scan *sc, const char *rootname, int classfd,
			 const char *classwhere, const char *ent, enum orh_chardev_kind kind,
			 struct orh_chardev *cd)
{
	char path[128], buf[VALUE_MAX];

	ent_path(path, sizeof(path), ent, "/dev");
	if (!disc_read_required(sc, classfd, classwhere, path, buf, sizeof(buf)))
		return false;
	if (orh_parse_devnum(buf, &cd->major, &cd->minor) < 0) {
		disc_warn(sc, "skipping '%s/%s': garbled value '%.32s'", classwhere, path, buf);
		return false;
	}
	if (!devnum_checked(sc, rootname, classfd, classwhere, ent, kind, cd))
		return false;
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

	ent_path(path, sizeof(path), ent, "/ibdev");
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
		if (d && read_chardev(sc, rootname, classfd, where, ents.v[i], ORH_CHARDEV_UVERBS,
				      &cd))
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
		if (!read_chardev(sc, rootname, classfd, where, ents.v[i],
				  umad ? ORH_CHARDEV_UMAD : ORH_CHARDEV_ISSM, &cd))
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
	if (read_chardev(sc, rootname, sc->root, rootname, "sys/class/misc/rdma_cm",
			 ORH_CHARDEV_RDMA_CM, &inv->rdma_cm))
		strcpy(inv->rdma_cm.name, "rdma_cm");
}

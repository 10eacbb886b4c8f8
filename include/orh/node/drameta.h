/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A container's DRA device metadata (KEP-5304, src/node/drameta.c): the files a DRA
 * driver's CDI spec bind-mounts read-only into a container that uses a request of a claim,
 *   ORH_DRA_META_DIR/resourceclaims/<claim>/<request>/<driver>-metadata.json
 *   ORH_DRA_META_DIR/resourceclaimtemplates/<pod claim name>/<request>/<driver>-metadata.json
 * each a stream of DeviceMetadata objects (one per API version the driver writes:
 * metadata.resource.k8s.io/v1beta1, v1alpha1; the first of a version known here is read, the
 * others skipped). Kept of each device: the claim and request it came from (as the path
 * says), its driver and name, and the standard attributes resource.kubernetes.io/pciBusID
 * and resource.kubernetes.io/pcieRoot. The files are the container's view: read through its
 * root, bounded, only at the paths its spec mounts, and only where a mount is there.
 * orh_dra_meta_path() and orh_dra_meta_parse() are pure.
 */
#ifndef ORH_NODE_DRAMETA_H
#define ORH_NODE_DRAMETA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "orh/base/util.h"

#define ORH_DRA_META_DIR "/var/run/kubernetes.io/dra-device-attributes"
#define ORH_DRA_META_SUFFIX "-metadata.json"
#define ORH_DRA_META_MAX_FILES 32       /* metadata mounts of one container looked at */
#define ORH_DRA_META_MAX_BYTES 65536    /* one file */
#define ORH_DRA_META_MAX_OBJECTS 8      /* DeviceMetadata objects in one file's stream */
#define ORH_DRA_META_MAX_REQUESTS 32    /* requests of one object */
#define ORH_DRA_META_MAX_DEVICES 128    /* devices kept, every file together */
#define ORH_DRA_NAME_MAX 254            /* a DNS subdomain (253) and its NUL */

/* What a metadata file's path says. */
struct orh_dra_file {
	bool template;                  /* resourceclaimtemplates/: claim is the pod's name
					 * for the claim (pod.spec.resourceClaims[].name) */
	char claim[ORH_DRA_NAME_MAX];
	char request[64];               /* a DNS label */
	char driver[ORH_DRA_NAME_MAX];
};

/* One device of the metadata. */
struct orh_dra_device {
	struct orh_dra_file from;
	char name[ORH_DRA_NAME_MAX];    /* the device's name in its pool: "mlx5-1" */
	char pci_bus_id[24];            /* resource.kubernetes.io/pciBusID "0000:4b:00.0", or "" */
	char pcie_root[24];             /* resource.kubernetes.io/pcieRoot "pci0000:4a", or "" */
};

struct orh_dra_meta {
	struct orh_dra_device *v;
	size_t n;
	size_t n_files;                 /* files read whole */
};

/* Is path (in the container) a metadata file's, as the protocol lays them out? *f filled
 * when it is. Every name a non-empty run of [A-Za-z0-9._-] of its size. */
bool orh_dra_meta_path(const char *path, struct orh_dra_file *f);

/* One file's text (file: its path, for the messages; from: what the path says), its
 * devices appended to out. Every device's driver must be the path's, every request's name
 * the path's (or "<request>/<subrequest>"), an attribute of the two read a {"string": ...}
 * of their format. 0, or -EINVAL with err naming the file and the field (nothing appended
 * then). Pure. */
int orh_dra_meta_parse(const char *text, size_t len, const char *file,
		       const struct orh_dra_file *from, struct orh_dra_meta *out,
		       struct orh_err *err);

/* Read the files at the in-container paths (each one that orh_dra_meta_path() accepts,
 * a path given twice read once) through rootfd: a regular file of at most
 * ORH_DRA_META_MAX_BYTES, and, unless root_mnt is ORH_MOUNT_ANY, not on that mount (the
 * root's own: a file of the image rather than one mounted there). A file that cannot be
 * read or parsed is one warning naming it (and the field), never an error: the others are
 * read. */
void orh_dra_meta_read(int rootfd, uint64_t root_mnt, const char *const *paths, size_t n,
		       struct orh_dra_meta *out, struct orh_strv *warnings);

/* The device whose pciBusID is pci_bus_id (the first), or NULL. */
const struct orh_dra_device *orh_dra_meta_find(const struct orh_dra_meta *m,
					       const char *pci_bus_id);
void orh_dra_meta_free(struct orh_dra_meta *m);

#endif

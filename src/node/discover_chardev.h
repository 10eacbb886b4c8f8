/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The character devices of the node's RDMA devices (discover_chardev.c), for discover.c.
 */
#ifndef ORH_NODE_DISCOVER_CHARDEV_H
#define ORH_NODE_DISCOVER_CHARDEV_H

#include "sysfs.h"

/* The uverbs entries, umad/issm when opts->mad, and rdma_cm, of the devices already in the
 * inventory. rootname prefixes the paths in warnings. */
void disc_scan_chardevs(struct scan *sc, const char *rootname);

#endif

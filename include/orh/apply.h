/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The appliers (src/apply/): the thin parts that change a running container. Each applies
 * one part of a struct orh_plan and nothing else; none of them logs (util.h error
 * contract). One header per module; this one includes them all, for the drivers and
 * tests that use several.
 */
#ifndef ORH_APPLY_H
#define ORH_APPLY_H

#include "orh/cgroup.h"
#include "orh/devices.h"
#include "orh/mount.h"
#include "orh/ncclconf.h"
#include "orh/netns.h"
#include "orh/rlimit.h"
#include "orh/rootfs.h"
#include "orh/target.h"

#endif

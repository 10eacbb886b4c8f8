/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The appliers (src/apply/): the thin parts that change a running container. Each applies
 * one part of a struct orh_plan and nothing else; none of them logs (util.h error
 * contract). One header per module; this one includes them all, for the drivers and
 * tests that use several.
 */
#ifndef ORH_APPLY_APPLY_H
#define ORH_APPLY_APPLY_H

#include "orh/apply/cgroup.h"
#include "orh/apply/devices.h"
#include "orh/apply/mount.h"
#include "orh/apply/ncclconf.h"
#include "orh/apply/netns.h"
#include "orh/apply/rlimit.h"
#include "orh/base/rootfs.h"
#include "orh/apply/target.h"

#endif

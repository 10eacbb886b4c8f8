/* SPDX-License-Identifier: Apache-2.0 */
/* What the plan and decision tests look at: a variable of a plan, a line of warnings. */
#ifndef ORH_TESTS_PLAN_CHECK_H
#define ORH_TESTS_PLAN_CHECK_H

#include <stdbool.h>
#include <string.h>

#include "orh/decide/plan.h"

/* The value the plan gives name, or NULL. */
static inline const char *plan_value(const struct orh_plan *p, const char *name)
{
	const struct orh_env_entry *e = orh_plan_env_get(p, name);

	return e ? e->value : NULL;
}

/* Does a line of w hold needle? */
static inline bool strv_mentions(const struct orh_strv *w, const char *needle)
{
	for (size_t i = 0; i < w->n; i++)
		if (strstr(w->v[i], needle))
			return true;
	return false;
}

/* g = entry idx holding the IPv4 RoCE v2 GID 10.0.0.<port>, as a fake GID reader gives it */
static inline void fake_ipv4_gid(struct orh_gid *g, unsigned idx, unsigned port)
{
	memset(g, 0, sizeof(*g));
	g->index = idx;
	g->type = ORH_GID_TYPE_ROCE_V2;
	g->raw[10] = g->raw[11] = 0xff;
	g->raw[12] = 10;
	g->raw[15] = (uint8_t)port;
	g->ipv4_mapped = true;
	memcpy(&g->ipv4, g->raw + 12, 4);
}

#endif

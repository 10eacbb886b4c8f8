/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The lines of a kind the NRI plugin logs, counted in windows of time (include/orh/cmd/nri.h):
 * at most a burst of them in each window, the others counted for one line that says how
 * many were not logged. Pure: the caller gives the time and writes the lines.
 */
#include "orh/cmd/nri.h"

bool orh_nri_limit_take(struct orh_nri_limit *l, double now)
{
	if (now - l->start >= l->window_ms && l->dropped == 0) {
		l->start = now;
		l->n = 0;
	}
	if (now - l->start < l->window_ms && l->n < l->burst) {
		l->n++;
		return true;
	}
	l->dropped++;
	return false;
}

unsigned long orh_nri_limit_end(struct orh_nri_limit *l, double now, bool force)
{
	unsigned long dropped = l->dropped;

	if (!force && now - l->start < l->window_ms)
		return 0;
	l->start = now;
	l->n = 0;
	l->dropped = 0;
	return dropped;
}

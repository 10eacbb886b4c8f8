/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The lines the runtime can make the NRI plugin log, limited (include/orh/cmd/nri_plugin.h):
 * the warnings about the runtime's messages, the containers' lines and the lines saying the
 * kernel reported a change of the node, each kind at most a
 * burst in a window of time (nri_limit.c counts them), the others counted and the count
 * logged once the window is over.
 */
#include <syslog.h>

#include "orh/base/log.h"
#include "orh/cmd/nri_plugin.h"

#define PEER_BURST 5
#define CTR_BURST 100
#define NODE_BURST 5

static struct orh_nri_limit lines[ORH_NRI_LINES] = {
	[ORH_NRI_PEER] = { .what = "warning(s) about the runtime's messages", .burst = PEER_BURST,
			   .window_ms = ORH_NRI_LOG_WINDOW_MS },
	[ORH_NRI_CTR] = { .what = "container line(s)", .burst = CTR_BURST,
			  .window_ms = ORH_NRI_LOG_WINDOW_MS },
	[ORH_NRI_NODE] = { .what = "line(s) about the node changing", .burst = NODE_BURST,
			   .window_ms = ORH_NRI_LOG_WINDOW_MS },
};

/* Once a window is over (or now, when force): the count of its lines not logged. */
static void flush_one(struct orh_nri_limit *l, double now, bool force)
{
	double secs = (now - l->start) / 1000;
	unsigned long k = orh_nri_limit_end(l, now, force);

	if (k)
		orh_log(LOG_WARNING, "nri: %lu more %s not logged in %.0f s (%u in %.0f s at most)",
			k, l->what, secs, l->burst, l->window_ms / 1000);
}

bool orh_nri_log_take(enum orh_nri_lines kind)
{
	double now = orh_now_ms();

	flush_one(&lines[kind], now, false);
	return orh_nri_limit_take(&lines[kind], now);
}

double orh_nri_log_flush(double now, bool force)
{
	double next = -1;

	for (size_t i = 0; i < ORH_NRI_LINES; i++) {
		flush_one(&lines[i], now, force);
		if (lines[i].dropped && (next < 0 || next > lines[i].start + lines[i].window_ms))
			next = lines[i].start + lines[i].window_ms;
	}
	return next;
}

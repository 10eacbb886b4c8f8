/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One run of the hook for one container (hook.h): its id for the log, the on_error policy
 * applied to a failed step, and each step's time in its record.
 */
#include <stdio.h>
#include <syslog.h>

#include "orh/base/log.h"
#include "hook.h"

const char *orh_hook_cid(const struct hook *h)
{
	return h->st.id ? h->st.id : "?";
}


int orh_hook_failed_as(struct hook *h, const char *step, const struct orh_err *err,
		       const char *next)
{
	if (h->ctx->cfg.on_error == ORH_ON_ERROR_FAIL && h->act == ORH_ACT_REQUESTED) {
		snprintf(h->fail_msg, sizeof(h->fail_msg), "%s: %s", step, err->msg);
		orh_log(LOG_ERR, "container %s: %s: %s: %s; failing the container (on_error=fail)",
			orh_hook_cid(h), h->stage, step, err->msg);
		return ORH_EXIT_FAIL;
	}
	orh_log(LOG_WARNING, "container %s: %s: %s: %s; %s (on_error=warn)", orh_hook_cid(h), h->stage,
		step, err->msg, next);
	return ORH_EXIT_OK;
}

int orh_hook_failed(struct hook *h, const char *step, const struct orh_err *err)
{
	return orh_hook_failed_as(h, step, err, NEXT_OTHERS);
}

void orh_hook_record_step(struct hook *h, const char *name, double t0)
{
	struct orh_record_in *r = &h->rec;

	if (r->n_steps < ORH_ARRAY_SIZE(r->step_names)) {
		r->step_names[r->n_steps] = name;
		r->step_ms[r->n_steps++] = orh_now_ms() - t0;
	}
}

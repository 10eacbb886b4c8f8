/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Activation: whether a container is served, and why (include/orh/decide/activation.h). The
 * container's request is read here and nowhere else: oci-rdma-hook/enable (true|false)
 * and oci-rdma-hook/preset (one of the preset names compiled in), as annotations or as
 * the process.env variables OCI_RDMA_HOOK_ENABLE and OCI_RDMA_HOOK_PRESET, bounded and
 * checked alike. Nothing a container supplies can name a path, a library or a privilege.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "orh/decide/activation.h"
#include "orh/decide/decide.h"

#define ORH_ANNOTATION_VALUE_MAX 64

static int annotation_get(const json_t *annotations, const char *key, const char **out,
			  struct orh_err *err)
{
	const json_t *v = json_object_get(annotations, key);
	const char *s = NULL;

	*out = NULL;
	if (!v)
		return 0;
	if (!json_is_string(v))
		return orh_fail(err, EINVAL, "annotation '%s' is not a string", key);
	s = json_string_value(v);
	if (strlen(s) != json_string_length(v) || strlen(s) > ORH_ANNOTATION_VALUE_MAX)
		return orh_fail(err, EINVAL, "annotation '%s': value is not acceptable", key);
	*out = s;
	return 0;
}

/* Preset names are plain words: anything else (a path, a list, a quote) is refused
 * before it reaches a lookup. */
static bool preset_word(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '-' ||
		      *s == '_'))
			return false;
	return true;
}

/* NAME in process.env: the last entry of that name, as runc and crun give the process.
 * *value is NULL for a bare "NAME" (no '='). Entries that are not strings are skipped
 * (orh_spec_parse refuses them). */
static bool env_get(const json_t *env, const char *name, const char **value)
{
	size_t n = strlen(name), i = 0;
	bool found = false;
	json_t *e = NULL;

	*value = NULL;
	json_array_foreach(env, i, e) {
		const char *s = json_string_value(e);

		if (!s || strncmp(s, name, n) != 0 || (s[n] != '=' && s[n] != '\0'))
			continue;
		found = true;
		*value = s[n] == '=' ? s + n + 1 : NULL;
	}
	return found;
}

/* One field of the container's request (enable or preset). */
struct request_field {
	bool set;           /* the container carries it */
	bool from_env;      /* read from process.env, not from an annotation */
	const char *name;   /* the annotation key or the variable name */
	const char *value;  /* set: at most ORH_ANNOTATION_VALUE_MAX bytes */
};

static const char *field_kind(const struct request_field *f)
{
	return f->from_env ? "process.env entry" : "annotation";
}

/* The annotation `key` when the container carries it, else the variable `var` of
 * process.env (when the node config reads it). The one that loses is named in a warning
 * when it says something else. */
static int request_field_get(const struct orh_config *cfg, const json_t *annotations,
			     const char *key, const json_t *env, const char *var,
			     struct request_field *f, struct orh_strv *warnings,
			     struct orh_err *err)
{
	const char *a = NULL, *e = NULL;
	bool e_set = env && env_get(env, var, &e);
	int r;

	memset(f, 0, sizeof(*f));
	if (annotations) {
		r = annotation_get(annotations, key, &a, err);
		if (r < 0)
			return r;
	}
	if (a) {
		*f = (struct request_field){ .set = true, .name = key, .value = a };
		if (e_set && (!e || strcmp(a, e) != 0) && warnings)
			orh_strv_pushf(warnings,
				       "process.env entry '%s%s%.64s' ignored: the annotation "
				       "'%s=%s' is set, and wins", var, e ? "=" : "", e ? e : "",
				       key, a);
		return 0;
	}
	if (!e_set)
		return 0;
	if (!cfg->request_env) {
		if (warnings)
			orh_strv_pushf(warnings, "process.env entry '%s' ignored: the node "
				       "config has request_env = no", var);
		return 0;
	}
	*f = (struct request_field){ .set = true, .from_env = true, .name = var, .value = e };
	if (!e)
		return orh_fail(err, EINVAL, "process.env entry '%s': no value (not NAME=VALUE)",
				var);
	if (strlen(e) > ORH_ANNOTATION_VALUE_MAX)
		return orh_fail(err, EINVAL, "process.env entry '%s': value is not acceptable",
				var);
	return 0;
}

static int check_request_inputs(const json_t **annotations, const json_t **env,
				struct orh_err *err)
{
	if (*annotations && json_is_null(*annotations))
		*annotations = NULL;
	if (*annotations && !json_is_object(*annotations))
		return orh_fail(err, EINVAL, "annotations are not a JSON object");
	if (*env && json_is_null(*env))
		*env = NULL;
	if (*env && !json_is_array(*env))
		return orh_fail(err, EINVAL, "field 'process.env' is not an array");
	return 0;
}

const char *orh_activation_enable_field(const struct orh_config *cfg, const json_t *annotations,
					const json_t *env, bool *asked)
{
	struct orh_err err = { 0 };
	const json_t *a = NULL;
	const char *e = NULL;

	*asked = false;
	if (check_request_inputs(&annotations, &env, &err) < 0) {
		*asked = true; /* it tried to ask */
		return NULL;
	}
	a = annotations ? json_object_get(annotations, ORH_ANNOTATION_ENABLE) : NULL;
	if (a) {
		*asked = !(json_is_string(a) && strcmp(json_string_value(a), "false") == 0);
		return ORH_ANNOTATION_ENABLE;
	}
	if (!cfg->request_env || !env || !env_get(env, ORH_ENV_ENABLE, &e))
		return NULL;
	*asked = !(e && strcmp(e, "false") == 0);
	return ORH_ENV_ENABLE;
}

bool orh_activation_asked(const struct orh_config *cfg, const json_t *annotations,
			  const json_t *env)
{
	bool asked = false;

	orh_activation_enable_field(cfg, annotations, env, &asked);
	return asked;
}

/* What a container that request_scope = allocated leaves out holds. */
static enum orh_activation_held held_of(const struct orh_container_facts *facts)
{
	if (facts && orh_facts_hold_rdma(facts))
		return ORH_HELD_NO_UVERBS;
	if (facts && orh_facts_name_gpus(facts))
		return ORH_HELD_GPUS_ONLY;
	return ORH_HELD_NO_RDMA;
}

/* request_scope = allocated: only a container that was allocated an HCA (its uverbs node,
 * rule 8 then keeps the plan to it) is served; a request neither serves nor widens. true
 * when it leaves this one out (w says why). */
static bool scope_leaves_out(const struct orh_config *cfg,
			     const struct orh_container_facts *facts,
			     const struct request_field *enable, struct orh_activation_why *w,
			     struct orh_strv *warnings)
{
	if (cfg->request_scope != ORH_SCOPE_ALLOCATED || (facts && orh_facts_hold_uverbs(facts)))
		return false;
	if (w->reason == ORH_WHY_ASKED && warnings)
		orh_strv_pushf(warnings, "%s '%s=true' not served: request_scope = allocated, "
			       "and the container holds no uverbs node (no HCA was allocated to "
			       "it); it starts unchanged", field_kind(enable), enable->name);
	w->reason = w->reason == ORH_WHY_ASKED    ? ORH_WHY_SCOPE_ASKED
		  : w->reason == ORH_WHY_ALWAYS ? ORH_WHY_SCOPE_ALWAYS
					       : ORH_WHY_SCOPE_DEVICES;
	w->held = held_of(facts);
	return true;
}

int orh_activation_decide(const struct orh_config *cfg, const json_t *annotations,
			  const json_t *env, enum orh_activation_result *out,
			  struct orh_activation_why *why, struct orh_container_facts *facts,
			  struct orh_strv *warnings, struct orh_err *err)
{
	struct orh_activation_why w = { .reason = ORH_WHY_NOT_ASKED };
	struct request_field enable, preset;
	enum orh_activation_result res = ORH_ACT_SKIP;
	enum orh_preset p = ORH_PRESET_AUTO;
	int r;

	*out = ORH_ACT_SKIP;
	if (why)
		*why = (struct orh_activation_why){ .reason = ORH_WHY_BAD_REQUEST };
	if (facts && facts->sandbox) {
		w.reason = ORH_WHY_SANDBOX;
		goto done; /* a pod's sandbox (pause) container: never served, in every mode */
	}
	r = check_request_inputs(&annotations, &env, err);
	if (r < 0)
		return r;

	r = request_field_get(cfg, annotations, ORH_ANNOTATION_ENABLE, env, ORH_ENV_ENABLE,
			      &enable, warnings, err);
	if (r < 0)
		return r;
	w.by_env = enable.from_env;
	if (enable.set && strcmp(enable.value, "false") == 0) {
		w.reason = ORH_WHY_OPTED_OUT;
		goto done; /* an opt-out always wins, whatever else is asked for */
	}
	if (enable.set && strcmp(enable.value, "true") != 0)
		return orh_fail(err, EINVAL, "%s '%s': value '%s' is neither 'true' nor 'false'",
				field_kind(&enable), enable.name, enable.value);

	if (enable.set) {
		res = ORH_ACT_REQUESTED;
		w.reason = ORH_WHY_ASKED;
	} else if (cfg->activation == ORH_ACTIVATE_ALWAYS) {
		res = ORH_ACT_DEFAULT;
		w.reason = ORH_WHY_ALWAYS;
	} else if (cfg->activation == ORH_ACTIVATE_DEVICES && facts && orh_facts_hold_rdma(facts)) {
		res = ORH_ACT_DEFAULT; /* a device plugin (or --device, CDI) gave it RDMA nodes */
		w.reason = ORH_WHY_DEVICES;
	} else {
		w.reason = cfg->activation == ORH_ACTIVATE_DEVICES ? ORH_WHY_NO_DEVICES
								   : ORH_WHY_NOT_ASKED;
		goto done;
	}
	if (scope_leaves_out(cfg, facts, &enable, &w, warnings))
		goto done;

	r = request_field_get(cfg, annotations, ORH_ANNOTATION_PRESET, env, ORH_ENV_PRESET,
			      &preset, warnings, err);
	if (r < 0)
		return r;
	if (preset.set) {
		if (!preset_word(preset.value) || orh_preset_from_string(preset.value, &p) < 0)
			return orh_fail(err, EINVAL, "%s '%s': unknown preset '%s'",
					field_kind(&preset), preset.name, preset.value);
		if (facts) {
			facts->has_preset = true;
			facts->preset = p;
		}
	}
	*out = res;
done:
	if (why)
		*why = w;
	return 0;
}

/* The sentences of the reasons, by reason; those of request_scope end in what the
 * container holds (held_text), the asked ones come in the annotation's form and the
 * variable's. */
static const char *const why_text[] = {
	[ORH_WHY_NOT_ASKED] = "activation = annotation, and the container did not ask",
	[ORH_WHY_CDI] = "the container was given a device of the CDI spec",
	[ORH_WHY_SANDBOX] = "a Kubernetes pod sandbox: never served",
	[ORH_WHY_ASKED] = "the container asked (" ORH_ANNOTATION_ENABLE "=true)",
	[ORH_WHY_DEVICES] = "activation = devices, and the container holds RDMA device nodes",
	[ORH_WHY_HOST] = "a container on the host network",
	[ORH_WHY_ALWAYS] = "activation = always",
	[ORH_WHY_OPTED_OUT] = "the container opted out (" ORH_ANNOTATION_ENABLE "=false)",
	[ORH_WHY_SCOPE_ASKED] = "the container asked (" ORH_ANNOTATION_ENABLE "=true), but "
				"request_scope = allocated and it holds ",
	[ORH_WHY_SCOPE_ALWAYS] = "activation = always, but request_scope = allocated and the "
				 "container holds ",
	[ORH_WHY_SCOPE_DEVICES] = "activation = devices, but request_scope = allocated and the "
				  "container holds ",
	[ORH_WHY_NO_DEVICES] = "activation = devices, and the container holds no RDMA device node",
	[ORH_WHY_BAD_REQUEST] = "a bad request",
};
static const char *const why_env_text[] = {
	[ORH_WHY_ASKED] = "the container asked (" ORH_ENV_ENABLE "=true in process.env)",
	[ORH_WHY_OPTED_OUT] = "the container opted out (" ORH_ENV_ENABLE "=false in process.env)",
	[ORH_WHY_SCOPE_ASKED] = "the container asked (" ORH_ENV_ENABLE "=true in process.env), "
				"but request_scope = allocated and it holds ",
};
static const char *const held_text[] = {
	[ORH_HELD_NO_RDMA] = "no RDMA device node",
	[ORH_HELD_NO_UVERBS] = "no uverbs node (umad and issm nodes are no HCA)",
	[ORH_HELD_GPUS_ONLY] = "no RDMA device node (GPUs alone give no NIC: rule 9 does not "
			       "apply)",
};

static const char *const reason_name[] = {
	[ORH_WHY_NOT_ASKED] = "not-asked",
	[ORH_WHY_CDI] = "cdi",
	[ORH_WHY_SANDBOX] = "sandbox",
	[ORH_WHY_ASKED] = "asked",
	[ORH_WHY_DEVICES] = "devices",
	[ORH_WHY_HOST] = "host",
	[ORH_WHY_ALWAYS] = "always",
	[ORH_WHY_OPTED_OUT] = "opted-out",
	[ORH_WHY_SCOPE_ASKED] = "scope-asked",
	[ORH_WHY_SCOPE_ALWAYS] = "scope-always",
	[ORH_WHY_SCOPE_DEVICES] = "scope-devices",
	[ORH_WHY_NO_DEVICES] = "no-devices",
	[ORH_WHY_BAD_REQUEST] = "bad-request",
};

const char *orh_activation_reason_name(enum orh_activation_reason r)
{
	return (size_t)r < ORH_ARRAY_SIZE(reason_name) && reason_name[r] ? reason_name[r] : "?";
}

void orh_activation_sentence(const struct orh_activation_why *why, char *out, size_t size)
{
	const char *t = why->by_env && (size_t)why->reason < ORH_ARRAY_SIZE(why_env_text) &&
			why_env_text[why->reason] ? why_env_text[why->reason]
						  : why_text[why->reason];

	if (why->reason >= ORH_WHY_SCOPE_ASKED && why->reason <= ORH_WHY_SCOPE_DEVICES)
		snprintf(out, size, "%s%s", t, held_text[why->held]);
	else
		snprintf(out, size, "%s", t);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Applying a plan to a config.json before the runtime creates the container, and the text
 * of the result (include/orh/apply/spec.h). Pure functions of their inputs: the precreate hook and
 * the runtime shim call them, nothing here touches the system.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "orh/decide/oci.h"
#include "orh/apply/spec.h"

#define CAP_NAME "CAP_IPC_LOCK"

/* Get obj[key] as a container of the wanted type, creating it when absent or null.
 * -EINVAL when it exists with another type (orh_spec_parse() checks the parts it knows,
 * but a spec may also have been built by hand). */
static int child(json_t *obj, const char *key, json_type type, json_t **out,
		 const char *field, struct orh_err *err)
{
	json_t *c = json_object_get(obj, key);

	*out = NULL;
	if (c && !json_is_null(c)) {
		if (json_typeof(c) != type)
			return orh_fail(err, EINVAL, "config.json: field '%s' is not %s", field,
					type == JSON_ARRAY ? "an array" : "an object");
		*out = c;
		return 0;
	}
	c = type == JSON_ARRAY ? json_array() : json_object();
	if (!c || json_object_set_new(obj, key, c) < 0)
		return orh_fail(err, ENOMEM, "config.json: adding '%s'", field);
	*out = c;
	return 0;
}

static int append(json_t *array, json_t *item, const char *field, struct orh_err *err)
{
	if (!item || json_array_append_new(array, item) < 0)
		return orh_fail(err, ENOMEM, "config.json: adding to '%s'", field);
	return 0;
}

/* A linux.devices entry for n: a character device owned by root. */
static json_t *device_entry(const struct orh_devnode *n)
{
	static const char *const keys[] = { "path", "type", "major", "minor", "fileMode", "uid",
					    "gid" };
	json_t *vals[] = {
		json_string(n->path), json_string("c"), json_integer(n->major),
		json_integer(n->minor), json_integer(n->mode & 07777), json_integer(0),
		json_integer(0),
	};

	return orh_json_object_of(ORH_ARRAY_SIZE(keys), keys, vals);
}

/* A linux.resources.devices rule allowing n: "c MAJOR:MINOR rwm". */
static json_t *allow_rule(const struct orh_devnode *n)
{
	static const char *const keys[] = { "allow", "type", "major", "minor", "access" };
	json_t *vals[] = {
		json_true(), json_string("c"), json_integer(n->major), json_integer(n->minor),
		json_string("rwm"),
	};

	return orh_json_object_of(ORH_ARRAY_SIZE(keys), keys, vals);
}

static bool num_eq(const json_t *j, unsigned v)
{
	return json_is_integer(j) && json_integer_value(j) == (json_int_t)v;
}

static bool str_eq(const json_t *j, const char *s)
{
	return json_is_string(j) && strcmp(json_string_value(j), s) == 0;
}

/* A number of a linux.devices entry, for a message: "231" or "none". */
static void num_text(const json_t *j, char *out, size_t size)
{
	if (json_is_integer(j))
		snprintf(out, size, "%lld", (long long)json_integer_value(j));
	else
		snprintf(out, size, "none");
}

/* The spec already lists n->path: the entry stands as the user wrote it, but the device
 * cgroup grant is for the node's numbers, so another type or number breaks RDMA through
 * that path without a word from the runtime. Say so. */
static void check_listed(const json_t *e, const struct orh_devnode *n, struct orh_strv *warnings)
{
	static const char *const types[] = { "c", "b", "u", "p" };
	const json_t *type = json_object_get(e, "type");
	const char *tname = "?";
	char major[24], minor[24];

	if (!warnings || (str_eq(type, "c") && num_eq(json_object_get(e, "major"), n->major) &&
			  num_eq(json_object_get(e, "minor"), n->minor)))
		return;
	for (size_t i = 0; i < ORH_ARRAY_SIZE(types); i++)
		if (str_eq(type, types[i]))
			tname = types[i];
	num_text(json_object_get(e, "major"), major, sizeof(major));
	num_text(json_object_get(e, "minor"), minor, sizeof(minor));
	orh_strv_pushf(warnings,
		       "config.json: linux.devices lists '%s' as %s %s:%s, the node's is c %u:%u: "
		       "kept as listed, while the grant is for %u:%u (RDMA through it will fail)",
		       n->path, tname, major, minor, n->major, n->minor, n->major, n->minor);
}

static int add_devices(json_t *linux_, const struct orh_plan *plan,
		       const struct orh_spec_opts *opts, struct orh_spec_changes *ch,
		       struct orh_err *err)
{
	json_t *devs = NULL;
	size_t n_spec = 0;
	int r;

	r = child(linux_, "devices", JSON_ARRAY, &devs, "linux.devices", err);
	if (r < 0)
		return r;
	/* the plan holds each node once: only the spec's own entries can list one */
	n_spec = json_array_size(devs);
	for (size_t i = 0; i < plan->n_nodes; i++) {
		const struct orh_devnode *n = &plan->nodes[i];
		bool listed = false;
		size_t k = 0;
		json_t *e = NULL;

		for (k = 0; k < n_spec && (e = json_array_get(devs, k)); k++)
			if (str_eq(json_object_get(e, "path"), n->path)) {
				if (!listed)
					check_listed(e, n, opts ? opts->warnings : NULL);
				listed = true;
			}
		if (listed)
			continue;
		r = append(devs, device_entry(n), "linux.devices", err);
		if (r < 0)
			return r;
		ch->devices++;
	}
	return 0;
}

static int add_allow_rules(json_t *linux_, const struct orh_plan *plan,
			   struct orh_spec_changes *ch, struct orh_err *err)
{
	json_t *res = NULL, *rules = NULL;
	size_t n_spec = 0;
	int r;

	if (plan->n_nodes == 0)
		return 0;
	r = child(linux_, "resources", JSON_OBJECT, &res, "linux.resources", err);
	if (r < 0)
		return r;
	r = child(res, "devices", JSON_ARRAY, &rules, "linux.resources.devices", err);
	if (r < 0)
		return r;
	/* the plan holds each node once: only the spec's own rules can allow one */
	n_spec = json_array_size(rules);
	for (size_t i = 0; i < plan->n_nodes; i++) {
		const struct orh_devnode *n = &plan->nodes[i];
		bool present = false;
		size_t k = 0;
		json_t *e = NULL;

		/* Rules apply in order, so only a rule after every deny counts; ours is
		 * only skipped when the very same allow rule is already present. */
		for (k = 0; k < n_spec && (e = json_array_get(rules, k)); k++)
			if (json_is_true(json_object_get(e, "allow")) &&
			    str_eq(json_object_get(e, "type"), "c") &&
			    num_eq(json_object_get(e, "major"), n->major) &&
			    num_eq(json_object_get(e, "minor"), n->minor) &&
			    str_eq(json_object_get(e, "access"), "rwm"))
				present = true;
		if (present)
			continue;
		r = append(rules, allow_rule(n), "linux.resources.devices", err);
		if (r < 0)
			return r;
		ch->allow_rules++;
	}
	return 0;
}

static int add_memlock(json_t *process, const struct orh_memlock_verdict *m,
		       struct orh_spec_changes *ch, struct orh_err *err)
{
	json_t *rl = NULL, *e = NULL, *item = NULL;
	size_t k = 0;
	int r;

	r = child(process, "rlimits", JSON_ARRAY, &rl, "process.rlimits", err);
	if (r < 0)
		return r;
	json_array_foreach(rl, k, e)
		if (str_eq(json_object_get(e, "type"), "RLIMIT_MEMLOCK"))
			return 0; /* an earlier edit's: the same spec, edited again */
	item = json_object();
	if (!item || json_object_set_new(item, "type", json_string("RLIMIT_MEMLOCK")) < 0 ||
	    json_object_set_new(item, "hard", orh_json_u64(m->limit)) < 0 ||
	    json_object_set_new(item, "soft", orh_json_u64(m->limit)) < 0) {
		json_decref(item);
		return orh_fail(err, ENOMEM, "config.json: adding to 'process.rlimits'");
	}
	r = append(rl, item, "process.rlimits", err);
	if (r < 0)
		return r;
	ch->memlock = true;
	return 0;
}

static bool wants_env(const struct orh_plan *plan)
{
	for (size_t i = 0; i < plan->n_env; i++)
		if (!orh_env_nccl_reads(plan->env[i].name) && plan->env[i].value)
			return true;
	return false;
}

/* The settings NCCL does not read itself (UCX_*) go into PID 1's environment, where their
 * readers look; a variable the image or the user set is kept as it is. */
static int add_env(json_t *spec, json_t *process, const struct orh_plan *plan,
		   struct orh_spec_changes *ch, struct orh_err *err)
{
	json_t *env = NULL;
	int r;

	for (size_t i = 0; i < plan->n_env; i++) {
		const struct orh_env_entry *v = &plan->env[i];
		char *line = NULL;

		if (orh_env_nccl_reads(v->name) || !v->value)
			continue;
		r = child(process, "env", JSON_ARRAY, &env, "process.env", err);
		if (r < 0)
			return r;
		if (orh_spec_env_has(spec, v->name))
			continue;
		if (asprintf(&line, "%s=%s", v->name, v->value) < 0)
			return orh_fail(err, ENOMEM, "config.json: adding to 'process.env'");
		r = append(env, json_string(line), "process.env", err);
		free(line);
		if (r < 0)
			return r;
		ch->env++;
	}
	return 0;
}

/* Is e one of our own hooks for one of `stages` (its last argument)? The binary is named
 * oci-rdma-hook (path or args[0]); the stage is the last argument, after any options. */
static bool our_hook(const json_t *e, const char *const *stages)
{
	const json_t *args = json_object_get(e, "args");
	const char *path = json_string_value(json_object_get(e, "path"));
	const char *arg0 = json_string_value(json_array_get(args, 0));
	const char *last = json_string_value(json_array_get(args, json_array_size(args) - 1));
	const char *base = path ? strrchr(path, '/') : NULL;

	base = base ? base + 1 : path;
	if (!last || json_array_size(args) < 2 ||
	    !((base && !strcmp(base, ORH_HOOK_NAME)) || (arg0 && !strcmp(arg0, ORH_HOOK_NAME))))
		return false;
	for (; *stages; stages++)
		if (!strcmp(last, *stages))
			return true;
	return false;
}

/* Add a copy of hook to hooks.<stage> unless one of ours for `covered` is in one of the
 * `lists` (hooks.<name>) already: podman's hooks.d registers the live hook itself. */
static int add_hook(json_t *spec, const char *stage, const json_t *hook,
		    const char *const *lists, const char *const *covered, bool *added,
		    struct orh_err *err)
{
	json_t *hooks = NULL, *list = NULL, *e = NULL;
	char field[64];
	size_t k = 0;
	int r;

	*added = false;
	if (!hook)
		return 0;
	hooks = json_object_get(spec, "hooks");
	if (hooks && !json_is_null(hooks) && !json_is_object(hooks))
		return orh_fail(err, EINVAL, "config.json: field 'hooks' is not an object");
	for (; hooks && json_is_object(hooks) && *lists; lists++) {
		json_t *l = json_object_get(hooks, *lists);

		if (l && !json_is_null(l) && !json_is_array(l))
			return orh_fail(err, EINVAL, "config.json: field 'hooks.%s' is not an array",
					*lists);
		json_array_foreach(l, k, e)
			if (our_hook(e, covered))
				return 0;
	}
	r = child(spec, "hooks", JSON_OBJECT, &hooks, "hooks", err);
	if (r < 0)
		return r;
	snprintf(field, sizeof(field), "hooks.%s", stage);
	r = child(hooks, stage, JSON_ARRAY, &list, field, err);
	if (r < 0)
		return r;
	r = append(list, json_deep_copy(hook), field, err);
	if (r < 0)
		return r;
	*added = true;
	return 0;
}

/* The NCCL settings go into the container's /etc/nccl.conf, written from inside the
 * runtime's createRuntime stage by our `nccl-conf` hook (after the image's files and the
 * container's mounts are in place, in its network namespace), never into PID 1's
 * environment: there they would beat the image's own /etc/nccl.conf, and processes
 * started later with exec would not see them. poststop removes what a read-only root
 * needed outside the container. */
static const char *const live_lists[] = { "createRuntime", "prestart", NULL };
static const char *const live_stages[] = { "createRuntime", "prestart", "nccl-conf", NULL };

bool orh_spec_has_our_live_hook(const json_t *spec)
{
	const json_t *hooks = json_object_get(spec, "hooks"), *e;
	size_t k;

	for (const char *const *l = live_lists; json_is_object(hooks) && *l; l++)
		json_array_foreach(json_object_get(hooks, *l), k, e)
			if (our_hook(e, live_stages))
				return true;
	return false;
}

int orh_spec_add_nccl_hook(json_t *spec, const json_t *hook, bool *added, struct orh_err *err)
{
	return add_hook(spec, "createRuntime", hook, live_lists, live_stages, added, err);
}

static int add_hooks(json_t *spec, const struct orh_plan *plan,
		     const struct orh_spec_opts *opts, struct orh_spec_changes *ch,
		     struct orh_err *err)
{
	static const char *const post_lists[] = { "poststop", NULL };
	static const char *const post_stages[] = { "poststop", NULL };
	bool added = false;
	int r;

	if (plan->n_env == 0 || !opts)
		return 0;
	r = add_hook(spec, "createRuntime", opts->nccl_hook, live_lists, live_stages, &added,
		     err);
	if (r < 0)
		return r;
	ch->hooks += added;
	r = add_hook(spec, "poststop", opts->poststop_hook, post_lists, post_stages, &added, err);
	if (r < 0)
		return r;
	ch->hooks += added;
	return 0;
}

static int add_ipc_lock(json_t *process, struct orh_spec_changes *ch, struct orh_err *err)
{
	static const char *const sets[] = { "bounding", "effective", "permitted" };
	json_t *caps = json_object_get(process, "capabilities");
	int r;

	/* No capabilities object: the runtime keeps the whole default set, CAP_IPC_LOCK
	 * included; writing one would take every other capability away. */
	if (!caps || json_is_null(caps))
		return 0;
	if (!json_is_object(caps))
		return orh_fail(err, EINVAL, "config.json: field 'process.capabilities' is not an object");
	for (size_t i = 0; i < ORH_ARRAY_SIZE(sets); i++) {
		char field[64];
		json_t *set = NULL, *e = NULL;
		bool has = false;
		size_t k = 0;

		snprintf(field, sizeof(field), "process.capabilities.%s", sets[i]);
		r = child(caps, sets[i], JSON_ARRAY, &set, field, err);
		if (r < 0)
			return r;
		json_array_foreach(set, k, e)
			if (str_eq(e, CAP_NAME))
				has = true;
		if (has)
			continue;
		r = append(set, json_string(CAP_NAME), field, err);
		if (r < 0)
			return r;
		ch->caps++;
	}
	return 0;
}

int orh_spec_apply_plan(json_t *spec, const struct orh_plan *plan,
			const struct orh_spec_opts *opts, struct orh_spec_changes *changes,
			struct orh_err *err)
{
	struct orh_spec_changes ch;
	json_t *process = NULL, *linux_ = NULL;
	int r;

	memset(&ch, 0, sizeof(ch));
	if (changes)
		memset(changes, 0, sizeof(*changes));
	if (!json_is_object(spec))
		return orh_fail(err, EINVAL, "config.json: the document is not a JSON object");

	if (plan->n_nodes > 0) {
		r = child(spec, "linux", JSON_OBJECT, &linux_, "linux", err);
		if (r < 0)
			return r;
		r = add_devices(linux_, plan, opts, &ch, err);
		if (r < 0)
			return r;
		r = add_allow_rules(linux_, plan, &ch, err);
		if (r < 0)
			return r;
	}
	if (opts && opts->memlock && opts->memlock->set) {
		r = child(spec, "process", JSON_OBJECT, &process, "process", err);
		if (r < 0)
			return r;
		r = add_memlock(process, opts->memlock, &ch, err);
		if (r < 0)
			return r;
	}
	if (wants_env(plan)) {
		r = child(spec, "process", JSON_OBJECT, &process, "process", err);
		if (r < 0)
			return r;
		r = add_env(spec, process, plan, &ch, err);
		if (r < 0)
			return r;
	}
	r = add_hooks(spec, plan, opts, &ch, err);
	if (r < 0)
		return r;
	if (opts && opts->add_ipc_lock) {
		process = json_object_get(spec, "process");
		if (process && json_is_null(process))
			process = NULL; /* as absent, like every optional part of a spec */
		if (process && !json_is_object(process))
			return orh_fail(err, EINVAL, "config.json: field 'process' is not an object");
		if (process) {
			r = add_ipc_lock(process, &ch, err);
			if (r < 0)
				return r;
		}
	}
	if (changes)
		*changes = ch;
	return (int)(ch.devices + ch.allow_rules + ch.memlock + ch.hooks + ch.caps + ch.env);
}

int orh_spec_dump(const json_t *spec, char **out, size_t *len, struct orh_err *err)
{
	*out = orh_json_dump(spec, len);
	if (!*out)
		return orh_fail(err, ENOMEM, "serialising config.json");
	return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a container's spec says it was given (include/orh/decide/oci.h): the device nodes in
 * linux.devices, the GPUs of NVIDIA_VISIBLE_DEVICES, whether it sets RLIMIT_MEMLOCK, and
 * whether it is a Kubernetes pod sandbox. Pure: a function of the parsed spec (and the
 * state's annotations).
 */
#include <string.h>

#include "orh/decide/oci.h"
#include "orh/node/inventory.h"
#include "orh/decide/oci.h"

/* The annotations by which the CRI implementations mark a pod's sandbox (pause)
 * container: containerd's CRI plugin and CRI-O (include/orh/decide/oci.h). */
static const char sandbox_keys[] = ORH_SANDBOX_KEYS_TEXT;

static bool is_sandbox(const json_t *annotations)
{
	for (const char *key = sandbox_keys; *key; key += strlen(key) + 1) {
		const json_t *v = json_object_get(annotations, key);

		if (json_is_string(v) && !strcmp(json_string_value(v), "sandbox"))
			return true;
	}
	return false;
}

static bool num_of(const json_t *e, const char *key, unsigned *out)
{
	const json_t *v = json_object_get(e, key);

	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > (json_int_t)UINT32_MAX)
		return false;
	*out = (unsigned)json_integer_value(v);
	return true;
}

bool orh_nccl_debug_name(const char *name, size_t len)
{
	return len >= 10 && !strncmp(name, "NCCL_DEBUG", 10);
}

void orh_container_facts_read(const json_t *spec, const json_t *state_annotations,
			      struct orh_container_facts *facts)
{
	const json_t *annotations = json_object_get(spec, "annotations");
	const json_t *devs = json_object_get(json_object_get(spec, "linux"), "devices");
	const json_t *env = json_object_get(json_object_get(spec, "process"), "env");
	const json_t *e;
	size_t i;

	if (!json_is_object(annotations))
		annotations = state_annotations;
	facts->sandbox = json_is_object(annotations) && is_sandbox(annotations);
	facts->user_memlock = orh_spec_has_rlimit(spec, "RLIMIT_MEMLOCK");
	facts->n_devs = facts->n_devs_dropped = 0;
	json_array_foreach(devs, i, e) {
		const json_t *type = json_object_get(e, "type");
		struct orh_devnum n;

		if (!json_is_string(type) || strcmp(json_string_value(type), "c") ||
		    !num_of(e, "major", &n.major) || !num_of(e, "minor", &n.minor))
			continue;
		if (facts->n_devs == ORH_FACTS_MAX_DEVS) {
			facts->n_devs_dropped++;
			continue;
		}
		facts->devs[facts->n_devs++] = n;
	}
	facts->nvidia_visible = NULL;
	facts->from_spec = true;
	facts->user_nccl_debug = false;
	/* the last definition wins, as in a process environment built from the list */
	json_array_foreach(env, i, e) {
		const char *kv = json_string_value(e);
		const char *eq = kv ? strchr(kv, '=') : NULL;

		if (kv && !strncmp(kv, "NVIDIA_VISIBLE_DEVICES=", 23))
			facts->nvidia_visible = kv + 23;
		if (eq && orh_nccl_debug_name(kv, (size_t)(eq - kv)))
			facts->user_nccl_debug = true;
	}
}

/* Does the container hold a node of a number the kernel gives uverbs (with umad_too:
 * umad or issm)? */
static bool hold(const struct orh_container_facts *facts, bool umad_too)
{
	for (size_t i = 0; i < facts->n_devs; i++) {
		unsigned ma = facts->devs[i].major, mi = facts->devs[i].minor;

		if (orh_devnum_is_rdma(ORH_CHARDEV_UVERBS, ma, mi, NULL) ||
		    (umad_too && (orh_devnum_is_rdma(ORH_CHARDEV_UMAD, ma, mi, NULL) ||
				  orh_devnum_is_rdma(ORH_CHARDEV_ISSM, ma, mi, NULL))))
			return true;
	}
	return false;
}

bool orh_facts_hold_rdma(const struct orh_container_facts *facts)
{
	return hold(facts, true);
}

bool orh_facts_hold_uverbs(const struct orh_container_facts *facts)
{
	return hold(facts, false);
}

bool orh_facts_name_gpus(const struct orh_container_facts *f)
{
	for (size_t i = 0; i < f->n_devs; i++)
		if (f->devs[i].major == ORH_NVIDIA_MAJOR && f->devs[i].minor < 255)
			return true;
	return f->nvidia_visible;
}

bool orh_facts_hold_gpus(const struct orh_container_facts *f)
{
	const char *v = f->nvidia_visible;

	for (size_t i = 0; i < f->n_devs; i++)
		if (f->devs[i].major == ORH_NVIDIA_MAJOR && f->devs[i].minor != 255)
			return true;
	return v && *v && strcmp(v, "void") && strcmp(v, "none");
}

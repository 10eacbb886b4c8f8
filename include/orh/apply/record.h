/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The record of what was done for one container (src/apply/record.c): a JSON object that
 * the stage serving it writes to <run dir>/<id>/record.json and `inspect` reads. Its text
 * is written from values (src/apply/record_text.c, pure); writing the file is not pure.
 * The state directories themselves: orh/apply/statedir.h; the sweep of the run dir: orh/apply/sweep.h.
 */
#ifndef ORH_APPLY_RECORD_H
#define ORH_APPLY_RECORD_H

#include <jansson.h>
#include <limits.h>
#include <sys/stat.h>
#include <stdbool.h>
#include <stdint.h>

#include "orh/decide/decide.h"
#include "orh/apply/statedir.h"
#include "orh/base/util.h"

/* The record format's version (the "version" field). */
#define ORH_RECORD_VERSION 1
/* The pid and mount namespaces of a process, by their inode numbers (0: unknown). */
struct orh_ns_ids {
	unsigned long long pid, mnt;
};
/* The namespaces of this process, as <proc>/self/ns/{pid,mnt} show them ("/proc", or a
 * fake tree whose self/ns/ holds files). */
void orh_ns_ids_read(const char *proc, struct orh_ns_ids *ns);

/* What one stage did, as the record holds it. The strings are the caller's. */
struct orh_record_in {
	const char *id;
	const char *stage;              /* createRuntime, prestart, nccl-conf, cdi-createRuntime */
	struct orh_ns_ids ns;           /* the writer's: the pid is one of its pid namespace, the
					 * bundle's paths are of its mount namespace */
	char sysfs_view[17];            /* the id of the container's sysfs view, or "" */
	const char *edited_by;          /* nccl-conf: who edited the spec (precreate or the
					 * shim, or the NRI plugin's adjustment); NULL */
	long pid;
	unsigned long long start_time;  /* /proc/<pid>/stat field 22; 0: unknown */
	const struct orh_decision *d;   /* the decision (act, why, facts, plan, warnings) */
	const char *node_from;          /* the reading of the node handed over that the
					 * decision took (orh/apply/handoff.h), or NULL: read here */
	const char *node_read;          /* who read it: "by the NRI plugin"; NULL: "by the
					 * runtime shim" where node_from or bundle is set, else
					 * "by this stage" */
	const json_t *shim_ms;          /* the shim's time as it handed it over, or NULL */
	const json_t *node_age_ms;      /* how old the NRI plugin's node kept was when the
					 * decision restored it (orh/node/node.h), or NULL */
	/* the runtime shim serving a container alone (no stage, so no pid): the bundle, the
	 * stat of the config.json it wrote, and the runtime's state directory of the
	 * container (or NULL), which tell whether the container is there */
	const char *bundle;
	const struct stat *bundle_config;
	const char *runtime_state;
	const char *netns_if;           /* the container's default route interface, or "" */
	/* device nodes: created, already there, bound; -1: the step did not run */
	long nodes_created, nodes_kept, nodes_bound;
	const char *nodes_error;        /* the step's error, or NULL */
	const char *cgroup;             /* "granted", "not used", "failed: ...", NULL: not run */
	/* memlock of the container's process before and after (UINT64_MAX: unlimited);
	 * memlock_known false: not read */
	bool memlock_known;
	uint64_t memlock_soft_before, memlock_hard_before;
	uint64_t memlock_soft_after, memlock_hard_after;
	const char *memlock;            /* what the step did ("raised", ...), NULL: not run */
	/* the spec's own: linux.devices entries under /dev/infiniband, and its RLIMIT_MEMLOCK
	 * (for the spec-edit paths, what the edit put there) */
	long spec_devices;              /* -1: not read */
	bool spec_memlock_set;
	uint64_t spec_memlock;
	/* /etc/nccl.conf: how many settings were added, whether a copy was bind-mounted (from
	 * where), which of the image's lines were kept */
	const char *conf;               /* "written", "failed: ...", NULL: not written */
	size_t conf_added;
	const char *conf_bound_from;    /* "" or the copy's path */
	const struct orh_strv *conf_kept;
	const char *conf_record_off;    /* "" or why the capture's lines were left out */
	const struct orh_strv *warnings; /* the stage's own, after the decision's */
	/* per step: name and monotonic milliseconds; total */
	const char *step_names[12];
	double step_ms[12];
	size_t n_steps;
	double total_ms;
};

/* Read into rec what the spec holds: spec_devices, spec_memlock(_set), and sysfs_view
 * where a mount's source is a class directory of a view (the spec edit's). */
void orh_record_spec(struct orh_record_in *rec, const json_t *spec);
/* The record of in as compact JSON text, written from its values without a tree
 * (record_text.c): malloc'd and NUL-terminated, its length in *len. A string that is not
 * valid UTF-8 leaves out its member, its array element or the object around it (the
 * file's comment says which); NULL where the id or the stage is not one, or shim_ms holds
 * what JSON cannot. */
char *orh_record_text(const struct orh_record_in *in, size_t *len);

/* Write in's record to <state_dir>/record.json (0644 root's file, atomically); the
 * directory is made (0700) where missing. A record that names a sysfs view links the
 * container to it first (orh_sysview_link(), in the views' directory beside state_dir):
 * the sweep keeps a view while a state directory left has a link to it. 0 or -errno with
 * err filled (a failed link's, the record written all the same). */
int orh_record_write(const char *state_dir, const struct orh_record_in *in,
		     struct orh_err *err);
/* Whether the container of a record is there, as seen from the namespaces `here`:
 *   YES / NO: for a record with a pid, whether that pid has the recorded start time
 *   (under proc: "/proc" or a fake tree); for one without (the runtime shim's), whether
 *   its bundle's config.json is the one recorded and the runtime's state directory of the
 *   container is there, or the record is younger than ORH_RECORD_RUNTIME_GRACE seconds
 *   (the runtime makes that directory after the shim).
 *   UNKNOWN: the record is of another format version than ORH_RECORD_VERSION, or was
 *   written in another pid namespace (a record with a pid) or mount namespace (one
 *   without) than `here`, or names none: its pid or paths mean nothing here. */
#define ORH_RECORD_RUNTIME_GRACE 10
enum orh_alive { ORH_ALIVE_NO, ORH_ALIVE_YES, ORH_ALIVE_UNKNOWN };
enum orh_alive orh_record_liveness(const json_t *rec, const char *proc,
				   const struct orh_ns_ids *here);
/* The same from this process's namespaces: true for YES alone. */
bool orh_record_alive(const json_t *rec, const char *proc);
/* The record dirfd/path (relative; no link followed), read in one buffer of at most
 * ORH_RECORD_MAX_BYTES and parsed; NULL where it is missing, not a regular file, larger,
 * or not JSON. */
#define ORH_RECORD_MAX_BYTES (1024 * 1024)
json_t *orh_record_load_at(int dirfd, const char *path);
#endif

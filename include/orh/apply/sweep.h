/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sweep of the run dir (src/apply/sweep.c): the state directories (orh/apply/statedir.h) of
 * containers that are gone (their records: orh/apply/record.h), and the sysfs views
 * (orh/apply/sysview.h) that no container links to.
 */
#ifndef ORH_APPLY_SWEEP_H
#define ORH_APPLY_SWEEP_H

/* A state directory with no record, older than this, is swept; so is a sysfs view that no
 * container links to, once this long unused. */
#define ORH_RECORD_ORPHAN_SECONDS 600
/* The most state directories one sweep looks at: the next sweep goes on after the last one
 * looked at (its name is the content of ORH_RECORD_SWEPT), so that every one is looked at
 * once in ceil(N / ORH_RECORD_SWEEP_MAX) sweeps of N directories. */
#define ORH_RECORD_SWEEP_MAX 256
/* The most state directories a sweep lists: those past it wait for others to go. */
#define ORH_RECORD_SWEEP_LIST_MAX 65536
#define ORH_RECORD_SWEEP_EVERY 60         /* seconds between the sweeps of container starts */
/* In the run dir: its mtime, the last sweep's; its content, the name of the last state
 * directory that sweep looked at. */
#define ORH_RECORD_SWEPT ".swept"

/* Sweep run_dir:
 *  - Of the state directories, ORH_RECORD_SWEEP_MAX at most, from where the last sweep
 *    stopped: remove each whose container is gone (orh_record_liveness() NO, from this
 *    process's namespaces under proc: "/proc" or a fake tree), or that has no record and
 *    is older than ORH_RECORD_ORPHAN_SECONDS. A record whose container's liveness is
 *    UNKNOWN (written in another namespace, or of another version) keeps its directory:
 *    from another pid namespace nothing with a pid is removed. skip_id is never removed.
 *    Only directories, never through a symlink, and only the entries the hook makes in
 *    them.
 *  - Of the sysfs views under run_dir/.sysfs: remove the links of containers whose state
 *    directory is gone, then each view that no link names and that was last made or used
 *    more than ORH_RECORD_ORPHAN_SECONDS ago, and what a killed build or sweep left
 *    (orh_sysview_sweep()).
 * every: nothing is done when a sweep ran in the last `every` seconds (0: always; a
 * container start passes ORH_RECORD_SWEEP_EVERY). Nothing found in the run dir makes it
 * block: it opens regular files alone, non-blocking. Returns how many entries it
 * removed. */
int orh_record_sweep(const char *run_dir, const char *proc, const char *skip_id,
		     unsigned every);

#endif

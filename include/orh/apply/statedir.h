/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The containers' state directories (src/apply/statedir.c): <run dir>/<name of the id>,
 * root-only, holding what the hook writes for the container: its record (orh/apply/record.h),
 * the node handed to its stage (orh/apply/handoff.h), the generated /etc/nccl.conf. Named here,
 * with what reads and removes them.
 */
#ifndef ORH_APPLY_STATEDIR_H
#define ORH_APPLY_STATEDIR_H

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

#include "orh/base/util.h"

/* where each container's state directory is made, <run dir>/<container id> */
#ifndef ORH_RUN_DIR
#define ORH_RUN_DIR "/run/oci-rdma-hook"
#endif
/* The files of a state directory: the record, the node handed to the nccl-conf stage, the
 * generated /etc/nccl.conf that the container's is a mount of, the NRI plugin's mark that
 * it runs the container's stage at StartContainer (orh/apply/handoff.h). */
#define ORH_RECORD_FILE "record.json"
#define ORH_HANDOFF_FILE "node.json"
#define ORH_STATE_NCCL_CONF "nccl.conf"
#define ORH_START_FILE "nri-start"

/* The same for any JSON file of the state directory, of at most max bytes; *st is the
 * file's, when it could be opened. Only a regular file is opened, and without blocking
 * (O_NONBLOCK: a FIFO swapped in at the last moment cannot hold the reader). */
json_t *orh_state_file_load(int dirfd, const char *path, size_t max, struct stat *st);
/* Its bytes as read (malloc'd, NUL-terminated, *len of them), by the same rules; NULL where
 * it is not a regular file of at most max bytes, read whole. */
char *orh_state_file_read(int dirfd, const char *path, size_t max, struct stat *st,
			  size_t *len);
/* Can the container id name its state directory? runc's rule: 1 to NAME_MAX (255) of
 * [A-Za-z0-9_+.-], neither "." nor "..". */
bool orh_state_id_usable(const char *id);
/* The name of the state directory of a usable id: the id, but for a leading '.', which
 * becomes ORH_STATE_DOT ('@', no id has one), so that no id names an entry of the run dir
 * the hook makes for itself (those start with a dot: ORH_RECORD_SWEPT, the sysfs views).
 * false for an unusable id. */
#define ORH_STATE_DOT '@'
bool orh_state_dir_name(const char *id, char out[NAME_MAX + 1]);
/* The container id whose state directory is named name; false for a name that no usable
 * id gives (the run dir's own entries among them). */
bool orh_state_id_of_dir(const char *name, char out[NAME_MAX + 1]);
/* <run_dir>/<the state directory's name of id> (a new string), or NULL for an unusable
 * id. */
char *orh_state_dir_path(const char *run_dir, const char *id);
/* Make the container's state directory <state_dir> (root-only) and its parent as
 * orh_record_write() does; an fd of it, *created telling whether it was made here. */
int orh_state_dir_open(const char *state_dir, bool *created, struct orh_err *err);
/* Is name an entry the hook makes in a container's state directory (the generated
 * nccl.conf, record.json, the shim's node.json) or a temporary name a killed writer of one left
 * (orh_replace_at's ".NAME.orh-*")? poststop and the sweep remove these and nothing else. */
bool orh_state_entry_ours(const char *name);
/* Remove <run_dir>/<id's state directory>: its entries that are ours, then the directory
 * (it stays where anything else is in it): poststop's, and the runtime shim's `delete`
 * (behind the shim no poststop hook runs). False when there was none, or it stayed. */
bool orh_state_dir_remove(const char *run_dir, const char *id);
/* The same for runfd/name, a state directory's name in the run dir open at runfd. */
bool orh_state_dir_remove_at(int runfd, const char *name);

#endif

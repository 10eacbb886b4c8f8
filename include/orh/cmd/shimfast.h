/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The runtime shim's pass-through commands without the C library (src/cmd/shim_fast.c).
 *
 * oci-rdma-runtime edits nothing on runc's `start`, `state`, `kill` and the other commands
 * that are not `create`, `run` or `delete`, nor on the create of a pod's sandbox: it only
 * executes the runtime. Started as a
 * program of the C library, that costs the library's start (on a virtual machine mostly
 * its CPU feature probes, each a trap to the hypervisor: about 0.9 ms here, more than
 * the shim's own work on such a command). The binary's entry point (orh_entry, x86_64)
 * runs first, before the library: where the command passes through (or creates a
 * sandbox) and the runtime is known from a runtime cache the shim wrote before, it
 * executes the runtime at once; in every other case it goes on to the C library's start
 * and main() as usual.
 *
 * The runtime cache: a file ORH_RUN_DIR/.shim-runtime-<hash of the config path>, root's
 * and not writable by others, written by the shim's ordinary path (cmd_runtime.c) after
 * it read the node config and found the runtime. It holds the config's path and its
 * identity and times as stat() gave them when it was read (or that there was none), the
 * paths the lookup of the runtime on the shim's runtime path depended on (where the config
 * names none, or a bare name): each directory it looked in before it found the runtime,
 * and each candidate it passed over there (the runtime's name in a directory, but not an
 * executable regular file: not executable, a dangling link, this shim), each with its
 * identity and times as stat() follows a link to them, and the runtime: a config changed
 * since (another inode, size, mtime or ctime), a directory whose entries changed (a
 * runtime installed ahead of the one found), or a candidate passed over that changed (made
 * executable, a link that now leads to a file), does not match, and the ordinary path runs
 * (and writes the cache again). Where the runtime the cache names is now the shim itself
 * (the same device and inode as /proc/self/exe: a link to the shim put in its place), the
 * ordinary path runs too, which refuses it or looks further; the shim never executes
 * itself.
 *
 * Everything here is freestanding (no C library call, no stack protector) and needs no
 * relocation: the fast path runs before the library is set up, and in a static PIE before
 * the library's start has applied the binary's relocations, so no table of pointers (a
 * list of names is one string, its names ended by NULs) and no address in initialised
 * data. Its buffers (the cache's text, config.json) are static, not on the stack: it runs
 * in a few KiB of stack (tests/shim-fast.sh runs it under a stack limit of 16 KiB and
 * checks the object's relocations and symbols).
 */
#ifndef ORH_CMD_SHIMFAST_H
#define ORH_CMD_SHIMFAST_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

#define ORH_SHIM_CACHE_PREFIX ".shim-runtime-"
#define ORH_SHIM_CACHE_MAX 4096

/* The index in argv of runc's command (after the global options, as urfave/cli reads
 * them: one or two dashes, "--" ends them, "--name=value" or "--name value" for those that
 * take a value), or 0 when there is none. */
int orh_shim_command(int argc, char *const *argv);
/* A global option of runc or crun (name, len bytes, without its dashes) that takes a
 * value. */
bool orh_shim_global_takes_value(const char *name, size_t len);
/* The command passes straight through the shim: neither create, run nor delete. */
bool orh_shim_passes_through(const char *command);
/* The bundle of runc's create or run at argv[cmd] (--bundle or -b after it, as
 * urfave/cli reads them), "." when none is given. */
const char *orh_shim_bundle(int argc, char *const *argv, int cmd);
/* Is this config.json (len bytes) a pod's sandbox (pause) container: annotations, at the
 * top, with "io.kubernetes.cri.container-type" or "io.kubernetes.cri-o.ContainerType" the
 * string "sandbox"? True only when sure: false also for text that is not JSON, a key
 * with an escape, "annotations" or one of those keys twice. The shim never serves a
 * sandbox (orh_container_facts_read() says the same of the parsed spec), so its create
 * passes through too. */
bool orh_shim_spec_sandbox(const char *json, size_t len);
/* The node config the shim reads: OCI_RDMA_HOOK_CONFIG's first value in envp, as getenv()
 * gives it, else ORH_DEFAULT_CONFIG. */
const char *orh_shim_config(char *const *envp);
/* The cache's file name for a config path (ORH_SHIM_CACHE_PREFIX and 16 hex digits) into
 * out (at least 32 bytes). */
void orh_shim_cache_name(const char *config_path, char *out);
/* What a runtime cache says: the config (its path, and its stat as the shim read it, NULL
 * where there was none), the paths the lookup of the runtime depended on (none where the
 * config names an absolute runtime), and the runtime found. */
#define ORH_SHIM_CACHE_PATHS 32
struct orh_shim_cache_path {
	char kind;               /* 'D' a directory looked in, 'F' a candidate passed over */
	const char *path;
	const struct stat *st;   /* stat(2)'s, following links; NULL: not there (or a link
				    to nothing) */
};
struct orh_shim_cache {
	const char *config_path;
	const struct stat *config_st;
	const struct orh_shim_cache_path *paths;
	size_t n_paths;
	const char *runtime;
};
/* Its text into out; the length, or 0 when it does not fit size, or a path is not absolute
 * or holds a newline, or a kind is neither 'D' nor 'F'. */
size_t orh_shim_cache_text(const struct orh_shim_cache *c, char *out, size_t size);
/* The runtime a cache's text (len bytes, a NUL after them) names, when it was written for
 * config_path and the config and each path in it are as stat_fn (stat(2) or a test's)
 * says they are now: a pointer into text, the line ended with a NUL. NULL otherwise. */
const char *orh_shim_cache_match(char *text, size_t len, const char *config_path,
				 int (*stat_fn)(const char *path, struct stat *st, void *arg),
				 void *arg);
/* The config path a cache's text (len bytes) was written for: a pointer into text, its
 * line ended with a NUL; NULL when the text is not a cache's. */
const char *orh_shim_cache_config(char *text, size_t len);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The reading of the node of the spec edit (the runtime shim's, the NRI plugin's), handed
 * to the container's nccl-conf stage (include/orh/apply/handoff.h). Written like the record:
 * one file replaced atomically in the container's state directory, without fsync (it
 * serves one container start; /run does not outlive a boot). The file is the snapshot's
 * JSON object without its node text, on one line (compact JSON holds no newline), then
 * that text (snapline.c's lines) as it is: the stage parses a few hundred bytes of JSON
 * and reads the node's lines in one pass, where a JSON string of the node (about 9 KB on
 * a node of 32 ports) took more instructions to lex than reading the node does.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "orh/base/atomic.h"
#include "orh/apply/handoff.h"
#include "orh/base/json.h"
#include "orh/apply/statedir.h"

void orh_handoff_token(char out[ORH_HANDOFF_TOKEN_LEN + 1])
{
	uint64_t rnd[2] = { 0, 0 };

	/* without waiting for the kernel's pool (GRND_NONBLOCK): the token tells one creation
	 * of a container from another, it guards no secret; without the pool, the time and
	 * the pid tell them */
	if (getrandom(rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd)) {
		struct timespec ts = { 0, 0 };

		clock_gettime(CLOCK_REALTIME, &ts);
		rnd[0] ^= (uint64_t)ts.tv_sec << 30 ^ (uint64_t)ts.tv_nsec;
		rnd[1] ^= (uint64_t)getpid() << 32 ^ (uint64_t)(orh_now_ms() * 1000);
	}
	for (int i = 0; i < ORH_HANDOFF_TOKEN_LEN; i++)
		out[i] = "0123456789abcdef"[(rnd[i / 16] >> (60 - 4 * (i % 16))) & 15];
	out[ORH_HANDOFF_TOKEN_LEN] = '\0';
}

int orh_handoff_write(const char *run_dir, const char *id, const char *bundle,
		      const char *token, const char *sysroot, json_t *snapshot, bool *created,
		      struct orh_err *err)
{
	_cleanup_free_ char *state_dir = orh_state_dir_path(run_dir, id);
	_cleanup_free_ char *conf = bundle ? orh_xasprintf("%s/config.json", bundle) : NULL;
	_cleanup_json_text_ char *text = NULL;
	_cleanup_json_ json_t *owned = snapshot; /* the caller's reference, given back here */
	_cleanup_json_ json_t *node = json_incref(json_object_get(snapshot, "node"));
	_cleanup_free_ char *file = NULL;
	_cleanup_close_ int dirfd = -1;
	struct orh_replace how = { .type = S_IFREG, .mode = 0600, .what = ORH_HANDOFF_FILE };
	size_t head, len;
	struct stat st;

	*created = false;
	if (!state_dir)
		return orh_fail(err, EINVAL, "the container id '%s' names no state directory", id);
	if (conf && stat(conf, &st) < 0)
		return orh_fail_errno(err, errno, "'%s'", conf);
	if (conf)
		json_object_set_new(snapshot, "config_json", json_pack("{s:I, s:I}", "dev",
				    (json_int_t)st.st_dev, "ino", (json_int_t)st.st_ino));
	else
		json_object_set_new(snapshot, "token", json_string(token ? token : ""));
	json_object_set_new(snapshot, "sysroot", json_string(sysroot ? sysroot : "/"));
	/* the node's text after the object's line, not in it */
	if (json_is_string(node))
		json_object_del(snapshot, "node");
	text = json_dumps(owned, JSON_COMPACT);
	if (!text)
		return orh_fail(err, ENOMEM, "formatting '%s/%s'", state_dir, ORH_HANDOFF_FILE);
	head = strlen(text);
	len = json_is_string(node) ? json_string_length(node) : 0;
	file = orh_xmalloc(head + 1 + len);
	memcpy(file, text, head);
	file[head] = '\n';
	if (len)
		memcpy(file + head + 1, json_string_value(node), len);
	dirfd = orh_state_dir_open(state_dir, created, err);
	if (dirfd < 0)
		return dirfd;
	how.data = file;
	how.len = head + 1 + len;
	return orh_replace_at(dirfd, ORH_HANDOFF_FILE, &how, err);
}

/* The snapshot of a handoff file's bytes (buf[len] is a NUL): the JSON object of its first
 * line, with the lines after it as its node text; NULL where the line is not a JSON object,
 * or the text holds a NUL, is not UTF-8, or comes after an object that has a node. */
static json_t *handoff_parse(const char *buf, size_t len)
{
	const char *nl = memchr(buf, '\n', len);
	size_t head = nl ? (size_t)(nl - buf) : len, rest = nl ? len - head - 1 : 0;
	json_t *snap = json_loadb(buf, head, 0, NULL), *node;

	if (!json_is_object(snap) || (rest && json_object_get(snap, "node"))) {
		json_decref(snap);
		return NULL;
	}
	if (!rest)
		return snap; /* nothing after the object (a file of one JSON object) */
	node = memchr(nl + 1, '\0', rest) ? NULL : orh_json_stringn(nl + 1, rest);
	if (!node || json_object_set_new(snap, "node", node) < 0) {
		json_decref(snap);
		return NULL;
	}
	return snap;
}

void orh_handoff_drop(const char *run_dir, const char *id)
{
	_cleanup_free_ char *dir = orh_state_dir_path(run_dir, id);
	_cleanup_free_ char *path = dir ? orh_xasprintf("%s/%s", dir, ORH_HANDOFF_FILE) : NULL;

	if (path)
		unlink(path);
}

/* Is st this user's, writable by no other? */
static bool only_ours(const struct stat *st)
{
	return st->st_uid == geteuid() && !(st->st_mode & 022);
}

/* Bound to the config.json the shim wrote, or to the token of the stage's hook entry. */
static bool bound_here(const json_t *snap, const char *bundle, const char *token,
		       const char *sysroot, char *why, size_t size)
{
	_cleanup_free_ char *conf = orh_xasprintf("%s/config.json", bundle ? bundle : ".");
	const char *mine = json_string_value(json_object_get(snap, "token"));
	const char *root = json_string_value(json_object_get(snap, "sysroot"));
	json_int_t dev = -1, ino = -1;
	struct stat st;

	if (!root || (!mine && json_unpack((json_t *)snap, "{s:{s:I, s:I}}", "config_json", "dev",
					    &dev, "ino", &ino) < 0)) {
		snprintf(why, size, "it names no config.json or token, or no sysroot");
		return false;
	}
	if (mine && (!token || strlen(mine) != ORH_HANDOFF_TOKEN_LEN || strcmp(mine, token))) {
		snprintf(why, size, "it was written for another creation of the container (its "
			 "token is not the one of this stage's hook, %s)", ORH_HANDOFF_ENV);
		return false;
	}
	if (!mine && (!bundle || stat(conf, &st) < 0 || (json_int_t)st.st_dev != dev ||
		      (json_int_t)st.st_ino != ino)) {
		snprintf(why, size, "'%s' is not the file the shim wrote", conf);
		return false;
	}
	if (strcmp(root, sysroot ? sysroot : "/") != 0) {
		snprintf(why, size, "it was read through the sysroot '%s'", root);
		return false;
	}
	return true;
}

json_t *orh_handoff_take(const char *state_dir, const char *bundle, const char *token,
			 const char *sysroot, char *why, size_t size)
{
	_cleanup_close_ int dirfd = open(state_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_free_ char *buf = NULL;
	struct stat st;
	json_t *snap;
	size_t len;

	why[0] = '\0';
	if (dirfd < 0)
		return NULL;
	if (fstat(dirfd, &st) < 0 || !only_ours(&st)) {
		snprintf(why, size, "'%s' is not this user's alone", state_dir);
		return NULL;
	}
	buf = orh_state_file_read(dirfd, ORH_HANDOFF_FILE, ORH_HANDOFF_MAX_BYTES, &st, &len);
	snap = buf ? handoff_parse(buf, len) : NULL;
	if (!snap) {
		if (faccessat(dirfd, ORH_HANDOFF_FILE, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
			snprintf(why, size, "'%s/%s' is not a node handed over (a JSON object on "
				 "its first line, the node's lines after it) of at most %d bytes",
				 state_dir, ORH_HANDOFF_FILE, ORH_HANDOFF_MAX_BYTES);
		return NULL;
	}
	if (!only_ours(&st)) {
		snprintf(why, size, "'%s/%s' is not this user's alone", state_dir, ORH_HANDOFF_FILE);
	} else if (bound_here(snap, bundle, token, sysroot, why, size)) {
		return snap;
	}
	json_decref(snap);
	return NULL;
}

const char *orh_handoff_reader(const json_t *snap)
{
	return json_object_get(snap, "token") ? "by the NRI plugin" : "by the runtime shim";
}

json_t *orh_handoff_netns_json(const struct stat *ns, const struct orh_container_facts *facts)
{
	json_t *addrs = json_array();
	char a[INET_ADDRSTRLEN];

	for (size_t i = 0; i < facts->n_addrs; i++)
		if (inet_ntop(AF_INET, &facts->addrs[i], a, sizeof(a)))
			json_array_append_new(addrs, json_string(a));
	return json_pack("{s:I, s:I, s:s, s:o}", "dev", (json_int_t)ns->st_dev, "ino",
			 (json_int_t)ns->st_ino, "default_if", facts->netns_default_if, "addrs",
			 addrs);
}

bool orh_handoff_netns(const json_t *snap, const struct stat *ns, struct orh_netns_info *addrs,
		       struct orh_container_facts *out)
{
	json_t *n = json_object_get(snap, "netns"), *a = NULL, *v;
	json_int_t dev = -1, ino = -1;
	const char *ifname = NULL;
	size_t i;

	if (!n || json_unpack(n, "{s:I, s:I, s:s, s:o}", "dev", &dev, "ino", &ino, "default_if",
			      &ifname, "addrs", &a) < 0 || !json_is_array(a) ||
	    (json_int_t)ns->st_dev != dev || (json_int_t)ns->st_ino != ino ||
	    strlen(ifname) >= IFNAMSIZ || json_array_size(a) > ORH_NETNS_MAX_ADDRS)
		return false;
	memset(addrs, 0, sizeof(*addrs));
	json_array_foreach(a, i, v)
		if (!json_is_string(v) ||
		    inet_pton(AF_INET, json_string_value(v), &addrs->addrs[addrs->n_addrs++]) != 1)
			return false;
	strcpy(addrs->default_if, ifname);
	out->own_netns = true;
	memcpy(out->netns_default_if, addrs->default_if, IFNAMSIZ);
	out->addrs = addrs->addrs;
	out->n_addrs = addrs->n_addrs;
	return true;
}

int orh_handoff_start_mark(const char *run_dir, const char *id, const char *token,
			   struct orh_err *err)
{
	_cleanup_free_ char *dir = orh_state_dir_path(run_dir, id);
	_cleanup_close_ int dirfd = -1;
	bool created = false;

	if (!dir)
		return orh_fail(err, EINVAL, "the container id '%s' names no state directory", id);
	if (!token || strlen(token) != ORH_HANDOFF_TOKEN_LEN)
		return orh_fail(err, EINVAL, "no token to bind the stage at StartContainer to");
	dirfd = orh_state_dir_open(dir, &created, err);
	if (dirfd < 0)
		return dirfd;
	return orh_replace_at(dirfd, ORH_START_FILE, &(struct orh_replace){
		.type = S_IFREG, .mode = 0600, .data = token, .len = ORH_HANDOFF_TOKEN_LEN,
		.what = ORH_START_FILE }, err);
}

bool orh_handoff_start_marked(const char *run_dir, const char *id)
{
	char name[NAME_MAX + 1], path[PATH_MAX];

	if (!orh_state_dir_name(id, name))
		return false;
	snprintf(path, sizeof(path), "%s/%s/%s", run_dir, name, ORH_START_FILE);
	return faccessat(AT_FDCWD, path, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

bool orh_handoff_start_token(const char *run_dir, const char *id,
			     char out[ORH_HANDOFF_TOKEN_LEN + 1])
{
	_cleanup_free_ char *dir = orh_state_dir_path(run_dir, id), *buf = NULL;
	_cleanup_close_ int dirfd = -1;
	struct stat st;
	size_t len = 0;

	if (!dir || (dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return false;
	buf = orh_state_file_read(dirfd, ORH_START_FILE, ORH_HANDOFF_TOKEN_LEN, &st, &len);
	if (!buf || len != ORH_HANDOFF_TOKEN_LEN || !only_ours(&st) ||
	    strspn(buf, "0123456789abcdef") != len)
		return false;
	memcpy(out, buf, len + 1);
	return true;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What test_shimconf.c and test_shimserve.c share: a temporary directory (tmp) and the
 * sample RoCE node (node) made before each test and removed after, files and directories
 * made and read under tmp, and a bundle whose root holds /etc and /proc.
 */
#ifndef ORH_SHIM_FIXTURE_H
#define ORH_SHIM_FIXTURE_H

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "node_fixture.h"
#include "orh/apply/ncclconf.h"
#include "orh/base/util.h"

static char node[256];
static char tmp[256];

static inline void shim_fixture_setup(void)
{
	node[0] = tmp[0] = '\0';
	snprintf(tmp, sizeof(tmp), "/tmp/orh-shimconf-XXXXXX");
	cr_assert_not_null(mkdtemp(tmp));
	fixture_make_node(node, sizeof(node), "orh-shimconf", "seed001-roce");
}

static inline void shim_fixture_cleanup(void)
{
	char cmd[512];

	fixture_remove_node(node);
	if (!tmp[0])
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	if (system(cmd) != 0)
		fprintf(stderr, "cleanup of %s failed\n", tmp);
}

#define CONF "/etc/orh-test/node.conf"
#define BEGIN ORH_NCCL_MARK_BEGIN "\n"
#define END ORH_NCCL_MARK_END "\n"
/* a mount of the spec at d */
#define M(d) "{\"destination\":\"" d "\",\"type\":\"bind\",\"source\":\"/srv\"}"

static inline json_t *parse(const char *text)
{
	json_error_t jerr;
	json_t *j = json_loads(text, 0, &jerr);

	cr_assert_not_null(j, "%s: %s", text, jerr.text);
	return j;
}

/* <tmp>/<rel> */
static inline const char *at_tmp(const char *rel)
{
	static char buf[4][PATH_MAX];
	static int k;
	char *p = buf[k++ % 4];

	snprintf(p, PATH_MAX, "%s/%s", tmp, rel);
	return p;
}

/* mkdir -p <tmp>/<rel> */
static inline void mkdirs(const char *rel)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/%s", tmp, rel);
	for (char *s = p + strlen(tmp) + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		cr_assert(mkdir(p, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", p,
			  strerror(errno));
		*s = '/';
	}
	cr_assert(mkdir(p, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", p, strerror(errno));
}

static inline void put_file(const char *rel, const char *text, mode_t mode)
{
	const char *p = at_tmp(rel);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

	cr_assert_geq(fd, 0, "creating %s: %s", p, strerror(errno));
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	cr_assert_eq(fchmod(fd, mode), 0);
	close(fd);
}

static inline void put_link(const char *rel, const char *target)
{
	cr_assert_eq(symlink(target, at_tmp(rel)), 0, "symlink %s: %s", rel, strerror(errno));
}

/* The text of <tmp>/<rel> (malloc'd), or NULL where it is missing. */
static inline char *get_file(const char *rel)
{
	const char *p = at_tmp(rel);
	char *text = NULL;
	size_t len = 0;
	int fd = open(p, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		cr_assert_eq(errno, ENOENT, "opening %s: %s", p, strerror(errno));
		return NULL;
	}
	cr_assert_eq(orh_read_fd_all(fd, 1 << 20, &text, &len), 0);
	close(fd);
	return text;
}

static inline void assert_file(const char *rel, const char *want)
{
	char *text = get_file(rel);

	if (!want)
		cr_assert_null(text, "%s exists, holding:\n%s", rel, text);
	else {
		cr_assert_not_null(text, "%s is missing", rel);
		cr_assert_str_eq(text, want, "%s", rel);
	}
	free(text);
}

static inline int open_dir(const char *rel, int flags)
{
	int fd = open(at_tmp(rel), flags | O_DIRECTORY | O_CLOEXEC);

	cr_assert_geq(fd, 0, "opening %s: %s", rel, strerror(errno));
	return fd;
}

/* <tmp>/b: a bundle whose root "rootfs" holds /etc and /proc */
static inline int make_bundle(void)
{
	mkdirs("b/rootfs/etc");
	mkdirs("b/rootfs/proc");
	return open_dir("b", O_RDONLY);
}

#endif

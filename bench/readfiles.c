/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/readfiles: open, read and close every file named in LIST, and nothing else.
 * A line of LIST is "DIR<TAB>PATH": PATH is opened relative to DIR (each DIR is opened
 * once, on first use), as the hook opens it. The benchmark gives it the files
 * `oci-rdma-hook env` reads on a node, so that its time is the floor under any program
 * that makes the same decision from the same files: what the machine charges for the
 * reads themselves.
 *
 *   readfiles LIST
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_DIRS 1024

static struct {
	const char *path;
	int fd;
} dirs[MAX_DIRS];
static size_t n_dirs;

static int dir_fd(const char *path)
{
	for (size_t i = n_dirs; i-- > 0;)
		if (!strcmp(dirs[i].path, path))
			return dirs[i].fd;
	if (n_dirs == MAX_DIRS)
		return -1;
	dirs[n_dirs].path = path;
	dirs[n_dirs].fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return dirs[n_dirs++].fd;
}

int main(int argc, char **argv)
{
	static char list[1 << 20];
	char buf[256];
	ssize_t n;
	int fd;

	if (argc != 2) {
		fprintf(stderr, "usage: readfiles LIST\n");
		return 2;
	}
	/* one more file, like the hook's config file */
	fd = open(argv[1], O_RDONLY | O_CLOEXEC);
	if (fd < 0 || (n = read(fd, list, sizeof(list) - 1)) < 0) {
		perror(argv[1]);
		return 1;
	}
	close(fd);
	list[n] = '\0';
	for (char *line = list, *end; *line; line = end) {
		char *tab;
		int dfd;

		end = strchr(line, '\n');
		if (end)
			*end++ = '\0';
		else
			end = line + strlen(line);
		tab = strchr(line, '\t');
		if (!tab)
			continue;
		*tab = '\0';
		dfd = dir_fd(line);
		fd = dfd < 0 ? -1 : openat(dfd, tab + 1, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || read(fd, buf, sizeof(buf)) < 0) {
			fprintf(stderr, "readfiles: %s/%s: cannot read\n", line, tab + 1);
			return 1;
		}
		close(fd);
	}
	return 0;
}

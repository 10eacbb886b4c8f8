/* SPDX-License-Identifier: Apache-2.0 */
/*
 * probe PATH...: open each path read-write inside a container and print
 * "PATH OK" or "PATH ERRNAME" (ENXIO, EPERM, ...). Built static so that it runs in a
 * bare busybox rootfs.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *errname(int e)
{
	switch (e) {
	case ENXIO: return "ENXIO";
	case EPERM: return "EPERM";
	case EACCES: return "EACCES";
	case ENOENT: return "ENOENT";
	case ENODEV: return "ENODEV";
	case ENOTDIR: return "ENOTDIR";
	case ELOOP: return "ELOOP";
	default: return "EOTHER";
	}
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		int fd = open(argv[i], O_RDWR | O_CLOEXEC | O_NONBLOCK);

		if (fd >= 0) {
			printf("%s OK\n", argv[i]);
			close(fd);
		} else {
			printf("%s %s\n", argv[i], errname(errno));
		}
	}
	return 0;
}

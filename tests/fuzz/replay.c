/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Replays a fuzz target's corpus without libFuzzer: `replay-X DIR...` feeds every file
 * of each DIR to LLVMFuzzerTestOneInput once. meson test runs it on tests/fuzz/corpus/X,
 * so every input the fuzzers found interesting stays a regression test.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "orh/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv)
{
	unsigned long n = 0;

	for (int i = 1; i < argc; i++) {
		DIR *d = opendir(argv[i]);
		struct dirent *de;

		if (!d) {
			fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		while ((de = readdir(d))) {
			char path[4096];
			_cleanup_close_ int fd = -1;
			char *buf = NULL;
			size_t len = 0;

			if (de->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", argv[i], de->d_name);
			fd = open(path, O_RDONLY | O_CLOEXEC);
			if (fd < 0 || orh_read_fd_all(fd, 32 * 1024 * 1024, &buf, &len) < 0) {
				fprintf(stderr, "replay: cannot read %s\n", path);
				closedir(d);
				return 1;
			}
			LLVMFuzzerTestOneInput((const uint8_t *)buf, len);
			free(buf);
			n++;
		}
		closedir(d);
	}
	printf("replayed %lu inputs\n", n);
	return n ? 0 : 1;
}

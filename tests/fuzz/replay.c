/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Replays a fuzz target's corpus without libFuzzer: `replay-X [-timeout=S] DIR...` feeds
 * every file of each DIR to LLVMFuzzerTestOneInput once. meson test runs it on
 * tests/fuzz/corpus/X, so every input the fuzzers found interesting stays a regression
 * test. Like libFuzzer's -timeout, an input that takes longer than S seconds (10 unless
 * told) is a finding: the replay stops there, naming it, and fails.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "orh/base/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char current[4096]; /* the input being replayed, for the alarm's message */

static void too_slow(int sig)
{
	static const char a[] = "replay: ", b[] = ": slower than the time limit per input\n";

	(void)sig;
	if (write(STDERR_FILENO, a, sizeof(a) - 1) < 0 ||
	    write(STDERR_FILENO, current, strlen(current)) < 0 ||
	    write(STDERR_FILENO, b, sizeof(b) - 1) < 0)
		_exit(1);
	_exit(1);
}

int main(int argc, char **argv)
{
	unsigned long n = 0;
	unsigned limit = 10;
	int i = 1;

	if (argc > 1 && !strncmp(argv[1], "-timeout=", 9)) {
		limit = (unsigned)strtoul(argv[1] + 9, NULL, 10);
		i++;
	}
	signal(SIGALRM, too_slow);
	for (; i < argc; i++) {
		DIR *d = opendir(argv[i]);
		struct dirent *de;

		if (!d) {
			fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		while ((de = readdir(d))) {
			_cleanup_close_ int fd = -1;
			char *buf = NULL;
			size_t len = 0;

			if (de->d_name[0] == '.')
				continue;
			snprintf(current, sizeof(current), "%s/%s", argv[i], de->d_name);
			fd = open(current, O_RDONLY | O_CLOEXEC);
			if (fd < 0 || orh_read_fd_all(fd, 32 * 1024 * 1024, &buf, &len) < 0) {
				fprintf(stderr, "replay: cannot read %s\n", current);
				closedir(d);
				return 1;
			}
			alarm(limit);
			LLVMFuzzerTestOneInput((const uint8_t *)buf, len);
			alarm(0);
			free(buf);
			n++;
		}
		closedir(d);
	}
	printf("replayed %lu inputs\n", n);
	return n ? 0 : 1;
}

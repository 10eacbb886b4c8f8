/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/harness: time short commands side by side.
 *
 *   harness [-n ROUNDS] [-w WARMUP] [-T SECONDS] [-m MIN_ROUNDS] [-R RAWFILE]
 *           SPEC [:: SPEC]...
 *   SPEC:   NAME [@in=FILE] [@prep=SHELL] [@env=K=V]... [@x=K] [@vs=NAME] ARGV...
 *
 *   harness --rss-log FILE ARGV...
 *
 * Each round runs every SPEC once (K times with @x=K), in an order that rotates from
 * round to round (A B C, B C A, C A B, ...), so that load on a shared machine falls on
 * all commands alike. One run is fork + execv + wait4: its wall time comes from
 * clock_gettime(CLOCK_MONOTONIC) around it, its CPU time (user + system, the command
 * and the children it waited for) and peak RSS from wait4's rusage.
 * stdout and stderr of the command go to /dev/null; stdin is /dev/null or @in=FILE.
 * @prep=SHELL runs (/bin/sh -c, untimed) before each timed run of that SPEC.
 * @env=K=V sets a variable for that SPEC only. @vs=NAME pairs this SPEC with the SPEC
 * named NAME as well as with the first. A run that does not exit 0 aborts all.
 * -T stops after SECONDS of measuring, once MIN_ROUNDS (default 5) rounds are done.
 *
 * Output, one line per SPEC and one per pairing with the first SPEC (the baseline) or with
 * the SPEC an @vs names:
 *   cmd name=N runs=R rounds=D median_us=.. p10_us=.. p90_us=.. mad_us=.. min_us=..
 *       cpu_median_us=.. cpu_p10_us=.. cpu_p90_us=.. rss_kb=..
 *   vs name=N base=B ratio=.. ratio_p10=.. ratio_p90=.. ratio_ci_lo=.. ratio_ci_hi=..
 *       diff_us=.. diff_p10_us=.. diff_p90_us=.. and the same of CPU time, cpu_ratio=.. ...
 * ratio is the median over rounds of (N's time / B's time) within the same round, with
 * its spread (p10, p90) and a 95% confidence interval of that median (ci_lo, ci_hi);
 * diff is the median of their difference: both hold on a noisy machine where absolute
 * times drift. CPU time does not count the time a command waits for a CPU, which on a
 * loaded machine adds to short commands and their baselines alike and so pulls wall-time
 * ratios towards 1. rss_kb is the largest ru_maxrss seen.
 *
 * --rss-log runs ARGV once with the harness's own stdin/stdout/stderr, appends its peak
 * RSS in KiB, its wall time and its CPU time (user + system, with the children it waited
 * for) in microseconds as one line ("KIB US CPU_US") to FILE, and
 * exits with its status (a wrapper for a hook registered in an OCI bundle: runc gives
 * it the state on stdin).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_SPECS 16
#define MAX_ENV 16

struct spec {
	const char *name;
	const char *in;
	const char *prep;
	const char *env[MAX_ENV];
	int n_env;
	int reps;
	const char *vs; /* @vs=NAME: also paired with that spec */
	char **argv;
	double *t;      /* per sample: wall time, microseconds */
	double *c;      /* per sample: CPU time (user + system), microseconds */
	double *round_t; /* per round: median of that round's samples */
	double *round_c;
	size_t n_t, cap_t;
	long rss_kb;
};

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("harness: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(2);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Quantile q of n values (sorted copy, linear interpolation). */
static double quantile(const double *v, size_t n, double q)
{
	double *s, pos, r;
	size_t lo;

	if (n == 0)
		return NAN;
	s = malloc(n * sizeof(*s));
	if (!s)
		die("out of memory");
	memcpy(s, v, n * sizeof(*s));
	qsort(s, n, sizeof(*s), cmp_double);
	pos = q * (double)(n - 1);
	lo = (size_t)pos;
	r = lo + 1 < n ? s[lo] + (pos - (double)lo) * (s[lo + 1] - s[lo]) : s[lo];
	free(s);
	return r;
}

static double mad(const double *v, size_t n)
{
	double med = quantile(v, n, 0.5), *d, r;

	if (n == 0)
		return NAN;
	d = malloc(n * sizeof(*d));
	if (!d)
		die("out of memory");
	for (size_t i = 0; i < n; i++)
		d[i] = fabs(v[i] - med);
	r = quantile(d, n, 0.5);
	free(d);
	return r;
}

/* One timed run: returns its wall time in microseconds, its CPU time in *cpu. */
static double run_once(struct spec *s, int devnull, double *cpu)
{
	struct rusage ru;
	double t0, t1;
	int status, in = devnull;
	pid_t pid;

	if (s->prep) {
		int r = system(s->prep);
		if (r != 0)
			die("%s: prep '%s' failed (status %d)", s->name, s->prep, r);
	}
	if (s->in) {
		in = open(s->in, O_RDONLY | O_CLOEXEC);
		if (in < 0)
			die("%s: opening %s: %s", s->name, s->in, strerror(errno));
	}
	t0 = now_us();
	pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid == 0) {
		dup2(in, 0);
		dup2(devnull, 1);
		dup2(devnull, 2);
		for (int i = 0; i < s->n_env; i++)
			putenv((char *)s->env[i]);
		execv(s->argv[0], s->argv);
		_exit(127);
	}
	if (wait4(pid, &status, 0, &ru) < 0)
		die("wait4: %s", strerror(errno));
	t1 = now_us();
	if (in != devnull)
		close(in);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "harness: %s: '%s' failed (%s %d); rerun by hand to see why\n",
			s->name, s->argv[0], WIFEXITED(status) ? "exit" : "signal",
			WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
		exit(3);
	}
	if (ru.ru_maxrss > s->rss_kb)
		s->rss_kb = ru.ru_maxrss;
	*cpu = ru.ru_utime.tv_sec * 1e6 + ru.ru_utime.tv_usec + ru.ru_stime.tv_sec * 1e6 +
	       ru.ru_stime.tv_usec;
	return t1 - t0;
}

static void push(struct spec *s, double t, double c)
{
	if (s->n_t == s->cap_t) {
		s->cap_t = s->cap_t ? s->cap_t * 2 : 64;
		s->t = realloc(s->t, s->cap_t * sizeof(*s->t));
		s->c = realloc(s->c, s->cap_t * sizeof(*s->c));
		if (!s->t || !s->c)
			die("out of memory");
	}
	s->t[s->n_t] = t;
	s->c[s->n_t++] = c;
}

/* The paired statistics of `cur` against `base` over `n` rounds, printed as
 * PREFIXratio=.. PREFIXratio_p10=.. PREFIXratio_p90=.. PREFIXratio_ci_lo=..
 * PREFIXratio_ci_hi=.. PREFIXdiff_us=.. PREFIXdiff_p10_us=.. PREFIXdiff_p90_us=.. */
static void print_paired(const char *prefix, const double *cur, const double *base, int n)
{
	double *ratio = calloc((size_t)n, sizeof(double));
	double *diff = calloc((size_t)n, sizeof(double));
	/* a distribution-free 95% confidence interval of the median ratio: the order
	 * statistics n/2 -+ 0.98 sqrt(n) (normal approximation of the binomial) */
	double half = 0.98 * sqrt((double)n);
	double lo_q = n > 1 ? fmax(0, floor(n / 2.0 - half)) / (n - 1) : 0;
	double hi_q = n > 1 ? fmin(n - 1, ceil(n / 2.0 - 1 + half)) / (n - 1) : 1;

	if (!ratio || !diff)
		die("out of memory");
	for (int r = 0; r < n; r++) {
		ratio[r] = base[r] > 0 ? cur[r] / base[r] : NAN;
		diff[r] = cur[r] - base[r];
	}
	printf(" %sratio=%.4f %sratio_p10=%.4f %sratio_p90=%.4f %sratio_ci_lo=%.4f "
	       "%sratio_ci_hi=%.4f %sdiff_us=%.1f %sdiff_p10_us=%.1f %sdiff_p90_us=%.1f",
	       prefix, quantile(ratio, (size_t)n, 0.5), prefix, quantile(ratio, (size_t)n, 0.1),
	       prefix, quantile(ratio, (size_t)n, 0.9), prefix, quantile(ratio, (size_t)n, lo_q),
	       prefix, quantile(ratio, (size_t)n, hi_q), prefix, quantile(diff, (size_t)n, 0.5),
	       prefix, quantile(diff, (size_t)n, 0.1), prefix, quantile(diff, (size_t)n, 0.9));
	free(ratio);
	free(diff);
}

static int rss_log(const char *file, char **argv)
{
	struct rusage ru;
	int status;
	double t0 = now_us();
	pid_t pid = fork();
	FILE *f;

	if (pid < 0)
		return 126;
	if (pid == 0) {
		execv(argv[0], argv);
		_exit(127);
	}
	if (wait4(pid, &status, 0, &ru) < 0)
		return 126;
	t0 = now_us() - t0;
	f = fopen(file, "a");
	if (f) {
		fprintf(f, "%ld %.1f %.1f\n", ru.ru_maxrss, t0,
			(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 + ru.ru_utime.tv_usec +
				ru.ru_stime.tv_usec);
		fclose(f);
	}
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + WTERMSIG(status);
}

static void usage(void)
{
	fputs("usage: harness [-n ROUNDS] [-w WARMUP] [-T SECONDS] [-m MIN_ROUNDS] [-R RAWFILE]\n"
	      "               NAME [@in=FILE] [@prep=SHELL] [@env=K=V] [@x=K] [@vs=NAME] ARGV...\n"
	      "               [:: SPEC]...\n"
	      "       harness --rss-log FILE ARGV...\n",
	      stderr);
	exit(2);
}

/* The SPECs from argv[i] on, into specs; returns how many. Each "::" that ends a SPEC's
 * ARGV is replaced by NULL. */
static int parse_specs(int argc, char **argv, int i, struct spec *specs)
{
	int n_specs = 0;

	while (i < argc) {
		struct spec *s;

		if (n_specs == MAX_SPECS)
			die("too many commands");
		s = &specs[n_specs++];
		s->name = argv[i++];
		s->reps = 1;
		for (; i < argc && argv[i][0] == '@'; i++) {
			if (!strncmp(argv[i], "@in=", 4))
				s->in = argv[i] + 4;
			else if (!strncmp(argv[i], "@prep=", 6))
				s->prep = argv[i] + 6;
			else if (!strncmp(argv[i], "@env=", 5) && s->n_env < MAX_ENV)
				s->env[s->n_env++] = argv[i] + 5;
			else if (!strncmp(argv[i], "@x=", 3) && atoi(argv[i] + 3) > 0)
				s->reps = atoi(argv[i] + 3);
			else if (!strncmp(argv[i], "@vs=", 4))
				s->vs = argv[i] + 4;
			else
				die("unknown option '%s' of %s", argv[i], s->name);
		}
		s->argv = argv + i;
		for (; i < argc && strcmp(argv[i], "::"); i++)
			;
		if (s->argv == argv + i)
			die("%s: no command", s->name);
		if (i < argc)
			argv[i++] = NULL;
		if (s->argv[0][0] != '/')
			die("%s: '%s' must be an absolute path", s->name, s->argv[0]);
	}
	return n_specs;
}

/* Every @vs=NAME names another SPEC. */
static void check_vs(const struct spec *specs, int n_specs)
{
	for (int k = 0; k < n_specs; k++) {
		bool found = false;

		for (int j = 0; specs[k].vs && j < n_specs; j++)
			found |= j != k && !strcmp(specs[j].name, specs[k].vs);
		if (specs[k].vs && !found)
			die("%s: @vs=%s names no other command", specs[k].name, specs[k].vs);
	}
}

/* The warmup rounds, then up to `rounds` measured ones (fewer with max_s, once min_rounds
 * are done); returns how many were measured. */
static int measure(struct spec *specs, int n_specs, int rounds, int warmup, double max_s,
		   int min_rounds, int devnull)
{
	double start;
	int done = 0;

	for (int r = 0; r < warmup; r++)
		for (int k = 0; k < n_specs; k++) {
			double cpu;
			run_once(&specs[k], devnull, &cpu);
		}
	start = now_us();
	for (int r = 0; r < rounds; r++) {
		for (int j = 0; j < n_specs; j++) {
			struct spec *s = &specs[(r + j) % n_specs];
			double tmp[64], tmpc[64];
			int reps = s->reps < 64 ? s->reps : 64;

			for (int x = 0; x < reps; x++) {
				tmp[x] = run_once(s, devnull, &tmpc[x]);
				push(s, tmp[x], tmpc[x]);
			}
			s->round_t[r] = quantile(tmp, (size_t)reps, 0.5);
			s->round_c[r] = quantile(tmpc, (size_t)reps, 0.5);
		}
		done = r + 1;
		if (max_s > 0 && done >= min_rounds && (now_us() - start) / 1e6 > max_s)
			break;
	}
	return done;
}

/* -R RAWFILE: every sample, "NAME\tWALL_US\tCPU_US". */
static void write_raw(const char *raw, const struct spec *specs, int n_specs)
{
	FILE *f = fopen(raw, "w");

	if (f) {
		for (int k = 0; k < n_specs; k++)
			for (size_t i = 0; i < specs[k].n_t; i++)
				fprintf(f, "%s\t%.1f\t%.1f\n", specs[k].name, specs[k].t[i],
					specs[k].c[i]);
		fclose(f);
	}
}

/* The "cmd" lines, then the "vs" lines: each SPEC against the first, then each @vs. */
static void print_results(const struct spec *specs, int n_specs, int done)
{
	for (int k = 0; k < n_specs; k++) {
		const struct spec *s = &specs[k];

		printf("cmd name=%s runs=%zu rounds=%d median_us=%.1f p10_us=%.1f p90_us=%.1f "
		       "mad_us=%.1f min_us=%.1f cpu_median_us=%.1f cpu_p10_us=%.1f cpu_p90_us=%.1f "
		       "rss_kb=%ld\n",
		       s->name, s->n_t, done, quantile(s->t, s->n_t, 0.5),
		       quantile(s->t, s->n_t, 0.1), quantile(s->t, s->n_t, 0.9), mad(s->t, s->n_t),
		       quantile(s->t, s->n_t, 0), quantile(s->c, s->n_t, 0.5),
		       quantile(s->c, s->n_t, 0.1), quantile(s->c, s->n_t, 0.9), s->rss_kb);
	}
	for (int k = 1; k < n_specs; k++) {
		printf("vs name=%s base=%s", specs[k].name, specs[0].name);
		print_paired("", specs[k].round_t, specs[0].round_t, done);
		print_paired("cpu_", specs[k].round_c, specs[0].round_c, done);
		putchar('\n');
	}
	for (int k = 0; k < n_specs; k++)
		for (int j = 0; specs[k].vs && j < n_specs; j++) {
			if (j == k || strcmp(specs[j].name, specs[k].vs) || (j == 0 && k > 0))
				continue; /* the first spec's pairing is printed above */
			printf("vs name=%s base=%s", specs[k].name, specs[j].name);
			print_paired("", specs[k].round_t, specs[j].round_t, done);
			print_paired("cpu_", specs[k].round_c, specs[j].round_c, done);
			putchar('\n');
		}
}

int main(int argc, char **argv)
{
	struct spec specs[MAX_SPECS];
	int n_specs = 0, rounds = 30, warmup = 3, min_rounds = 5, opt, done = 0;
	double max_s = 0;
	const char *raw = NULL;
	int devnull;

	if (argc > 3 && !strcmp(argv[1], "--rss-log"))
		return rss_log(argv[2], argv + 3);
	while ((opt = getopt(argc, argv, "+n:w:T:m:R:")) != -1) {
		switch (opt) {
		case 'n': rounds = atoi(optarg); break;
		case 'w': warmup = atoi(optarg); break;
		case 'T': max_s = atof(optarg); break;
		case 'm': min_rounds = atoi(optarg); break;
		case 'R': raw = optarg; break;
		default: usage();
		}
	}
	memset(specs, 0, sizeof(specs));
	n_specs = parse_specs(argc, argv, optind, specs);
	if (n_specs == 0 || rounds < 1)
		usage();
	check_vs(specs, n_specs);
	for (int k = 0; k < n_specs; k++) {
		specs[k].round_t = calloc((size_t)rounds, sizeof(double));
		specs[k].round_c = calloc((size_t)rounds, sizeof(double));
		if (!specs[k].round_t || !specs[k].round_c)
			die("out of memory");
	}
	devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (devnull < 0)
		die("/dev/null: %s", strerror(errno));
	signal(SIGPIPE, SIG_IGN);

	done = measure(specs, n_specs, rounds, warmup, max_s, min_rounds, devnull);
	if (raw)
		write_raw(raw, specs, n_specs);
	print_results(specs, n_specs, done);
	return 0;
}

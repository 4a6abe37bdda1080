/*
 * la_create_files - an ordinary application that creates files; the tests
 * and bench/client_create_latency.py run it with and without the shim.
 *
 *   la_create_files [-a open|open64|openat|creat|fopen|fopen64] [-t THREADS]
 *                   [-n FILES_PER_THREAD] [-f] [-l LATENCY_FILE] [-p PREFIX]
 *                   [-s START_NS] DIR
 *
 * Each thread creates N new files DIR/PREFIX<tag>_<thread>_<i> with the
 * chosen call, writes a line into each and closes it.  -f: create one file,
 * fork, then parent and child both create their files (tags "parent" and
 * "child").  -l: per-create latency in nanoseconds, one per line.  -s: wait
 * until this CLOCK_REALTIME (ns since the epoch) before creating, so several
 * processes start together.  Prints "created=<n> max_us=<worst single
 * create> start_ns=<realtime> end_ns=<realtime>" (the creates' window) and
 * exits 1 on any failure.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *api = "open";
static const char *dir;
static const char *prefix = "f";
static const char *tag = "main";
static int nthreads = 1, nfiles = 10;
static long long start_at_ns;
static long long *lat_ns;
static int dirfd_ = -1;

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Create one file; 0 or -1 with a message. */
static int create_one(const char *name, long long *ns)
{
	char path[4096];
	long long t0;
	int fd = -1;
	FILE *f = NULL;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	t0 = now_ns();
	if (!strcmp(api, "open"))
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	else if (!strcmp(api, "open64"))
		fd = open64(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	else if (!strcmp(api, "openat"))
		fd = openat(dirfd_, name, O_WRONLY | O_CREAT | O_EXCL, 0600);
	else if (!strcmp(api, "creat"))
		fd = creat(path, 0644);
	else if (!strcmp(api, "fopen"))
		f = fopen(path, "w");
	else if (!strcmp(api, "fopen64"))
		f = fopen64(path, "w+");
	*ns = now_ns() - t0;
	if (fd < 0 && !f) {
		fprintf(stderr, "la_create_files: %s %s: %s\n", api, path,
			strerror(errno));
		return -1;
	}
	if (f) {
		fprintf(f, "%s\n", name);
		if (fclose(f) != 0)
			return -1;
	} else {
		if (write(fd, name, strlen(name)) < 0 || close(fd) != 0)
			return -1;
	}
	return 0;
}

static void *worker(void *arg)
{
	long t = (long)arg;
	long failures = 0;
	char name[256];
	int i;

	for (i = 0; i < nfiles; i++) {
		long long ns;

		snprintf(name, sizeof(name), "%s%s_%ld_%d", prefix, tag, t, i);
		if (create_one(name, &ns) != 0)
			failures++;
		if (lat_ns)
			lat_ns[t * nfiles + i] = ns;
	}
	return (void *)failures;
}

static int run_all(const char *latfile)
{
	pthread_t th[256];
	long failures = 0, t;
	long long worst = 0;
	int i;

	long long t_start, t_end;
	struct timespec ts;

	lat_ns = calloc((size_t)nthreads * nfiles, sizeof(*lat_ns));
	if (start_at_ns > 0) {
		ts.tv_sec = (time_t)(start_at_ns / 1000000000LL);
		ts.tv_nsec = (long)(start_at_ns % 1000000000LL);
		while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, NULL))
			;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	t_start = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
	for (t = 0; t < nthreads; t++)
		if (pthread_create(&th[t], NULL, worker, (void *)t) != 0)
			return 1;
	for (t = 0; t < nthreads; t++) {
		void *r;

		pthread_join(th[t], &r);
		failures += (long)r;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	t_end = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
	for (i = 0; i < nthreads * nfiles; i++)
		if (lat_ns[i] > worst)
			worst = lat_ns[i];
	if (latfile) {
		FILE *lf = fopen(latfile, "a");

		if (!lf)
			return 1;
		for (i = 0; i < nthreads * nfiles; i++)
			fprintf(lf, "%lld\n", lat_ns[i]);
		fclose(lf);
	}
	printf("%s created=%ld max_us=%.1f start_ns=%lld end_ns=%lld\n", tag,
	       (long)nthreads * nfiles - failures, worst / 1000.0, t_start,
	       t_end);
	fflush(stdout);
	free(lat_ns);
	return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
	const char *latfile = NULL;
	int do_fork = 0, c;

	while ((c = getopt(argc, argv, "a:t:n:fl:p:s:")) != -1) {
		switch (c) {
		case 'a': api = optarg; break;
		case 't': nthreads = atoi(optarg); break;
		case 'n': nfiles = atoi(optarg); break;
		case 'f': do_fork = 1; break;
		case 'l': latfile = optarg; break;
		case 'p': prefix = optarg; break;
		case 's': start_at_ns = atoll(optarg); break;
		default: return 2;
		}
	}
	if (optind != argc - 1 || nthreads < 1 || nthreads > 256 || nfiles < 0)
		return 2;
	dir = argv[optind];
	dirfd_ = open(dir, O_RDONLY | O_DIRECTORY);
	if (dirfd_ < 0)
		return 1;
	if (do_fork) {
		long long ns;
		int status, rc;
		pid_t pid;
		char name[256];

		/* the parent talks to the mapper before forking */
		snprintf(name, sizeof(name), "%sbeforefork", prefix);
		if (create_one(name, &ns) != 0)
			return 1;
		pid = fork();
		if (pid < 0)
			return 1;
		tag = pid == 0 ? "child" : "parent";
		rc = run_all(NULL);
		if (pid == 0)
			_exit(rc);
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
			return 1;
		return rc || WEXITSTATUS(status);
	}
	c = run_all(latfile);
	close(dirfd_);
	return c;
}

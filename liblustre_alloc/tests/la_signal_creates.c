/*
 * la_signal_creates - an application whose SIGALRM handler creates files
 * (open(O_CREAT) is async-signal-safe in libc) while its main thread loops
 * in malloc/free.  A create path that calls malloc or takes a lock that the
 * interrupted code may hold deadlocks here.
 *
 *   la_signal_creates DIR N [LIMIT_S [INTERVAL_US]]
 *
 * Creates DIR/s<i> for i < N from the handler (an interval timer every
 * INTERVAL_US, default 1000: longer than one create, so that the main
 * thread runs, inside malloc, between two handlers), writes one byte into
 * each.  Prints "created=<n> failed=<n>";
 * exit 0 when all N were created, 1 on a failed create, 3 when LIMIT_S
 * (default 60) seconds passed first.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static const char *dir;
static size_t dirlen;
static int target;
static volatile sig_atomic_t created, failed;

/* Only async-signal-safe calls in here: no printf, no malloc. */
static void on_alarm(int sig)
{
	char path[4096], num[16];
	int e = errno, i = created + failed, n = 0, fd;

	(void)sig;
	if (i >= target || dirlen + 20 > sizeof(path))
		return;
	do {
		num[n++] = (char)('0' + i % 10);
		i /= 10;
	} while (i);
	memcpy(path, dir, dirlen);
	memcpy(path + dirlen, "/s", 2);
	for (i = 0; i < n; i++)
		path[dirlen + 2 + i] = num[n - 1 - i];
	path[dirlen + 2 + n] = '\0';
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
	if (fd >= 0 && write(fd, "x", 1) == 1 && close(fd) == 0)
		created++;
	else
		failed++;
	errno = e;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	struct itimerval it;
	long interval_us;
	struct sigaction sa;
	double limit_s, t_end;
	unsigned seed = 12345;
	void *keep[64] = { 0 };

	if (argc < 3)
		return 2;
	dir = argv[1];
	dirlen = strlen(dir);
	target = atoi(argv[2]);
	limit_s = argc > 3 ? atof(argv[3]) : 60.0;
	interval_us = argc > 4 ? atol(argv[4]) : 1000;
	if (interval_us < 1 || interval_us > 999999)
		return 2;
	it.it_interval.tv_sec = it.it_value.tv_sec = 0;
	it.it_interval.tv_usec = it.it_value.tv_usec = interval_us;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGALRM, &sa, NULL) != 0 ||
	    setitimer(ITIMER_REAL, &it, NULL) != 0)
		return 2;
	t_end = now_s() + limit_s;
	/* the main thread lives in malloc: most signals land inside it */
	while (created + failed < target && now_s() < t_end) {
		int j;

		for (j = 0; j < 64; j++) {
			size_t sz = 16 + (rand_r(&seed) % 65536);

			free(keep[j]);
			keep[j] = malloc(sz);
			if (keep[j])
				((char *)keep[j])[0] = 1;
		}
	}
	memset(&it, 0, sizeof(it));
	setitimer(ITIMER_REAL, &it, NULL);
	for (int j = 0; j < 64; j++)
		free(keep[j]);
	printf("created=%d failed=%d\n", (int)created, (int)failed);
	if (failed)
		return 1;
	return created >= target ? 0 : 3;
}

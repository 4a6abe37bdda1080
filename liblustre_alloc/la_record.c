/*
 * la_record.c - the record file (LUSTRE_ALLOC_RECORD): one line per
 * decision, tab-separated key=value pairs, always the same keys in the same
 * order (docs/client.md, "Record format").  Each line is written with one
 * write(2) on an O_APPEND descriptor, so lines from concurrent threads and
 * processes do not interleave.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "la_internal.h"

static pthread_mutex_t la_rec_mu = PTHREAD_MUTEX_INITIALIZER;
static int la_rec_fd = -1;
static dev_t la_rec_dev;
static ino_t la_rec_ino;

struct la_line {
	char *p;
	size_t len, cap;
};

static void la_add(struct la_line *l, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (l->len >= l->cap)
		return;
	va_start(ap, fmt);
	n = vsnprintf(l->p + l->len, l->cap - l->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		l->len += (size_t)n < l->cap - l->len ? (size_t)n
						       : l->cap - l->len;
}

/* Percent-encode what would break the line: %, tab, newline, controls. */
static void la_add_escaped(struct la_line *l, const char *key, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";

	la_add(l, "\t%s=", key);
	for (; s && *s && l->len + 4 < l->cap; s++) {
		unsigned char c = (unsigned char)*s;

		if (c < 0x20 || c == 0x7f || c == '%') {
			l->p[l->len++] = '%';
			l->p[l->len++] = hex[c >> 4];
			l->p[l->len++] = hex[c & 15];
		} else {
			l->p[l->len++] = (char)c;
		}
	}
	l->p[l->len] = '\0';
}

/* One line on stderr, once per process, when the record file is refused. */
static void la_rec_refuse(const char *why)
{
	static atomic_int said;
	const char *parts[] = { "liblustre_alloc: record file ", la_cfg.record,
				" refused (", why,
				"); no records are written\n" };
	unsigned i;

	if (atomic_exchange(&said, 1))
		return;
	for (i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
		ssize_t w = write(2, parts[i], strlen(parts[i]));
		(void)w;
	}
}

/* Open the record file: never through a symbolic link (a link planted in
 * a shared directory such as /tmp would redirect other users' records),
 * never inherited by exec'd programs, readable by its owner only, and only
 * a regular file.  -1 when refused. */
static int la_rec_open(struct stat *st)
{
	int fd = la_real.open(la_cfg.record,
			      O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC |
				      O_NOFOLLOW | O_NOCTTY | O_NONBLOCK,
			      0600);

	if (fd < 0) {
		la_rec_refuse(errno == ELOOP ? "a symbolic link"
			      : errno == EACCES ? "permission denied"
					       : "cannot be opened");
		return -1;
	}
	if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
		close(fd);
		la_rec_refuse("not a regular file");
		return -1;
	}
	return fd;
}

/* The cached descriptor, reopened if the application closed it (or
 * reused its number for something else). */
static int la_rec_get_fd(void)
{
	struct stat st;
	int fd;

	pthread_mutex_lock(&la_rec_mu);
	if (la_rec_fd >= 0 &&
	    (fstat(la_rec_fd, &st) != 0 || st.st_dev != la_rec_dev ||
	     st.st_ino != la_rec_ino))
		la_rec_fd = -1; /* not ours any more: do not close it */
	if (la_rec_fd < 0) {
		fd = la_rec_open(&st);
		if (fd >= 0) {
			la_rec_fd = fd;
			la_rec_dev = st.st_dev;
			la_rec_ino = st.st_ino;
		}
	}
	fd = la_rec_fd;
	pthread_mutex_unlock(&la_rec_mu);
	return fd;
}

void la_record(const struct la_record_line *r)
{
	const struct la_decision *d = r->d;
	int applied = r->out->applied && d->ok;
	struct timespec ts;
	struct la_line l;
	int fd, i;
	int saved = errno;

	if (!la_cfg.record[0])
		return;
	l.cap = 1024 + 3 * strlen(r->path) + 3 * strlen(la_cfg.job) +
		(d->ok ? (size_t)d->count * 7 : 0);
	l.p = malloc(l.cap);
	if (!l.p)
		goto out;
	l.len = 0;
	clock_gettime(CLOCK_REALTIME, &ts);
	la_add(&l, "v=1\tts=%lld.%06ld\tpid=%d\ttid=%ld\top=%s\tbackend=%s",
	       (long long)ts.tv_sec, ts.tv_nsec / 1000, (int)getpid(),
	       (long)syscall(SYS_gettid), r->op, r->backend);
	la_add_escaped(&l, "job", la_cfg.job);
	la_add_escaped(&l, "path", r->path);
	la_add(&l, "\tresult=%s\tosts=", applied ? "layout" : "default");
	for (i = 0; applied && i < d->count; i++)
		la_add(&l, i ? ",%u" : "%u", d->osts[i]);
	if (applied)
		la_add(&l, "\tstripe_count=%d\tstripe_size=%llu", d->count,
		       (unsigned long long)d->stripe_size);
	else
		la_add(&l, "\tstripe_count=\tstripe_size=");
	la_add(&l, "\treq_count=%d\treq_size=%llu", r->req_count,
	       (unsigned long long)r->req_size);
	la_add_escaped(&l, "policy", d->policy);
	la_add_escaped(&l, "mapper_fallback", d->mapper_fallback);
	la_add_escaped(&l, "reason",
		       r->out->reason[0] ? r->out->reason : d->reason);
	la_add(&l, "\tmapper_us=%.1f\ttotal_us=%.1f\n", d->mapper_us,
	       r->total_us);
	if (l.len == l.cap) { /* cut: still one line */
		l.p[l.cap - 1] = '\n';
	}
	fd = la_rec_get_fd();
	if (fd >= 0) {
		ssize_t w = write(fd, l.p, l.len);
		(void)w; /* a lost record never fails the application */
	}
	free(l.p);
out:
	errno = saved;
}

void la_record_atfork_prepare(void)
{
	pthread_mutex_lock(&la_rec_mu);
}

void la_record_atfork_release(void)
{
	pthread_mutex_unlock(&la_rec_mu);
}

void la_record_close(void)
{
	pthread_mutex_lock(&la_rec_mu);
	if (la_rec_fd >= 0)
		close(la_rec_fd);
	la_rec_fd = -1;
	pthread_mutex_unlock(&la_rec_mu);
}

/*
 * la_record.c - the record file (LUSTRE_ALLOC_RECORD): one line per
 * decision, tab-separated key=value pairs, always the same keys in the same
 * order (docs/client.md, "Record format").  Each line is written with one
 * write(2) on an O_APPEND descriptor, so lines from concurrent threads and
 * processes do not interleave.
 *
 * Async-signal-safe: the line is built with la_fmt.c into the caller's
 * workspace, and the descriptor is shared through an atomic (two threads
 * opening it at once keep one and close the other).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "la_internal.h"

/* The open descriptor and the identity of its file (dev, ino): the
 * application may close our descriptor and reuse its number. */
static atomic_int la_rec_fd = -1;
static _Atomic uint64_t la_rec_dev, la_rec_ino;
static atomic_int la_rec_refused;

/* One line on stderr, once per process, when the record file is refused. */
static void la_rec_refuse(const char *why)
{
	const char *parts[] = { "liblustre_alloc: record file ", la_cfg.record,
				" refused (", why,
				"); no records are written\n" };
	unsigned i;

	if (atomic_exchange(&la_rec_refused, 1))
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
	int fd = la_real.openat(AT_FDCWD, la_cfg.record,
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

static int la_rec_get_fd(void)
{
	struct stat st;
	int fd = atomic_load(&la_rec_fd);

	if (fd >= 0 && fstat(fd, &st) == 0 &&
	    (uint64_t)st.st_dev == atomic_load(&la_rec_dev) &&
	    (uint64_t)st.st_ino == atomic_load(&la_rec_ino))
		return fd;
	if (atomic_load(&la_rec_refused))
		return -1;
	/* not ours any more (never close it: it is the application's now),
	 * or not opened yet */
	{
		int mine = la_rec_open(&st);

		if (mine < 0)
			return -1;
		atomic_store(&la_rec_dev, (uint64_t)st.st_dev);
		atomic_store(&la_rec_ino, (uint64_t)st.st_ino);
		if (!atomic_compare_exchange_strong(&la_rec_fd, &fd, mine)) {
			close(mine); /* another thread was first */
			return atomic_load(&la_rec_fd);
		}
		return mine;
	}
}

/* Percent-encode what would break the line: %, tab, newline, controls. */
static void la_put_escaped_value(struct la_out *l, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";

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

static void la_put_escaped(struct la_out *l, const char *key, const char *s)
{
	la_put_str(l, "\t");
	la_put_str(l, key);
	la_put_str(l, "=");
	la_put_escaped_value(l, s);
}

static void la_put_kv(struct la_out *l, const char *key, uint64_t v)
{
	la_put_str(l, "\t");
	la_put_str(l, key);
	la_put_str(l, "=");
	la_put_u64(l, v);
}

/* The per-component fields of a composite layout, ';' between components:
 * each OST component's OSTs (',' between them), stripe count and size as
 * applied, its pool, and what the template asked; a component without OST
 * objects shows its kind (mdt, ext, keep) instead of OSTs. */
static void la_put_composite(struct la_out *l, const struct la_record_line *r,
			     int applied)
{
	static const char *const kinds[] = { "", "mdt", "ext", "keep" };
	const struct la_decision *d = r->d;
	const struct la_pfl *pfl = r->pfl;
	int field, i, j, k, at;

	/* osts, stripe_count, stripe_size, pool, req_count, req_size */
	for (field = 0; field < 6; field++) {
		static const char *const names[] = {
			"", "\tstripe_count=", "\tstripe_size=", "\tpool=",
			"\treq_count=", "\treq_size=" };
		int placed = applied || field >= 4;

		la_put_str(l, names[field]);
		for (i = 0, k = 0, at = 0; placed && i < pfl->n; i++) {
			const struct la_pfl_comp *c = &pfl->c[i];
			int n = c->kind == LA_PFL_OST && applied
					? d->comp_count[k] : 0;

			if (i)
				la_put_str(l, ";");
			if (c->kind != LA_PFL_OST) {
				if (field == 0)
					la_put_str(l, kinds[c->kind]);
				continue;
			}
			if (field == 0)
				for (j = 0; j < n; j++) {
					if (j)
						la_put_str(l, ",");
					la_put_u64(l, d->osts[at + j]);
				}
			else if (field == 1)
				la_put_u64(l, (uint64_t)n);
			else if (field == 2 || field == 5)
				la_put_u64(l, c->stripe_size);
			else if (field == 3)
				la_put_escaped_value(l, c->pool[0] ? c->pool
						     : r->pool ? r->pool : "");
			else
				la_put_i64(l, c->stripe_count);
			at += n;
			k++;
		}
	}
}

void la_record(const struct la_record_line *r, char *buf, size_t cap)
{
	const struct la_decision *d = r->d;
	int applied = r->out->applied && d->ok;
	struct la_out l = { buf, 0, cap };
	struct timespec ts;
	int fd, i;
	int saved = errno;

	if (!la_cfg.record[0] || cap < 2)
		return;
	buf[0] = '\0';
	clock_gettime(CLOCK_REALTIME, &ts);
	la_put_str(&l, "v=4\tts=");
	la_put_u64(&l, (uint64_t)ts.tv_sec);
	la_put_str(&l, ".");
	{
		char us[7];
		long v = ts.tv_nsec / 1000;

		for (i = 5; i >= 0; i--, v /= 10)
			us[i] = (char)('0' + v % 10);
		us[6] = '\0';
		la_put_str(&l, us);
	}
	la_put_kv(&l, "pid", (uint64_t)la_getpid());
	la_put_kv(&l, "tid", (uint64_t)la_gettid());
	la_put_str(&l, "\top=");
	la_put_str(&l, r->op);
	la_put_str(&l, "\tbackend=");
	la_put_str(&l, r->backend);
	la_put_escaped(&l, "job", la_cfg.job);
	la_put_escaped(&l, "path", r->path);
	la_put_str(&l, applied ? "\tresult=layout\tosts=" :
				 "\tresult=default\tosts=");
	if (r->pfl) {
		la_put_composite(&l, r, applied);
	} else if (r->out->got_count > 0) {
		/* read back from Lustre: what the file has */
		const struct la_outcome *o = r->out;

		for (i = 0; i < o->got_count; i++) {
			if (i)
				la_put_str(&l, ",");
			la_put_u64(&l, o->got[i]);
		}
		la_put_kv(&l, "stripe_count", (uint64_t)o->got_count);
		la_put_kv(&l, "stripe_size", o->got_size);
	} else {
		for (i = 0; applied && i < d->count; i++) {
			if (i)
				la_put_str(&l, ",");
			la_put_u64(&l, d->osts[i]);
		}
		if (applied) {
			la_put_kv(&l, "stripe_count", (uint64_t)d->count);
			la_put_kv(&l, "stripe_size", d->stripe_size);
		} else {
			la_put_str(&l, "\tstripe_count=\tstripe_size=");
		}
	}
	if (!r->pfl) {
		la_put_escaped(&l, "pool", applied && r->pool ? r->pool : "");
		la_put_str(&l, "\treq_count=");
		la_put_i64(&l, r->req_count);
		la_put_kv(&l, "req_size", r->req_size);
	}
	la_put_escaped(&l, "policy", d->policy);
	la_put_escaped(&l, "mapper_fallback", d->mapper_fallback);
	la_put_escaped(&l, "reason",
		       r->out->reason[0] ? r->out->reason : d->reason);
	la_put_str(&l, "\tmapper_us=");
	la_put_tenths(&l, d->mapper_us);
	la_put_str(&l, "\ttotal_us=");
	la_put_tenths(&l, r->total_us);
	la_put_str(&l, "\tlease=");
	if (d->lease)
		la_put_u64(&l, d->lease);
	la_put_str(&l, "\textents=");
	for (i = 0; r->pfl && i < r->pfl->n; i++) {
		if (i)
			la_put_str(&l, ";");
		la_put_u64(&l, r->pfl->c[i].start);
		la_put_str(&l, "-");
		if (r->pfl->c[i].end == LA_LUSTRE_EOF)
			la_put_str(&l, "eof");
		else
			la_put_u64(&l, r->pfl->c[i].end);
	}
	/* the mapper's answer, whatever Lustre then did with it */
	la_put_str(&l, "\tasked=");
	for (i = 0; d->ok && !r->pfl && i < d->count; i++) {
		if (i)
			la_put_str(&l, ",");
		la_put_u64(&l, d->osts[i]);
	}
	la_put_str(&l, "\n");
	if (l.len + 1 >= l.cap) /* cut: still one line */
		buf[l.len - 1] = '\n';
	fd = la_rec_get_fd();
	if (fd >= 0) {
		ssize_t w = write(fd, buf, l.len);
		(void)w; /* a lost record never fails the application */
	}
	errno = saved;
}

void la_record_close(void)
{
	int fd = atomic_exchange(&la_rec_fd, -1);

	if (fd >= 0)
		close(fd);
}

/*
 * la_create.c - the decision for one new file: which creations are touched,
 * what to ask the mapper, create with the layout, fall back, record.
 *
 * Failure rule: whatever goes wrong on our side (mapper, layout, memory),
 * the application gets exactly what open(2) with its own flags and mode
 * would have given it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "la_internal.h"

#define LA_DEFAULT_STRIPE_SIZE (1u << 20) /* Lustre's default: 1 MiB */

void la_fill_request(struct la_request *rq, const char *abs,
		     const struct la_dirinfo *di,
		     const struct lustre_alloc_hint *hint)
{
	rq->job = la_cfg.job;
	rq->path = abs;
	rq->pool = hint && hint->pool ? hint->pool : la_cfg.pool;
	rq->stripe_count = hint && hint->stripe_count ? hint->stripe_count
			 : la_cfg.stripe_count ? la_cfg.stripe_count
			 : di && di->stripe_count ? di->stripe_count : 1;
	rq->stripe_size = hint && hint->stripe_size ? hint->stripe_size
			: la_cfg.stripe_size ? la_cfg.stripe_size
			: di && di->stripe_size ? di->stripe_size
			: LA_DEFAULT_STRIPE_SIZE;
	rq->expected_bytes = hint && hint->expected_bytes
				     ? hint->expected_bytes
				     : la_cfg.expected_bytes;
}

int la_create(int dirfd, const char *path, const char *abs,
	      const struct la_dirinfo *di, int flags, mode_t mode,
	      const struct lustre_alloc_hint *hint, const char *op)
{
	const struct la_backend *be =
		di->is_lustre ? &la_backend_lustre : &la_backend_record;
	struct la_outcome out = { 0, "" };
	struct la_record_line rec;
	struct la_request rq;
	struct la_decision *d;
	double t0 = la_now_us();
	int fd, e;

	d = malloc(sizeof(*d));
	if (!d)
		return la_real.openat(dirfd, path, flags, mode);
	la_fill_request(&rq, abs, di, hint);
	la_mapper_alloc(&rq, la_cfg.timeout_ms, d);
	if (d->ok) {
		fd = be->create(dirfd, path, flags, mode, d, &out);
		if (fd < 0 && errno == EEXIST) {
			/* created by someone else meanwhile: open normally */
			free(d);
			return la_real.openat(dirfd, path, flags, mode);
		}
		if (fd < 0) {
			snprintf(out.reason, sizeof(out.reason),
				 "create_failed:%d", errno);
			out.applied = 0;
			fd = la_real.openat(dirfd, path, flags, mode);
		}
	} else {
		fd = la_real.openat(dirfd, path, flags, mode);
	}
	e = errno;
	if (fd >= 0) {
		rec.path = abs;
		rec.backend = be->name;
		rec.op = op;
		rec.req_count = rq.stripe_count;
		rec.req_size = rq.stripe_size;
		rec.d = d;
		rec.out = &out;
		rec.total_us = la_now_us() - t0;
		la_record(&rec);
	}
	free(d);
	errno = e;
	return fd;
}

int la_maybe_create(int dirfd, const char *path, int flags, mode_t mode,
		    const char *op, int *fd,
		    const struct lustre_alloc_hint *hint, int explicit_call)
{
	char abs[LA_PATH_MAX];
	struct la_dirinfo di;
	struct stat st;
	int saved = errno;
	int handled = 0;

	if ((!la_cfg.enabled && !explicit_call) || !path || !la_real.openat)
		goto out;
	if (!(flags & O_CREAT) || (flags & O_PATH) ||
	    (flags & O_DIRECTORY) /* includes O_TMPFILE */)
		goto out;
	/* Existing files (and dangling links) are never touched. */
	if (fstatat(dirfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0 ||
	    errno != ENOENT)
		goto out;
	if (la_abspath(dirfd, path, abs, sizeof(abs)) != 0)
		goto out;
	if (!explicit_call && la_cfg.npaths && !la_under_paths(abs))
		goto out;
	if (la_dirinfo(abs, &di) != 0)
		goto out; /* no such directory: open(2) reports it */
	if (!explicit_call && !di.is_lustre &&
	    (!la_cfg.npaths || !la_cfg.record[0]))
		goto out; /* not Lustre and nothing to record */
	errno = saved;
	*fd = la_create(dirfd, path, abs, &di, flags, mode, hint, op);
	if (*fd >= 0)
		errno = saved; /* success leaves errno as the caller had it */
	return 1;
out:
	errno = saved;
	return handled;
}

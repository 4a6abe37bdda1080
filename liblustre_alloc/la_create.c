/*
 * la_create.c - the decision for one new file: which creations are touched,
 * what to ask the mapper, create with the layout, fall back, record.
 *
 * Failure rule: whatever goes wrong on our side (mapper, layout, no free
 * workspace), the application gets exactly what open(2) with its own flags
 * and mode would have given it, and nothing it did not create in this call
 * is removed, reopened or truncated (the one file ever removed is the empty
 * one this call created and Lustre could give no layout: la_backend.c).
 *
 * Async-signal-safe from end to end (see la_internal.h): the workspace
 * comes from la_work.c, the mapper is asked through the helper thread.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "la_internal.h"

/* Each field: the explicit hint, else the environment, else the
 * directory's default layout, else Lustre's default. */
void la_fill_request(struct la_request *rq, const char *abs,
		     const struct la_dirinfo *di,
		     const struct lustre_alloc_hint *hint)
{
	rq->job = la_cfg.job;
	rq->path = abs;
	rq->pool = hint && hint->pool && *hint->pool ? hint->pool
		 : la_cfg.pool[0] ? la_cfg.pool
		 : di && di->pool[0] ? di->pool : "";
	rq->stripe_count = hint && hint->stripe_count ? hint->stripe_count
			 : la_cfg.stripe_count ? la_cfg.stripe_count
			 : di && di->stripe_count ? di->stripe_count : 1;
	rq->stripe_size = hint && hint->stripe_size ? hint->stripe_size
			: la_cfg.stripe_size ? la_cfg.stripe_size
			: di && di->stripe_size ? di->stripe_size : 0;
	/* nobody gave one: Lustre's own default goes in the layout */
	rq->stripe_size_lustre = rq->stripe_size == 0;
	rq->own_layout =
		(hint && ((hint->pool && *hint->pool) || hint->stripe_count ||
			  hint->stripe_size)) ||
		la_cfg.pool[0] || la_cfg.stripe_count || la_cfg.stripe_size;
	if (rq->stripe_size_lustre)
		rq->stripe_size = LA_PRICING_STRIPE_SIZE;
	rq->expected_bytes = hint && hint->expected_bytes
				     ? hint->expected_bytes
				     : la_cfg.expected_bytes;
	/* for the admin's scope rules (docs/protocol.md: uid, gid, projid) */
	rq->uid = (uint32_t)geteuid();
	rq->gid = (uint32_t)getegid();
	rq->projid = di ? di->projid : -1;
}

/* Create the new file base in the directory pfd. */
static int la_create(struct la_work *w, int pfd, const char *base,
		     const struct la_dirinfo *di, int flags, mode_t mode,
		     const struct lustre_alloc_hint *hint, const char *op)
{
	const struct la_backend *be =
		di->is_lustre ? &la_backend_lustre : &la_backend_record;
	struct la_outcome out = { 0, 0, LA_NOT_REFUSED, "", w->got, 0, 0, 0 };
	struct la_decision *d = &w->d;
	struct la_record_line rec;
	struct la_request rq;
	const struct la_pfl *pfl = NULL;
	double t0 = la_now_us();
	int fd, e;

	la_fill_request(&rq, w->abs, di, hint);
	d->ok = 0;
	d->policy[0] = d->mapper_fallback[0] = d->reason[0] = '\0';
	d->mapper_us = 0;
	d->lease = 0;
	d->to_lustre = 0;
	d->lease_slot = NULL;
	d->shadow_token = 0;
	d->ncomp = 0;
	d->pfl = NULL;
	/* The first create in scope that asks the mapper starts the helper
	 * (and loads libzmq): the one step of the create path that is not
	 * async-signal-safe (docs/client.md, "Threads, fork and signals"). */
	if (!la_helper_running() && !(di->untouched && !(hint && hint->stripe_count))) {
		la_helper_start();
		/* loading libzmq is paid once a process, not out of the
		 * mapper's LUSTRE_ALLOC_TIMEOUT_MS: a loaded node took longer
		 * than the 50 ms default, and the first create then timed
		 * out and put the process in back-off */
		w->deadline_us = la_now_us() + la_cfg.timeout_ms * 1000.0;
	}
	if (di->untouched && !(hint && hint->stripe_count)) {
		/* a default the admin wants Lustre to apply as it is */
		strcpy(d->reason, di->untouched == LA_DIR_SEL ? "dir_sel"
				  : di->untouched == LA_DIR_OFFSET
					  ? "dir_offset"
					  : "dir_specific");
	} else if (di->composite && !(hint && hint->stripe_count)) {
		/* A PFL/composite default: the mapper places each OST
		 * component; one it cannot be asked for (FLR mirrors, no OST
		 * component, unreadable) is left to Lustre untouched. */
		double left_ms = (w->deadline_us - la_now_us()) / 1000.0;

		if (!di->pfl_ok || w->pfl.nost == 0)
			strcpy(d->reason, "dir_composite");
		else
			la_mapper_composite(&rq, &w->pfl,
					    left_ms < 1 ? 1 : (int)left_ms, d);
		pfl = di->pfl_ok ? &w->pfl : NULL;
	} else {
		/* one budget per create: time spent waiting for a free
		 * workspace comes off the mapper's share */
		double left_ms;
		/* the class's directory: abs up to its last slash */
		size_t dirlen = (size_t)(strrchr(w->abs, '/') - w->abs);
		int how = la_lease_take(&rq, dirlen ? dirlen : 1, w->deadline_us,
					d);

		if (how == LA_LEASE_PER_CREATE) {
			left_ms = (w->deadline_us - la_now_us()) / 1000.0;
			la_mapper_alloc(&rq, left_ms < 1 ? 1 : (int)left_ms, d);
		} else if (how == LA_LEASE_LUSTRE && d->to_lustre &&
			   rq.own_layout) {
			/* left to Lustre's allocator, with the stripe count,
			 * size and pool this process asked for (a plain
			 * create would give the directory's): no OST list */
			d->ok = 1;
			d->count = 0;
			d->stripe_size = rq.stripe_size;
		} else if (how == LA_LEASE_LUSTRE) {
			d->ok = 0;
		}
	}
	if (d->ok) {
		fd = be->create(pfd, base, flags, mode, d, &rq, w->u.lum,
				&out);
		/* the record says what Lustre did: it can apply fewer OSTs
		 * than a list names (lod_qos.c caps the count at the OSTs it
		 * counts active, for a few seconds after one returns) */
		if (fd >= 0 && !d->pfl) {
			if (!out.got_known)
				out.got_count = be->read_back(fd, w->u.lum,
							      &out);
			if (out.got_count > 0 && out.applied && !out.reason[0] &&
			    !d->to_lustre &&
			    (out.got_count != d->count ||
			     memcmp(out.got, d->osts,
				    (size_t)d->count * sizeof(d->osts[0]))))
				strcpy(out.reason, "setstripe_changed");
		}
		if (d->lease) /* the file is named in the lease's release */
			la_lease_created(d, base, fd >= 0 && out.applied &&
						      !out.refused_errno);
		if (out.refused_errno) {
			la_refusal_count(out.recovery);
			/* the rest of a lease was chosen from the same
			 * sample: ask again rather than be refused again */
			if (d->lease)
				la_lease_forget(d->lease);
		}
		if (fd < 0 && errno == EEXIST && !out.refused_errno)
			return la_real.openat(pfd, base, flags, mode);
		if (fd < 0) {
			/* removed (Lustre could place it nowhere) or not
			 * created: the application's own open decides */
			if (!out.reason[0])
				la_reason(out.reason, sizeof(out.reason),
					  "create_failed", errno);
			out.applied = 0;
			fd = la_real.openat(pfd, base, flags, mode);
		}
	} else {
		/* O_EXCL: an existing file is the application's own open,
		 * unrecorded, as when the mapper placed it (above) */
		fd = la_real.openat(pfd, base, flags | O_EXCL, mode);
		if (fd < 0 && errno == EEXIST && !(flags & O_EXCL))
			return la_real.openat(pfd, base, flags, mode);
		if (fd >= 0 && d->shadow_token)
			la_report_queue(d->shadow_token, w->abs, be);
	}
	e = errno;
	if (fd >= 0 && rq.expected_bytes == 0) /* its size is sent at close */
		la_sizes_track(fd);
	if (fd >= 0) {
		rec.path = w->abs;
		rec.backend = be->name;
		rec.op = op;
		rec.req_count = rq.stripe_count;
		rec.req_size = rq.stripe_size;
		rec.pool = rq.pool;
		rec.pfl = pfl;
		rec.d = d;
		rec.out = &out;
		rec.total_us = la_now_us() - t0;
		la_record(&rec, w->u.line, sizeof(w->u.line));
	}
	errno = e;
	return fd;
}

/* 1: handled, *fd is the result; 0: pass the call straight through. */
static int la_maybe_create_in(struct la_work *w, int dirfd, const char *path,
			      int flags, mode_t mode, const char *op, int *fd,
			      const struct lustre_alloc_hint *hint,
			      int explicit_call)
{
	struct la_target t;
	struct la_dirinfo di;
	int handled = 0;

	if (la_target_open(dirfd, path, w, &t) != 0)
		goto out; /* no such directory: open(2) reports it */
	/* Existing files (and dangling links) are never touched: the
	 * backend's create has O_EXCL, and its EEXIST hands the call to the
	 * application's own open (la_create()).  No existence check first:
	 * on Lustre a lookup of a name that does not exist is an MDS RPC, and
	 * the lock it takes on the directory is cancelled by the create that
	 * follows, which also costs the next create's path walk an RPC (3 of
	 * the 8 RPCs a create under the shim cost the MDS on 2.17.0, against
	 * 2 plain: bench/lustre_vm_create_rpcs.py). */
	/* Without LUSTRE_ALLOC_PATHS only Lustre is touched: say no to every
	 * other file system before naming the directory. */
	if (!explicit_call && !la_cfg.npaths && !la_dir_is_lustre(t.pfd))
		goto out;
	if (la_target_abspath(&t, w) != 0)
		goto out;
	if (!explicit_call && la_cfg.npaths && !la_under_paths(w->abs))
		goto out;
	{
		/* the directory's kernel name: abs up to its last slash */
		size_t dirlen = (size_t)(strrchr(w->abs, '/') - w->abs);

		if (la_dirinfo(t.pfd, w->abs, dirlen ? dirlen : 1, w, &di) != 0)
			goto out;
	}
	if (!explicit_call && !di.is_lustre &&
	    (!la_cfg.npaths || !la_cfg.record[0]))
		goto out; /* not Lustre and nothing to record */
	*fd = la_create(w, t.pfd, t.base, &di, flags, mode, hint, op);
	handled = 1;
out:
	if (t.pfd >= 0) {
		int e = errno;

		close(t.pfd);
		errno = e;
	}
	return handled;
}

int la_maybe_create(int dirfd, const char *path, int flags, mode_t mode,
		    const char *op, int *fd,
		    const struct lustre_alloc_hint *hint, int explicit_call)
{
	struct la_work *w;
	int saved = errno;
	int handled;

	if ((!la_cfg.enabled && !explicit_call) || !path || !la_real.openat)
		return 0;
	if (!(flags & O_CREAT) || (flags & O_PATH) ||
	    (flags & O_DIRECTORY) /* includes O_TMPFILE */)
		return 0;
	/* The program sets its own layout: liblustreapi
	 * (llapi_file_open_param(), lfs setstripe FILE, llapi_layout_file_
	 * create()) and ROMIO's ad_lustre open with O_LOV_DELAY_CREATE and
	 * then SETSTRIPE; llite keeps such a file without a layout
	 * (lustre_mdc.h cl_is_lov_delay_create()).  A layout of ours would
	 * make their SETSTRIPE fail with EEXIST. */
	if ((flags & LA_O_LOV_DELAY_CREATE) == LA_O_LOV_DELAY_CREATE &&
	    !explicit_call)
		return 0;
	/* An O_APPEND create gets the MDT's append layout, not the
	 * directory's (mdd_object.c mdd_object_make_hint():
	 * dah_append_stripe_count = mdd.*.append_stripe_count, default 1,
	 * and append_pool), which a client cannot read: Lustre places it. */
	if ((flags & O_APPEND) && !explicit_call)
		return 0;
	{
		double deadline_us = la_now_us() + la_cfg.timeout_ms * 1000.0;

		w = la_work_get(deadline_us);
		if (!w)
			return 0; /* none free in time: Lustre's default */
		w->deadline_us = deadline_us;
	}
	handled = la_maybe_create_in(w, dirfd, path, flags, mode, op, fd, hint,
				     explicit_call);
	la_work_put(w);
	if (!handled || *fd >= 0)
		errno = saved; /* success leaves errno as the caller had it */
	return handled;
}

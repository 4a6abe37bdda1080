/*
 * la_api.c - lustre_alloc.h, the explicit API.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "la_internal.h"

static int la_hint_valid(const struct lustre_alloc_hint *h)
{
	if (!h)
		return 1;
	if (h->stripe_count < -1 || h->stripe_count > LA_MAX_STRIPES)
		return 0;
	if (h->stripe_size % LA_STRIPE_SIZE_UNIT || h->stripe_size > UINT32_MAX)
		return 0;
	if (h->pool && strlen(h->pool) > LA_LOV_MAXPOOLNAME)
		return 0;
	return 1;
}

LA_EXPORT int lustre_alloc_create(const char *path, int flags, mode_t mode,
				  const struct lustre_alloc_hint *hint)
{
	int fd;

	la_init();
	la_helper_start(); /* with LUSTRE_ALLOC_DISABLE, la_init did not */
	if (!la_hint_valid(hint)) {
		errno = EINVAL;
		return -1;
	}
	flags |= O_CREAT;
	la_in_shim++;
	if (!la_maybe_create(AT_FDCWD, path, flags, mode, "api", &fd, hint, 1))
		fd = la_real.openat(AT_FDCWD, path, flags, mode);
	la_in_shim--;
	return fd;
}

LA_EXPORT int lustre_alloc_query(const char *path,
				 const struct lustre_alloc_hint *hint,
				 struct lustre_alloc_layout *out)
{
	struct la_request rq;
	struct la_decision *d;
	int rc;

	la_init();
	la_helper_start();
	if (!out || !la_hint_valid(hint))
		return -EINVAL;
	d = malloc(sizeof(*d));
	if (!d)
		return -ENOMEM;
	la_in_shim++;
	la_fill_request(&rq, path, NULL, hint);
	la_mapper_query(&rq, la_cfg.timeout_ms, d);
	la_in_shim--;
	rc = d->ok ? 0 : (d->err ? d->err : -EPROTO);
	if (d->ok) {
		out->stripe_size = d->stripe_size;
		out->stripe_count = d->count;
		memcpy(out->osts, d->osts, (size_t)d->count * sizeof(uint32_t));
		memcpy(out->policy, d->policy, sizeof(out->policy));
		memcpy(out->fallback, d->mapper_fallback, sizeof(out->fallback));
	}
	free(d);
	return rc;
}

LA_EXPORT int lustre_alloc_ping(int timeout_ms)
{
	int rc;

	la_init();
	la_helper_start();
	la_in_shim++;
	rc = la_mapper_ping(timeout_ms > 0 ? timeout_ms : la_cfg.timeout_ms);
	la_in_shim--;
	return rc;
}

/*
 * la_backend.c - layout backends, the seam between Lustre and everything
 * else.
 *
 * lustre: what liblustreapi and ROMIO's ad_lustre do underneath (reference
 *   "Two ways", 2): open(O_CREAT|O_EXCL|O_LOV_DELAY_CREATE), then
 *   ioctl(LL_IOC_LOV_SETSTRIPE) with a LOV_USER_MAGIC_SPECIFIC lov_user_md_v3
 *   listing the OSTs.  Any SETSTRIPE error keeps the file and descriptor:
 *   Lustre's default allocator places it at the first write.
 *   (llapi_file_open_param() is not used: on a failed SETSTRIPE it closes the
 *   descriptor of the file it created, and the path alone no longer tells
 *   our empty file from another writer's.)
 * record: not on Lustre; creates the file plainly and reports the layout as
 *   what would have been applied (la_record.c writes the line).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "la_internal.h"

static int la_sys_ioctl(int fd, unsigned long req, void *arg)
{
	return ioctl(fd, req, arg);
}

int (*la_lustre_ioctl)(int fd, unsigned long req, void *arg) = la_sys_ioctl;

size_t la_lum_size(int count)
{
	return sizeof(struct la_lov_user_md_v3) +
	       (size_t)count * sizeof(struct la_lov_user_ost_data_v1);
}

size_t la_build_lum(void *buf, uint64_t stripe_size, int count,
		    const uint32_t *osts, const char *pool)
{
	struct la_lov_user_md_v3 *lum = buf;
	size_t size = la_lum_size(count);
	int i;

	memset(lum, 0, size);
	lum->lmm_magic = LA_LOV_USER_MAGIC_SPECIFIC;
	lum->lmm_pattern = LA_LOV_PATTERN_RAID0;
	lum->lmm_stripe_size = (uint32_t)stripe_size;
	lum->lmm_stripe_count = (uint16_t)count;
	/* lfs setstripe -o: the offset is the first listed OST */
	lum->lmm_stripe_offset = (uint16_t)osts[0];
	if (pool)
		strncpy(lum->lmm_pool_name, pool, LA_LOV_MAXPOOLNAME);
	for (i = 0; i < count; i++)
		lum->lmm_objects[i].l_ost_idx = osts[i];
	return size;
}

/*
 * The file is created here with O_EXCL, so it is ours until this call
 * returns; a failed SETSTRIPE keeps it (and the descriptor): Lustre gives it
 * the default layout at the first write.  Nothing is ever unlinked or opened
 * again: between our create and a failed ioctl another process may have
 * opened the same path (O_CREAT without O_EXCL succeeds on an existing file)
 * and written to it.  (llite drops O_LOV_DELAY_CREATE from the descriptor's
 * flags at open, cl_lov_delay_create_clear(), so the application's
 * descriptor carries its own flags.)
 */
static int la_lustre_create(int dirfd, const char *path, int flags,
			    mode_t mode, const struct la_decision *d,
			    struct la_outcome *out)
{
	void *lum;
	int fd, e;

	fd = la_real.openat(dirfd, path,
			    flags | O_CREAT | O_EXCL | LA_O_LOV_DELAY_CREATE,
			    mode);
	if (fd < 0)
		return -1; /* EEXIST: caller opens normally */
	lum = malloc(la_lum_size(d->count));
	if (!lum) {
		e = ENOMEM;
	} else {
		la_build_lum(lum, d->stripe_size, d->count, d->osts,
			     la_cfg.pool[0] ? la_cfg.pool : NULL);
		e = la_lustre_ioctl(fd, LA_LL_IOC_LOV_SETSTRIPE, lum) == 0 ?
			    0 : errno;
		free(lum);
	}
	if (e == 0) {
		out->applied = 1;
		return fd;
	}
	snprintf(out->reason, sizeof(out->reason), "setstripe_rejected:%d", e);
	out->applied = 0;
	return fd;
}

static int la_lustre_dir_default(const char *dir, int *count, uint64_t *size)
{
	union {
		struct la_lov_user_md_v3 v3;
		char bytes[sizeof(struct la_lov_user_md_v3) +
			   4 * sizeof(struct la_lov_user_ost_data_v1)];
	} lum;
	int fd, rc;

	fd = la_real.open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	memset(&lum, 0, sizeof(lum));
	lum.v3.lmm_magic = LA_LOV_USER_MAGIC_V3;
	rc = la_lustre_ioctl(fd, LA_LL_IOC_LOV_GETSTRIPE, &lum);
	close(fd);
	/* ENODATA: no default on the directory; PFL (COMP_V1) is not parsed:
	 * both mean "filesystem default". */
	if (rc != 0 || (lum.v3.lmm_magic != LA_LOV_USER_MAGIC_V1 &&
			lum.v3.lmm_magic != LA_LOV_USER_MAGIC_V3))
		return -1;
	*size = lum.v3.lmm_stripe_size;
	/* stripe count 0 = filesystem default (1), 0xffff = all OSTs */
	*count = lum.v3.lmm_stripe_count == 0xffff ? -1 :
						     lum.v3.lmm_stripe_count;
	return 0;
}

const struct la_backend la_backend_lustre = {
	.name = "lustre",
	.create = la_lustre_create,
	.dir_default = la_lustre_dir_default,
};

static int la_record_create(int dirfd, const char *path, int flags,
			    mode_t mode, const struct la_decision *d,
			    struct la_outcome *out)
{
	int fd = la_real.openat(dirfd, path, flags | O_CREAT | O_EXCL, mode);

	(void)d;
	if (fd >= 0)
		out->applied = 1; /* would have been applied */
	return fd;
}

static int la_record_dir_default(const char *dir, int *count, uint64_t *size)
{
	(void)dir;
	(void)count;
	(void)size;
	return -1; /* Lustre's own default: 1 x 1 MiB */
}

const struct la_backend la_backend_record = {
	.name = "record",
	.create = la_record_create,
	.dir_default = la_record_dir_default,
};

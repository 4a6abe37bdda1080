/*
 * la_backend.c - layout backends, the seam between Lustre and everything
 * else.
 *
 * lustre: what liblustreapi and ROMIO's ad_lustre do underneath (reference
 *   "Two ways", 2): open(O_CREAT|O_EXCL|O_LOV_DELAY_CREATE), then
 *   ioctl(LL_IOC_LOV_SETSTRIPE) with a LOV_USER_MAGIC_SPECIFIC lov_user_md_v3
 *   listing the OSTs, or, under a composite default, an lov_comp_md_v1
 *   whose OST components are such blobs (la_pfl.c).  A refused SETSTRIPE
 *   is followed by the default layout (la_lustre_create), so the file
 *   never stays without one.
 *   (llapi_file_open_param() is not used: on a failed SETSTRIPE it closes the
 *   descriptor of the file it created, and the path alone no longer tells
 *   our empty file from another writer's.)
 * record: not on Lustre; creates the file plainly and reports the layout as
 *   what would have been applied (la_record.c writes the line).  Its
 *   directory default is the user xattr LA_DIR_DEFAULT_XATTR holding the
 *   bytes GETSTRIPE gives on Lustre: the seam's other side, so the default
 *   handling (pool, PFL pass-through, cache expiry) runs without Lustre.
 *   A file's layout (shadow reports, la_report.c) is read from the same
 *   xattr on the file, written by whatever plays the MDS (livestack).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
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

/* The layout Lustre's own allocator chooses for this file: the request's
 * stripe count, size and pool (the effective default when the application
 * asked for none) with no start OST, or the directory's composite template
 * unchanged.  Bytes in lum. */
static size_t la_build_default(void *lum, const struct la_request *rq,
			       const struct la_decision *d)
{
	struct la_lov_user_md_v3 *v3 = lum;

	if (d->pfl) {
		memcpy(lum, d->pfl->raw, d->pfl->len);
		return d->pfl->len;
	}
	memset(v3, 0, sizeof(*v3));
	v3->lmm_magic = rq->pool && *rq->pool ? LA_LOV_USER_MAGIC_V3
					     : LA_LOV_USER_MAGIC_V1;
	v3->lmm_pattern = LA_LOV_PATTERN_RAID0;
	v3->lmm_stripe_size = (uint32_t)rq->stripe_size;
	v3->lmm_stripe_count = (uint16_t)(rq->stripe_count < 0 ? 0xffff
					  : rq->stripe_count);
	v3->lmm_stripe_offset = LA_LOV_OFFSET_DEFAULT;
	if (rq->pool && *rq->pool)
		strncpy(v3->lmm_pool_name, rq->pool, LA_LOV_MAXPOOLNAME);
	return sizeof(*v3);
}

/* The layout the open descriptor fd has, as GETSTRIPE gives it: a plain
 * layout's OSTs, or the last instantiated component's for a composite one
 * (lov_pack.c lov_getstripe(): a buffer that starts with a v1/v3 header of
 * lmm_stripe_count objects is filled with at most that, so the kernel never
 * writes past buf).  Returns the stripe count, 0 without a layout (ENODATA:
 * lov_object_getstripe() has no lsm), -1 when unreadable. */
static int la_lustre_fd_layout(int fd, void *buf, size_t cap, uint32_t *osts,
			       int max, uint64_t *stripe_size)
{
	struct la_lov_user_md_v3 *lum = buf;
	int rc;

	if (cap < sizeof(*lum))
		return -1;
	memset(lum, 0, sizeof(*lum));
	lum->lmm_magic = LA_LOV_USER_MAGIC_V3;
	/* how many objects the buffer holds */
	lum->lmm_stripe_count = (uint16_t)((cap - sizeof(*lum)) /
					   sizeof(struct la_lov_user_ost_data_v1));
	rc = la_lustre_ioctl(fd, LA_LL_IOC_LOV_GETSTRIPE, buf);
	if (rc != 0)
		return errno == ENODATA ? 0 : -1;
	return la_parse_file_layout(buf, cap, osts, max, stripe_size);
}

/* The layout the file (name in dirfd, open as fd) has after a refused
 * SETSTRIPE, read through a new open of it: a refusal can come after the
 * layout was made (mdt_open.c makes it before the open's permission check:
 * a user's 0444 create gets EACCES with the layout in place), and the
 * creating descriptor is not refreshed (ll_lov_setstripe() refreshes only
 * on success: its GETSTRIPE says ENODATA, seen on 2.17.0).  Only while the
 * name still leads to this inode. */
static int la_lustre_layout_after_refusal(int dirfd, const char *path, int fd,
					  void *lum, struct la_outcome *out)
{
	struct stat a, b;
	int nfd, n = -1;

	nfd = la_real.openat(dirfd, path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
					  O_NOCTTY | O_CLOEXEC, 0);
	if (nfd < 0)
		return -1;
	if (fstat(fd, &a) == 0 && fstat(nfd, &b) == 0 && a.st_dev == b.st_dev &&
	    a.st_ino == b.st_ino)
		n = la_lustre_fd_layout(nfd, lum, LA_LUM_MAX, out->got,
					LA_MAX_STRIPES, &out->got_size);
	close(nfd);
	return n;
}

/* Remove the file this call created (name in dirfd, open as fd) when the
 * name still leads to that inode: Lustre gave it no layout, and plain
 * Lustre's open(2) would have failed and left no file (mdt_open.c: the
 * create and its layout are one transaction). */
static void la_remove_own(int dirfd, const char *path, int fd)
{
	struct stat a, b;

	if (fstat(fd, &a) == 0 &&
	    fstatat(dirfd, path, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
	    a.st_dev == b.st_dev && a.st_ino == b.st_ino && b.st_size == 0)
		unlinkat(dirfd, path, 0);
}

/*
 * The file is created here with O_EXCL, so it is ours until this call
 * returns.  A file opened with O_LOV_DELAY_CREATE has no layout, and a write
 * on it fails with EBADF (lov/lov_io.c lov_io_init_empty(): CIT_WRITE), so
 * a writable descriptor is never handed back without one:
 *  - a refused SETSTRIPE (LOD checks an OST list all or nothing, lod_qos.c
 *    lod_alloc_ost_list()) is followed by a SETSTRIPE of the default
 *    layout with no start OST;
 *  - a refusal can come after the layout was made: the MDS creates it
 *    before the open's permission check (mdt_open.c), so a 0444 create by
 *    a non-root user gets EACCES with the layout in place, which this
 *    descriptor does not see until its first write refreshes it (seen on
 *    2.17.0).  What the file has is read back through a new open after
 *    every refusal;
 *  - if Lustre gives the file no layout at all (every OST of the pool
 *    drained, full or gone), plain Lustre would have failed the open(2)
 *    itself (ENOSPC, no file left): the file is removed (only while its
 *    name still leads to this empty inode) and -1 returned with
 *    out->reason set, and the caller retries the application's own open,
 *    which gives what plain Lustre gives.  A reopen of the same inode does
 *    not help: llite answers it from the write open handle this process
 *    holds (llite/file.c ll_file_open(): och_usecount), no MDS open, no
 *    layout (seen on Lustre 2.17.0: every write then fails EBADF).  A
 *    read-only create keeps its file without a layout, as plain Lustre
 *    leaves it (md_should_create(), lustre_mds.h: no layout without write).
 * (llite drops O_LOV_DELAY_CREATE from the descriptor's flags at open,
 * cl_lov_delay_create_clear(), so the application's descriptor carries its
 * own flags.)
 */
static int la_lustre_create(int dirfd, const char *path, int flags,
			    mode_t mode, const struct la_decision *d,
			    const struct la_request *rq, void *lum,
			    struct la_outcome *out)
{
	const char *pool = rq->pool;
	size_t len = 0;
	int fd, e, e2;

	out->got_count = 0;
	if (d->pfl && la_build_comp(lum, LA_LUM_MAX, d, pool) == 0) {
		/* wider than one SETSTRIPE buffer: the directory's own
		 * composite default, by Lustre */
		strcpy(out->reason, "composite_too_large");
		out->applied = 0;
		return la_real.openat(dirfd, path, flags | O_CREAT | O_EXCL,
				      mode);
	}
	fd = la_real.openat(dirfd, path,
			    flags | O_CREAT | O_EXCL | LA_O_LOV_DELAY_CREATE,
			    mode);
	if (fd < 0)
		return -1; /* EEXIST: caller opens normally */
	if (!d->pfl && d->count == 0) {
		/* no OST list: Lustre's allocator places the request's stripe
		 * count, size and pool (what the layout gives back is read
		 * after: GETSTRIPE) */
		la_build_default(lum, rq, d);
		if (rq->stripe_size_lustre)
			((struct la_lov_user_md_v3 *)lum)->lmm_stripe_size = 0;
	} else if (!d->pfl) {
		len = la_build_lum(lum, rq->stripe_size_lustre ? 0 : d->stripe_size,
				   d->count, d->osts, pool && *pool ? pool : NULL);
	}
	e = la_lustre_ioctl(fd, LA_LL_IOC_LOV_SETSTRIPE, lum) == 0 ? 0 : errno;
	if (e == 0 && len) {
		/* A SETSTRIPE that succeeds hands back the layout Lustre made
		 * in the caller's buffer (llite/file.c ll_lov_setstripe():
		 * ll_layout_refresh() then ll_file_getstripe(); lov_pack.c
		 * lov_getstripe(): for a LOV_USER_MAGIC_SPECIFIC request the
		 * whole v1/v3 layout, up to the request's size, which a
		 * shortened list fits; 2.15.8 and 2.17.0).  What it gave is
		 * read from there: a GETSTRIPE more cost an RPC. */
		out->got_count = la_parse_file_layout(lum, len, out->got,
						      LA_MAX_STRIPES,
						      &out->got_size);
		out->got_known = out->got_count > 0;
	}
	if (e == 0 ||
	    la_lustre_layout_after_refusal(dirfd, path, fd, lum, out) > 0) {
		out->applied = 1;
		if (e) /* made, then refused: the permission check */
			la_reason(out->reason, sizeof(out->reason),
				  "setstripe_late", e);
		return fd;
	}
	out->applied = 0;
	out->refused_errno = e;
	la_build_default(lum, rq, d);
	e2 = la_lustre_ioctl(fd, LA_LL_IOC_LOV_SETSTRIPE, lum) == 0 ? 0 : errno;
	if (e2 == 0 ||
	    la_lustre_layout_after_refusal(dirfd, path, fd, lum, out) > 0)
		out->recovery = LA_RECOVERED_DEFAULT;
	else if ((flags & O_ACCMODE) == O_RDONLY)
		out->recovery = LA_RECOVERY_FAILED;
	else
		out->recovery = LA_REMOVED;
	la_reason(out->reason, sizeof(out->reason), "setstripe_rejected", e);
	{
		struct la_out o = { out->reason, strlen(out->reason),
				    sizeof(out->reason) };

		la_put_str(&o, out->recovery == LA_RECOVERED_DEFAULT
				       ? "+default_layout"
			       : out->recovery == LA_REMOVED ? "+removed"
							     : "+no_layout");
	}
	if (out->recovery == LA_REMOVED) {
		la_remove_own(dirfd, path, fd);
		close(fd);
		errno = e2;
		return -1;
	}
	return fd;
}

/* What Lustre gave the file just created (plain layouts: its OSTs, to
 * the record; composite: the last instantiated component's). */
static int la_lustre_read_back(int fd, void *lum, struct la_outcome *out)
{
	return la_lustre_fd_layout(fd, lum, LA_LUM_MAX, out->got,
				   LA_MAX_STRIPES, &out->got_size);
}

static _Atomic uint64_t la_refusals[LA_RECOVERY_FAILED + 1];

void la_refusal_count(int recovery)
{
	if (recovery > LA_NOT_REFUSED && recovery <= LA_RECOVERY_FAILED)
		atomic_fetch_add(&la_refusals[recovery], 1);
}

uint64_t la_refusal_stat(int recovery)
{
	return recovery > LA_NOT_REFUSED && recovery <= LA_RECOVERY_FAILED
		       ? atomic_load(&la_refusals[recovery]) : 0;
}

/* LL_IOC_LOV_GETSTRIPE on a directory: its default layout, v1/v3 or
 * composite; ENODATA when it has none. */
static ssize_t la_lustre_dir_default(int dirfd, void *buf, size_t cap)
{
	struct la_lov_user_md_v3 *lum = buf;

	if (cap < sizeof(*lum))
		return -1;
	memset(buf, 0, sizeof(*lum));
	lum->lmm_magic = LA_LOV_USER_MAGIC_V3; /* the buffer holds a v3 */
	if (la_lustre_ioctl(dirfd, LA_LL_IOC_LOV_GETSTRIPE, buf) != 0)
		return -1;
	return (ssize_t)cap;
}

int la_parse_dir_default(const void *buf, size_t len, struct la_dirinfo *di)
{
	const struct la_lov_user_md_v3 *lum = buf;
	uint32_t magic;

	if (len < sizeof(magic))
		return -1;
	memcpy(&magic, buf, sizeof(magic));
	if (magic == LA_LOV_USER_MAGIC_COMP_V1 ||
	    magic == LA_LOV_USER_MAGIC_SEL) {
		di->composite = 1;
		if (magic == LA_LOV_USER_MAGIC_SEL)
			di->untouched = LA_DIR_SEL;
		return 0;
	}
	if (magic == LA_LOV_USER_MAGIC_SPECIFIC &&
	    len >= sizeof(struct la_lov_user_md_v3)) {
		/* lfs setstripe -o on the directory: the admin named them */
		di->has_default = 1;
		di->untouched = LA_DIR_SPECIFIC;
		return 0;
	}
	if (!(magic == LA_LOV_USER_MAGIC_V1 &&
	      len >= sizeof(struct la_lov_user_md_v1)) &&
	    !(magic == LA_LOV_USER_MAGIC_V3 && len >= sizeof(*lum)))
		return -1;
	di->has_default = 1;
	if (lum->lmm_stripe_offset != LA_LOV_OFFSET_DEFAULT) {
		/* lfs setstripe -i N DIR: the user named the first OST, which
		 * LOD honours (lod_qos.c lod_ost_alloc_specific()) */
		di->untouched = LA_DIR_OFFSET;
		return 0;
	}
	di->stripe_size = lum->lmm_stripe_size;
	/* stripe count 0 = the file system's default (the root's, filled in
	 * by la_paths.c), 0xffff = all OSTs */
	di->stripe_count = lum->lmm_stripe_count == 0xffff ? -1 :
						     lum->lmm_stripe_count;
	di->pool[0] = '\0';
	if (magic == LA_LOV_USER_MAGIC_V3) {
		memcpy(di->pool, lum->lmm_pool_name, LA_LOV_MAXPOOLNAME);
		di->pool[LA_LOV_MAXPOOLNAME] = '\0';
	}
	return 0;
}

int la_parse_file_layout(const void *buf, size_t len, uint32_t *osts, int max,
			 uint64_t *stripe_size)
{
	const struct la_lov_user_md_v1 *v1 = buf;
	const unsigned char *objects;
	size_t header;
	uint32_t magic;
	int count, i;

	if (len < sizeof(*v1))
		return -1;
	memcpy(&magic, buf, sizeof(magic));
	if (magic == LA_LOV_USER_MAGIC_V1)
		header = sizeof(struct la_lov_user_md_v1);
	else if (magic == LA_LOV_USER_MAGIC_V3)
		header = sizeof(struct la_lov_user_md_v3);
	else
		return -1; /* composite (PFL), foreign: not a flat list */
	count = v1->lmm_stripe_count;
	if (count < 1 || count > max ||
	    len < header + (size_t)count * sizeof(struct la_lov_user_ost_data_v1))
		return -1;
	objects = (const unsigned char *)buf + header;
	for (i = 0; i < count; i++) {
		struct la_lov_user_ost_data_v1 o;

		memcpy(&o, objects + (size_t)i * sizeof(o), sizeof(o));
		osts[i] = o.l_ost_idx;
	}
	*stripe_size = v1->lmm_stripe_size;
	return count;
}

/* LL_IOC_LOV_GETSTRIPE on the file (the helper thread opens it read-only,
 * never following a link); ENODATA: no layout yet. */
static int la_lustre_file_layout(const char *path, void *buf, size_t cap,
				 uint32_t *osts, int max, uint64_t *stripe_size)
{
	int fd, rc;

	fd = la_real.openat(AT_FDCWD, path,
			    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY |
				    O_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	rc = la_lustre_fd_layout(fd, buf, cap, osts, max, stripe_size);
	close(fd);
	return rc;
}

const struct la_backend la_backend_lustre = {
	.name = "lustre",
	.create = la_lustre_create,
	.read_back = la_lustre_read_back,
	.dir_default = la_lustre_dir_default,
	.file_layout = la_lustre_file_layout,
};

static int la_record_create(int dirfd, const char *path, int flags,
			    mode_t mode, const struct la_decision *d,
			    const struct la_request *rq, void *lum,
			    struct la_outcome *out)
{
	int fd = la_real.openat(dirfd, path, flags | O_CREAT | O_EXCL, mode);

	(void)d;
	(void)rq;
	(void)lum;
	if (fd >= 0)
		out->applied = 1; /* would have been applied */
	return fd;
}

/* Not on Lustre: the layout is what the mapper named (nothing to read). */
static int la_record_read_back(int fd, void *lum, struct la_outcome *out)
{
	(void)fd;
	(void)lum;
	(void)out;
	return -1;
}

/* Not on Lustre: the directory default is emulated by a user xattr holding
 * the bytes Lustre's GETSTRIPE gives (absent: Lustre's 1 x 1 MiB). */
static ssize_t la_record_dir_default(int dirfd, void *buf, size_t cap)
{
	return fgetxattr(dirfd, LA_DIR_DEFAULT_XATTR, buf, cap);
}

/* Not on Lustre: the layout an emulated MDS gave the file, in the same user
 * xattr (the bytes GETSTRIPE gives); absent: not placed yet. */
static int la_record_file_layout(const char *path, void *buf, size_t cap,
				 uint32_t *osts, int max, uint64_t *stripe_size)
{
	ssize_t n = lgetxattr(path, LA_DIR_DEFAULT_XATTR, buf, cap);

	if (n < 0)
		return errno == ENODATA ? 0 : -1;
	return la_parse_file_layout(buf, (size_t)n, osts, max, stripe_size);
}

const struct la_backend la_backend_record = {
	.name = "record",
	.create = la_record_create,
	.read_back = la_record_read_back,
	.dir_default = la_record_dir_default,
	.file_layout = la_record_file_layout,
};

/*
 * lustre_model.c - a stand-in for a Lustre client mount, at the seam the
 * shim uses (open, statfs, the layout ioctls, write), for tests only.
 *
 * LD_PRELOAD it after the shim ("liblustre_alloc.so liblustre_model.so"):
 * every directory under LUSTRE_MODEL_ROOT then reads as Lustre, and the
 * rules below, each restated from lustre-release (file, function), decide
 * what a create, a SETSTRIPE, a GETSTRIPE and a write do.  The rules and
 * their sources are listed in docs/reference/lustre-semantics.md; each has a
 * test in tests/client/test_lustre_model.py.
 *
 * The OSTs' states come from the file LUSTRE_MODEL (re-read at every
 * allocation, so a test drains an OST mid-run by rewriting it):
 *   root = DIR          the mount point (required)
 *   osts = N            OST indices 0..N-1
 *   inactive = 3,5      OSP deactivated: statfs -ENOTCONN -> EREMOTEIO
 *   nocreate = 7        max_create_count=0: OS_STATFS_NOCREATE -> ENOBUFS
 *   enospc = 9          OS_STATFS_ENOSPC -> ENOSPC
 *   readonly = 11       OS_STATFS_READONLY -> EROFS
 *   client = 2.15.0     a directory GETSTRIPE falls back to the root's
 *                       default from 2.13.51 on (llite/dir.c)
 *   default_count = 1   lov.stripecount (the LOD default, lod_xattr_get)
 *   default_size = 4194304  lov.stripesize (4 MiB from 2.16.0,
 *                       LOV_DESC_STRIPE_SIZE_DEFAULT)
 *   append_count = 1    mdd.*.append_stripe_count (mdd_device.c)
 *   root_squash = 1     mdt.*.root_squash: root's opens are permission
 *                       checked like a user's (the tests run as root)
 *   pool.NAME = 0,1     OST pools
 *
 * State lives in user xattrs: LM_LOV holds a file's layout or a
 * directory's default, as GETSTRIPE returns them; LM_EMPTY marks a file
 * whose layout is not instantiated.  What the stand-in does not model:
 * Lustre's allocation order (a default layout starts at inode % usable,
 * then round-robin over usable OSTs; the simulator restates RR/QOS).  A
 * descriptor opened empty whose file gets a layout some other way is
 * refreshed by its next write (llite's layout lock).  stdio's internal
 * writes are not seen by the PFL rule (they bypass write(2)'s symbol).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../lustre_layout_abi.h"

#define LM_LOV "user.lustre_model.lov"
#define LM_EMPTY "user.lustre_model.empty"
#define LM_MAX_OSTS 4096
#define LM_BUF 65536
#define LM_LOV_MAGIC_SEL 0x0BD80BD0u /* lustre_user.h LOV_USER_MAGIC_SEL */
#define LM_DELAY (O_NOCTTY | FASYNC) /* O_LOV_DELAY_CREATE */

enum { OST_OK, OST_INACTIVE, OST_NOCREATE, OST_ENOSPC, OST_READONLY };

struct lm_state {
	char root[PATH_MAX];
	int osts;
	unsigned char st[LM_MAX_OSTS];
	int client_ge_21351;
	uint32_t default_count, default_size, append_count;
	int root_squash;
	char pools[16][LA_LOV_MAXPOOLNAME + 1];
	unsigned char member[16][LM_MAX_OSTS];
	int npools;
};

static int (*real_openat)(int, const char *, int, ...);
static int (*real_ioctl)(int, unsigned long, ...);
static int (*real_close)(int);
static int (*real_fstatfs)(int, struct statfs *);
static int (*real_statfs)(const char *, struct statfs *);
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);

/* Descriptors opened empty: the application's number -> the writable
 * descriptor kept aside until the layout is instantiated. */
#define LM_FDS 4096
static int lm_stash[LM_FDS];
static char lm_root[PATH_MAX];
static size_t lm_rootlen;

__attribute__((constructor)) static void lm_init(void)
{
	const char *cfg = getenv("LUSTRE_MODEL");
	FILE *f;
	char line[1024];

	real_openat = dlsym(RTLD_NEXT, "openat");
	real_ioctl = dlsym(RTLD_NEXT, "ioctl");
	real_close = dlsym(RTLD_NEXT, "close");
	real_fstatfs = dlsym(RTLD_NEXT, "fstatfs");
	real_statfs = dlsym(RTLD_NEXT, "statfs");
	real_write = dlsym(RTLD_NEXT, "write");
	real_pwrite = dlsym(RTLD_NEXT, "pwrite");
	real_writev = dlsym(RTLD_NEXT, "writev");
	if (!cfg || !(f = fopen(cfg, "r")))
		return;
	while (fgets(line, sizeof(line), f)) {
		char raw[PATH_MAX];

		if (sscanf(line, " root = %4095s", raw) == 1 &&
		    realpath(raw, lm_root))
			lm_rootlen = strlen(lm_root);
	}
	fclose(f);
}

static void lm_list(const char *v, unsigned char *out, unsigned char mark)
{
	char *end;

	while (*v) {
		long i = strtol(v, &end, 10);

		if (end == v)
			break;
		if (i >= 0 && i < LM_MAX_OSTS)
			out[i] = mark;
		v = *end == ',' ? end + 1 : end;
	}
}

static void lm_read_state(struct lm_state *s)
{
	const char *cfg = getenv("LUSTRE_MODEL");
	char line[8192], key[64], val[8000];
	FILE *f;

	memset(s, 0, sizeof(*s));
	s->client_ge_21351 = 1;
	s->default_count = 1;
	s->default_size = 4u << 20;
	s->append_count = 1;
	if (!cfg || !(f = fopen(cfg, "r")))
		return;
	while (fgets(line, sizeof(line), f)) {
		val[0] = '\0';
		if (sscanf(line, " %63[^ =] = %7999[^\n]", key, val) < 1)
			continue;
		if (!strcmp(key, "osts"))
			s->osts = atoi(val) < LM_MAX_OSTS ? atoi(val) : LM_MAX_OSTS;
		else if (!strcmp(key, "inactive"))
			lm_list(val, s->st, OST_INACTIVE);
		else if (!strcmp(key, "nocreate"))
			lm_list(val, s->st, OST_NOCREATE);
		else if (!strcmp(key, "enospc"))
			lm_list(val, s->st, OST_ENOSPC);
		else if (!strcmp(key, "readonly"))
			lm_list(val, s->st, OST_READONLY);
		else if (!strcmp(key, "client")) {
			int a = 0, b = 0, c = 0;

			sscanf(val, "%d.%d.%d", &a, &b, &c);
			s->client_ge_21351 = a * 10000 + b * 100 + c >= 21351;
		} else if (!strcmp(key, "default_count"))
			s->default_count = (uint32_t)atoi(val);
		else if (!strcmp(key, "default_size"))
			s->default_size = (uint32_t)atol(val);
		else if (!strcmp(key, "root_squash"))
			s->root_squash = atoi(val) != 0;
		else if (!strcmp(key, "append_count"))
			s->append_count = (uint32_t)atoi(val);
		else if (!strncmp(key, "pool.", 5) && s->npools < 16) {
			snprintf(s->pools[s->npools], LA_LOV_MAXPOOLNAME + 1,
				 "%.15s", key + 5);
			lm_list(val, s->member[s->npools], 1);
			s->npools++;
		}
	}
	fclose(f);
}

/* Is the open descriptor fd (or the path) inside the modelled mount? */
static int lm_fd_path(int fd, char *out)
{
	char link[64];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, out, PATH_MAX - 1);
	if (n < 0)
		return -1;
	out[n] = '\0';
	return 0;
}

static int lm_under_root(const char *p)
{
	return lm_rootlen && strncmp(p, lm_root, lm_rootlen) == 0 &&
	       (p[lm_rootlen] == '/' || p[lm_rootlen] == '\0');
}

static int lm_fd_in_mount(int fd)
{
	char p[PATH_MAX];

	return lm_rootlen && lm_fd_path(fd, p) == 0 && lm_under_root(p);
}

/* ---- allocation: lod_qos.c ---- */

/* lod_statfs_check() and lod_statfs_and_check(): why an OST takes no new
 * object, as the errno SETSTRIPE returns. */
static int lm_ost_errno(const struct lm_state *s, uint32_t idx)
{
	switch (s->st[idx]) {
	case OST_INACTIVE: return EREMOTEIO; /* -ENOTCONN -> -EREMOTEIO */
	case OST_ENOSPC: return ENOSPC;
	case OST_READONLY: return EROFS;
	case OST_NOCREATE: return ENOBUFS;
	}
	return 0;
}

static int lm_pool_index(const struct lm_state *s, const char *pool)
{
	int i;

	for (i = 0; pool && *pool && i < s->npools; i++)
		if (!strncmp(s->pools[i], pool, LA_LOV_MAXPOOLNAME))
			return i;
	return -1; /* lod_find_pool() NULL: every OST */
}

/* The objects of one plain blob (v1/v3/SPECIFIC) into out; its size or
 * -errno.  lod_alloc_ost_list() for SPECIFIC: all or nothing, in list
 * order; otherwise a stripe count of the usable OSTs (a count above them is
 * reduced, none usable: -ENOSPC, as lod_alloc_rr()). */
static ssize_t lm_instantiate_blob(const struct lm_state *s, const void *blob,
				   size_t len, const struct la_lov_user_md_v1 *dflt,
				   unsigned long seed, unsigned char *out)
{
	struct la_lov_user_md_v3 h;
	uint32_t magic;
	size_t hdr;
	int count, i, j, pool = -1;
	unsigned char used[LM_MAX_OSTS];
	struct la_lov_user_ost_data_v1 *obj;

	if (len < sizeof(struct la_lov_user_md_v1))
		return -EINVAL;
	memcpy(&magic, blob, 4);
	hdr = magic == LA_LOV_USER_MAGIC_V1 ? sizeof(struct la_lov_user_md_v1)
					   : sizeof(struct la_lov_user_md_v3);
	if ((magic != LA_LOV_USER_MAGIC_V1 && magic != LA_LOV_USER_MAGIC_V3 &&
	     magic != LA_LOV_USER_MAGIC_SPECIFIC) || len < hdr)
		return -EINVAL;
	memset(&h, 0, sizeof(h));
	memcpy(&h, blob, hdr);
	memcpy(out, &h, hdr);
	obj = (void *)(out + hdr);
	if (magic != LA_LOV_USER_MAGIC_V1)
		pool = lm_pool_index(s, h.lmm_pool_name);
	memset(used, 0, sizeof(used));
	if (magic == LA_LOV_USER_MAGIC_SPECIFIC) {
		const struct la_lov_user_ost_data_v1 *want =
			(const void *)((const char *)blob + hdr);

		count = h.lmm_stripe_count;
		if (count < 1 || len < hdr + count * sizeof(*want))
			return -EINVAL;
		for (i = 0; i < count; i++) {
			uint32_t idx;
			int e;

			memcpy(&idx, &want[i].l_ost_idx, 4);
			if ((int)idx >= s->osts) /* not in lod_ost_bitmap */
				return -EINVAL;
			if (used[idx]) /* lod_qos_is_tgt_used() */
				return -EINVAL;
			e = lm_ost_errno(s, idx);
			if (e)
				return -e;
			used[idx] = 1;
			memset(&obj[i], 0, sizeof(obj[i]));
			obj[i].l_ost_idx = idx;
		}
		((struct la_lov_user_md_v1 *)out)->lmm_magic =
			LA_LOV_USER_MAGIC_V3;
		/* lod_qos_parse_config() -> lod_adjust_stripe_size(): 0 is
		 * the LOD default */
		if (!h.lmm_stripe_size)
			((struct la_lov_user_md_v1 *)out)->lmm_stripe_size =
				dflt->lmm_stripe_size;
		return (ssize_t)(hdr + count * sizeof(*obj));
	}
	/* 0 count/size: the root's default (lod_need_inherit_more()) */
	count = h.lmm_stripe_count ? h.lmm_stripe_count
		: dflt->lmm_stripe_count ? dflt->lmm_stripe_count : 1;
	if (!h.lmm_stripe_size)
		((struct la_lov_user_md_v1 *)out)->lmm_stripe_size =
			dflt->lmm_stripe_size;
	{
		int usable[LM_MAX_OSTS], n = 0, start;

		for (i = 0; i < s->osts; i++)
			if (!lm_ost_errno(s, (uint32_t)i) &&
			    (pool < 0 || s->member[pool][i]))
				usable[n++] = i;
		if (n == 0)
			return -ENOSPC;
		if (count == 0xffff || count > n)
			count = n;
		start = (int)(seed % (unsigned long)n);
		if (h.lmm_stripe_offset != LA_LOV_OFFSET_DEFAULT) {
			if (h.lmm_stripe_offset >= s->osts)
				return -EINVAL;
			for (j = 0; j < n && usable[j] != h.lmm_stripe_offset; j++)
				;
			start = j < n ? j : start;
		}
		for (i = 0; i < count; i++) {
			memset(&obj[i], 0, sizeof(obj[i]));
			obj[i].l_ost_idx = (uint32_t)usable[(start + i) % n];
		}
	}
	((struct la_lov_user_md_v1 *)out)->lmm_stripe_count = (uint16_t)count;
	return (ssize_t)(hdr + count * sizeof(*obj));
}

/* A composite layout: every component with ext->start < upto (and not yet
 * instantiated) gets objects (lod_declare_instantiate_components()); a
 * self-extending extension component never has objects.  Returns the new
 * size or -errno; *changed says whether anything was instantiated. */
static ssize_t lm_instantiate_comp(const struct lm_state *s, const void *in,
				   size_t len, uint64_t from, uint64_t upto,
				   const struct la_lov_user_md_v1 *dflt,
				   unsigned long seed, unsigned char *out,
				   int *changed)
{
	struct la_lov_comp_md_v1 h;
	size_t off;
	int i;

	if (len < sizeof(h))
		return -EINVAL;
	memcpy(&h, in, sizeof(h));
	off = sizeof(h) + h.lcm_entry_count * sizeof(struct la_lov_comp_md_entry_v1);
	if (h.lcm_entry_count < 1 || off > len || h.lcm_size > len)
		return -EINVAL;
	memcpy(out, in, off);
	for (i = 0; i < h.lcm_entry_count; i++) {
		struct la_lov_comp_md_entry_v1 e;
		const unsigned char *blob;
		ssize_t n;

		memcpy(&e, (const char *)in + sizeof(h) + i * sizeof(e), sizeof(e));
		if (e.lcme_offset > len || e.lcme_size > len - e.lcme_offset)
			return -EINVAL;
		blob = (const unsigned char *)in + e.lcme_offset;
		if (!(e.lcme_flags & (LA_LCME_FL_INIT | LA_LCME_FL_EXTENSION)) &&
		    e.lcme_start < upto && e.lcme_end > from) {
			n = lm_instantiate_blob(s, blob, e.lcme_size, dflt,
						seed + i, out + off);
			if (n < 0)
				return n;
			e.lcme_flags |= LA_LCME_FL_INIT;
			*changed = 1;
		} else {
			memcpy(out + off, blob, e.lcme_size);
			n = e.lcme_size;
		}
		e.lcme_offset = (uint32_t)off;
		e.lcme_size = (uint32_t)n;
		memcpy(out + sizeof(h) + i * sizeof(e), &e, sizeof(e));
		off += (size_t)n;
	}
	h.lcm_magic = LA_LOV_USER_MAGIC_COMP_V1; /* lod_xattr_get(): SEL read as COMP_V1 */
	h.lcm_size = (uint32_t)off;
	memcpy(out, &h, sizeof(h));
	return (ssize_t)off;
}

/* ---- defaults ---- */

/* The LOD default, as lod_xattr_get() returns it for a root without its
 * own: lov_user_md_v1 with lov.stripecount and lov.stripesize. */
static ssize_t lm_lod_default(const struct lm_state *s, void *buf)
{
	struct la_lov_user_md_v1 v1;

	memset(&v1, 0, sizeof(v1));
	v1.lmm_magic = LA_LOV_USER_MAGIC_V1;
	v1.lmm_pattern = LA_LOV_PATTERN_RAID0;
	v1.lmm_stripe_size = s->default_size;
	v1.lmm_stripe_count = (uint16_t)s->default_count;
	v1.lmm_stripe_offset = LA_LOV_OFFSET_DEFAULT;
	memcpy(buf, &v1, sizeof(v1));
	return sizeof(v1);
}

static ssize_t lm_root_default(const struct lm_state *s, void *buf)
{
	ssize_t n = getxattr(lm_root, LM_LOV, buf, LM_BUF);

	return n > 0 ? n : lm_lod_default(s, buf);
}

/* The default a new file in directory dir gets: the directory's, else the
 * root's (lod_ah_init(): lod_md_root). */
static ssize_t lm_effective_default(const struct lm_state *s, const char *dir,
				    void *buf)
{
	ssize_t n = getxattr(dir, LM_LOV, buf, LM_BUF);

	return n > 0 ? n : lm_root_default(s, buf);
}

/* Give the file (open descriptor fd, path p) its layout from lum (len
 * bytes); 0 or -errno.  The descriptor kept aside replaces the empty one. */
static int lm_set_layout(int fd, const char *p, const void *lum, size_t len)
{
	static __thread unsigned char out[LM_BUF];
	static __thread unsigned char dflt[LM_BUF];
	struct la_lov_user_md_v1 root1;
	struct lm_state s;
	struct stat st;
	uint32_t magic;
	ssize_t n;
	int changed = 0;

	lm_read_state(&s);
	if (stat(p, &st) != 0)
		return -errno;
	memset(&root1, 0, sizeof(root1));
	if (lm_root_default(&s, dflt) >= (ssize_t)sizeof(root1))
		memcpy(&root1, dflt, sizeof(root1));
	memcpy(&magic, lum, 4);
	if (magic == LA_LOV_USER_MAGIC_COMP_V1 || magic == LM_LOV_MAGIC_SEL)
		n = lm_instantiate_comp(&s, lum, len, 0, 1, &root1, st.st_ino,
					out, &changed);
	else
		n = lm_instantiate_blob(&s, lum, len, &root1, st.st_ino, out);
	if (n < 0)
		return (int)n;
	if (setxattr(p, LM_LOV, out, (size_t)n, 0) != 0)
		return -errno;
	removexattr(p, LM_EMPTY);
	if (fd >= 0 && fd < LM_FDS && lm_stash[fd] > 0) {
		dup3(lm_stash[fd], fd, fcntl(fd, F_GETFD) & FD_CLOEXEC ? O_CLOEXEC : 0);
		real_close(lm_stash[fd]);
		lm_stash[fd] = 0;
	}
	return 0;
}

/* ---- open: llite + mdt_open.c ---- */

static int lm_after_open(int fd, int flags, int via_fd_link, int created)
{
	static __thread unsigned char buf[LM_BUF];
	char p[PATH_MAX], dir[PATH_MAX], *slash;
	struct stat st;
	struct lm_state s;
	int has_lov, empty, rc;

	if (fd < 0 || !lm_rootlen || (flags & O_PATH) || fstat(fd, &st) != 0 ||
	    !S_ISREG(st.st_mode) ||
	    lm_fd_path(fd, p) != 0 || !lm_under_root(p))
		return fd;
	has_lov = fgetxattr(fd, LM_LOV, NULL, 0) > 0;
	empty = fgetxattr(fd, LM_EMPTY, NULL, 0) >= 0;
	if (has_lov)
		return fd;
	/* llite/file.c ll_file_open(): an open of an inode this process
	 * already holds open for write, reached without a lookup (a
	 * /proc/self/fd link), reuses the write open handle (och_usecount):
	 * no MDS open, so no layout is made, and the descriptor stays
	 * unwritable (seen on Lustre 2.17.0) */
	if (via_fd_link && empty)
		goto empty_layout;
	/* md_should_create() (lustre_mds.h): an open for write without
	 * MDS_OPEN_DELAY_CREATE instantiates the default layout
	 * (mdt_mfd_open() -> mdt_create_data()) */
	if ((flags & LM_DELAY) != LM_DELAY && (flags & O_ACCMODE) != O_RDONLY) {
		lm_read_state(&s);
		snprintf(dir, sizeof(dir), "%s", p);
		slash = strrchr(dir, '/');
		*slash = '\0';
		rc = lm_effective_default(&s, dir, buf);
		/* mdd_object.c mdd_object_make_hint(): an O_APPEND create
		 * gets append_stripe_count stripes, a plain layout
		 * (lod_object.c lod_ah_init()) */
		if (rc > 0 && (flags & O_APPEND) && (flags & O_CREAT) &&
		    s.append_count) {
			struct la_lov_user_md_v1 v1;

			lm_lod_default(&s, &v1);
			v1.lmm_stripe_count = (uint16_t)s.append_count;
			memcpy(buf, &v1, sizeof(v1));
			rc = sizeof(v1);
		}
		rc = rc > 0 ? lm_set_layout(-1, p, buf, (size_t)rc) : -EINVAL;
		if (rc != 0) {
			/* mdt_reint_open(): a create whose layout fails is
			 * undone, no file is left (seen on 2.17.0: dd with
			 * every OST drained, ENOSPC) */
			if (created)
				unlink(p);
			real_close(fd);
			errno = -rc;
			return -1;
		}
		return fd;
	}
empty_layout:
	if (!empty)
		fsetxattr(fd, LM_EMPTY, "1", 1, 0);
	/* An empty layout: lov_io_init_empty() fails CIT_WRITE with -EBADF
	 * and reads see nothing.  The descriptor handed back is read-only (the
	 * kernel then refuses every write with EBADF, stdio's too); the
	 * writable one waits until a SETSTRIPE gives the file a layout. */
	if ((flags & O_ACCMODE) != O_RDONLY && fd < LM_FDS) {
		char self[64];
		int ro, keep = fcntl(fd, F_DUPFD_CLOEXEC, 512);

		snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
		ro = real_openat(AT_FDCWD, self, O_RDONLY | O_CLOEXEC);
		if (keep < 0 || ro < 0) {
			if (keep >= 0)
				real_close(keep);
			if (ro >= 0)
				real_close(ro);
			return fd;
		}
		dup3(ro, fd, (flags & O_CLOEXEC) ? O_CLOEXEC : 0);
		real_close(ro);
		if (lm_stash[fd] > 0)
			real_close(lm_stash[fd]);
		lm_stash[fd] = keep;
	}
	return fd;
}

static int lm_openat(int dirfd, const char *path, int flags, mode_t mode)
{
	struct stat st;
	int fd, created;

	if (!real_openat)
		lm_init();
	created = (flags & O_CREAT) &&
		  fstatat(dirfd, path, &st, AT_SYMLINK_NOFOLLOW) != 0;
	fd = real_openat(dirfd, path, flags & ~(lm_rootlen ? FASYNC : 0), mode);
	return lm_after_open(fd, flags, !strncmp(path, "/proc/self/fd/", 14),
			     created);
}

#define LM_MODE(flags, mode)                                       \
	do {                                                       \
		if ((flags) & (O_CREAT | __O_TMPFILE)) {           \
			va_list ap;                                \
			va_start(ap, flags);                       \
			mode = (mode_t)va_arg(ap, int);            \
			va_end(ap);                                \
		}                                                  \
	} while (0)

int openat(int dirfd, const char *path, int flags, ...)
{
	mode_t mode = 0;

	LM_MODE(flags, mode);
	return lm_openat(dirfd, path, flags, mode);
}
int openat64(int dirfd, const char *path, int flags, ...)
	__attribute__((alias("openat")));
int open(const char *path, int flags, ...)
{
	mode_t mode = 0;

	LM_MODE(flags, mode);
	return lm_openat(AT_FDCWD, path, flags, mode);
}
int open64(const char *path, int flags, ...) __attribute__((alias("open")));
int __open_2(const char *path, int flags) { return lm_openat(AT_FDCWD, path, flags, 0); }
int __open64_2(const char *path, int flags) __attribute__((alias("__open_2")));
int __openat_2(int dirfd, const char *path, int flags)
{
	return lm_openat(dirfd, path, flags, 0);
}
int creat(const char *path, mode_t mode)
{
	return lm_openat(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode);
}
int creat64(const char *path, mode_t mode) __attribute__((alias("creat")));

int close(int fd)
{
	if (!real_close)
		lm_init();
	if (fd >= 0 && fd < LM_FDS && lm_stash[fd] > 0) {
		real_close(lm_stash[fd]);
		lm_stash[fd] = 0;
	}
	return real_close(fd);
}

/* ---- statfs: the mount reads as Lustre (LL_SUPER_MAGIC) ---- */

int fstatfs(int fd, struct statfs *sf)
{
	int rc;

	if (!real_fstatfs)
		lm_init();
	rc = real_fstatfs(fd, sf);
	if (rc == 0 && lm_fd_in_mount(fd))
		sf->f_type = LA_LL_SUPER_MAGIC;
	return rc;
}
int fstatfs64(int fd, struct statfs64 *sf)
{
	/* on 64-bit Linux struct statfs64 is struct statfs */
	return fstatfs(fd, (struct statfs *)sf);
}

int statfs(const char *path, struct statfs *sf)
{
	char p[PATH_MAX];
	int rc;

	if (!real_statfs)
		lm_init();
	rc = real_statfs(path, sf);
	if (rc == 0 && realpath(path, p) && lm_under_root(p))
		sf->f_type = LA_LL_SUPER_MAGIC;
	return rc;
}
int statfs64(const char *path, struct statfs64 *sf)
{
	return statfs(path, (struct statfs *)sf);
}

/* ---- the layout ioctls: llite/file.c, llite/dir.c ---- */

static size_t lm_lum_len(const void *lum)
{
	uint32_t magic;

	memcpy(&magic, lum, 4);
	if (magic == LA_LOV_USER_MAGIC_COMP_V1 || magic == LM_LOV_MAGIC_SEL) {
		struct la_lov_comp_md_v1 h;

		memcpy(&h, lum, sizeof(h));
		return h.lcm_size < LM_BUF ? h.lcm_size : 0;
	}
	if (magic == LA_LOV_USER_MAGIC_V1)
		return sizeof(struct la_lov_user_md_v1);
	if (magic == LA_LOV_USER_MAGIC_V3)
		return sizeof(struct la_lov_user_md_v3);
	if (magic == LA_LOV_USER_MAGIC_SPECIFIC) {
		struct la_lov_user_md_v3 h;

		memcpy(&h, lum, sizeof(h));
		return sizeof(h) + h.lmm_stripe_count *
				   sizeof(struct la_lov_user_ost_data_v1);
	}
	return 0;
}

/* LUSTRE_MODEL_CALLS=FILE: one line per layout ioctl on a file ("SETSTRIPE
 * path", "GETSTRIPE path"), for tests that count what a create asks of the
 * MDS (on Lustre a GETSTRIPE may cost a layout lock enqueue). */
static void lm_log_call(const char *what, const char *p, const struct stat *st)
{
	const char *log = getenv("LUSTRE_MODEL_CALLS");
	char line[PATH_MAX + 32];
	int fd, n;

	if (!log || !*log || S_ISDIR(st->st_mode))
		return;
	n = snprintf(line, sizeof(line), "%s %s\n", what, p);
	fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	if (n > 0 && write(fd, line, (size_t)n) < 0)
		n = 0;
	real_close(fd);
}

/* llite/file.c ll_lov_setstripe(): after a successful SETSTRIPE, lmm_stripe_count
 * is zeroed, the layout refreshed and ll_file_getstripe() writes it into the
 * caller's buffer, at most the request's size; lov_pack.c lov_getstripe():
 * for a v1/v3 request only the header (its size at stripe count 0), for any
 * other magic (SPECIFIC, COMP_V1) the whole layout up to that size (2.15.8
 * and 2.17.0). */
static void lm_setstripe_answer(const char *p, void *lum, size_t len)
{
	static __thread unsigned char buf[LM_BUF];
	ssize_t n = getxattr(p, LM_LOV, buf, sizeof(buf));
	uint32_t magic;

	if (n <= 0)
		return;
	memcpy(&magic, lum, 4);
	if (magic == LA_LOV_USER_MAGIC_V1 || magic == LA_LOV_USER_MAGIC_V3) {
		uint32_t got;

		memcpy(&got, buf, 4);
		if (got != LA_LOV_USER_MAGIC_V1 && got != LA_LOV_USER_MAGIC_V3)
			return; /* a composite result: lov_getstripe() picks a component */
		len = magic == LA_LOV_USER_MAGIC_V1 ? sizeof(struct la_lov_user_md_v1)
						    : sizeof(struct la_lov_user_md_v3);
	}
	memcpy(lum, buf, (size_t)n < len ? (size_t)n : len);
}

static int lm_setstripe(int fd, void *lum)
{
	char p[PATH_MAX];
	struct stat st;
	size_t len = lm_lum_len(lum);
	int rc;

	if (!len)
		return -EINVAL;
	if (lm_fd_path(fd, p) != 0 || fstat(fd, &st) != 0)
		return -EBADF;
	lm_log_call("SETSTRIPE", p, &st);
	if (S_ISDIR(st.st_mode)) {
		uint32_t magic;

		/* llite/dir.c LL_IOC_LOV_SETSTRIPE: a directory takes a
		 * v1/v3 default only (EOPNOTSUPP; 2.17.0); lfs sets a
		 * composite one through the lustre.lov xattr */
		memcpy(&magic, lum, 4);
		if (magic != LA_LOV_USER_MAGIC_V1 &&
		    magic != LA_LOV_USER_MAGIC_V3)
			return -EOPNOTSUPP;
		return setxattr(p, LM_LOV, lum, len, 0) == 0 ? 0 : -errno;
	}
	/* mdt_open.c, mdt_open_by_fid_lock(): "We should not change file's
	 * existing LOV EA" */
	if (getxattr(p, LM_LOV, NULL, 0) > 0)
		return -EEXIST;
	/* mdt_open.c mdt_reint_open(): SETSTRIPE is an MDS open for write
	 * that makes the layout before its permission check, so on a file
	 * without owner write (0444) a user gets EACCES with the layout made;
	 * the client never refreshes it (llite/file.c ll_lov_setstripe():
	 * ll_layout_refresh() only on success): GETSTRIPE on this descriptor
	 * answers ENODATA until a write refreshes it (seen on 2.17.0) */
	if (!(st.st_mode & S_IWUSR)) {
		struct lm_state s;

		lm_read_state(&s);
		if (geteuid() != 0 || s.root_squash) {
			rc = lm_set_layout(-1, p, lum, len);
			return rc ? rc : -EACCES;
		}
	}
	rc = lm_set_layout(fd, p, lum, len);
	if (rc == 0)
		lm_setstripe_answer(p, lum, len);
	return rc;
}

static int lm_getstripe(int fd, void *arg)
{
	static __thread unsigned char buf[LM_BUF];
	char p[PATH_MAX];
	struct stat st;
	struct lm_state s;
	ssize_t n;

	if (lm_fd_path(fd, p) != 0 || fstat(fd, &st) != 0)
		return -EBADF;
	lm_log_call("GETSTRIPE", p, &st);
	/* a descriptor still waiting for its layout (never refreshed) */
	if (fd < LM_FDS && lm_stash[fd] > 0)
		return -ENODATA;
	n = getxattr(p, LM_LOV, buf, sizeof(buf));
	if (n <= 0 && S_ISDIR(st.st_mode)) {
		lm_read_state(&s);
		/* lod_xattr_get(): the root always answers (the LOD default);
		 * ll_dir_getstripe_default() (2.13.51+, LU-11656): a
		 * directory without its own default answers the root's */
		if (strcmp(p, lm_root) == 0 || s.client_ge_21351)
			n = lm_root_default(&s, buf);
	}
	if (n <= 0)
		return -ENODATA;
	if (n >= 4) {
		uint32_t magic;

		memcpy(&magic, buf, 4);
		if (magic == LM_LOV_MAGIC_SEL) {
			magic = LA_LOV_USER_MAGIC_COMP_V1;
			memcpy(buf, &magic, 4);
		}
	}
	memcpy(arg, buf, (size_t)n);
	return 0;
}

int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	void *arg;
	int rc;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (!real_ioctl)
		lm_init();
	if ((req == LA_LL_IOC_LOV_SETSTRIPE || req == LA_LL_IOC_LOV_GETSTRIPE) &&
	    lm_fd_in_mount(fd)) {
		rc = req == LA_LL_IOC_LOV_SETSTRIPE ? lm_setstripe(fd, arg)
						    : lm_getstripe(fd, arg);
		if (rc < 0) {
			errno = -rc;
			return -1;
		}
		return 0;
	}
	return real_ioctl(fd, req, arg);
}

/* ---- write: PFL components instantiated when I/O reaches them ---- */

/* lod_lov.c / lod_object.c lod_declare_layout_change(): a write into a
 * component without objects instantiates it then; an OST it names that
 * cannot take an object fails the write with that errno. */
static int lm_before_write(int fd, off_t off, size_t len)
{
	static __thread unsigned char in[LM_BUF], out[LM_BUF], dflt[LM_BUF];
	struct la_lov_user_md_v1 root1;
	struct lm_state s;
	char p[PATH_MAX];
	uint32_t magic;
	ssize_t n;
	int changed = 0;

	if (!lm_rootlen || len == 0)
		return 0;
	/* a descriptor opened empty whose file got a layout meanwhile: the
	 * write refreshes it (llite's layout lock, ll_layout_refresh()) */
	if (fd >= 0 && fd < LM_FDS && lm_stash[fd] > 0 &&
	    fgetxattr(lm_stash[fd], LM_LOV, NULL, 0) > 0) {
		dup3(lm_stash[fd], fd, fcntl(fd, F_GETFD) & FD_CLOEXEC ? O_CLOEXEC : 0);
		real_close(lm_stash[fd]);
		lm_stash[fd] = 0;
	}
	n = fgetxattr(fd, LM_LOV, in, sizeof(in));
	if (n < 4)
		return 0;
	memcpy(&magic, in, 4);
	if (magic != LA_LOV_USER_MAGIC_COMP_V1)
		return 0;
	if (off < 0) {
		struct stat st;

		off = (fcntl(fd, F_GETFL) & O_APPEND) && fstat(fd, &st) == 0
			      ? st.st_size : lseek(fd, 0, SEEK_CUR);
	}
	lm_read_state(&s);
	memset(&root1, 0, sizeof(root1));
	if (lm_root_default(&s, dflt) >= (ssize_t)sizeof(root1))
		memcpy(&root1, dflt, sizeof(root1));
	n = lm_instantiate_comp(&s, in, (size_t)n, (uint64_t)off,
				(uint64_t)off + len, &root1, (unsigned long)off,
				out, &changed);
	if (n < 0)
		return (int)n;
	if (changed && lm_fd_path(fd, p) == 0)
		setxattr(p, LM_LOV, out, (size_t)n, 0);
	return 0;
}

ssize_t write(int fd, const void *b, size_t n)
{
	int rc;

	if (!real_write)
		lm_init();
	if ((rc = lm_before_write(fd, -1, n)) < 0) {
		errno = -rc;
		return -1;
	}
	return real_write(fd, b, n);
}

ssize_t pwrite(int fd, const void *b, size_t n, off_t off)
{
	int rc;

	if (!real_pwrite)
		lm_init();
	if ((rc = lm_before_write(fd, off, n)) < 0) {
		errno = -rc;
		return -1;
	}
	return real_pwrite(fd, b, n, off);
}
ssize_t pwrite64(int fd, const void *b, size_t n, off_t off)
	__attribute__((alias("pwrite")));

ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	size_t n = 0;
	int i, rc;

	if (!real_writev)
		lm_init();
	for (i = 0; i < cnt; i++)
		n += iov[i].iov_len;
	if ((rc = lm_before_write(fd, -1, n)) < 0) {
		errno = -rc;
		return -1;
	}
	return real_writev(fd, iov, cnt);
}

/* ---- the lustre.lov xattr: llite/xattr.c ll_xattr_get_common(),
 * ll_setstripe_ea() ---- */
#define LM_XATTR "lustre.lov"

static ssize_t (*real_getxattr)(const char *, const char *, void *, size_t);
static ssize_t (*real_lgetxattr)(const char *, const char *, void *, size_t);
static ssize_t (*real_fgetxattr)(int, const char *, void *, size_t);
static int (*real_setxattr)(const char *, const char *, const void *, size_t, int);

/* The whole layout (a file's) or default (a directory's; a composite one
 * too), as GETSTRIPE's bytes, SEL read as COMP_V1 (lod_xattr_get()). */
static ssize_t lm_xattr_get(const char *p, void *buf, size_t size)
{
	static __thread unsigned char tmp[LM_BUF];
	ssize_t n = real_getxattr(p, LM_LOV, tmp, sizeof(tmp));
	uint32_t magic;

	if (n <= 0) {
		errno = ENODATA;
		return -1;
	}
	memcpy(&magic, tmp, 4);
	if (magic == LM_LOV_MAGIC_SEL) {
		magic = LA_LOV_USER_MAGIC_COMP_V1;
		memcpy(tmp, &magic, 4);
	}
	if (size == 0)
		return n;
	if ((size_t)n > size) {
		errno = ERANGE;
		return -1;
	}
	memcpy(buf, tmp, (size_t)n);
	return n;
}

static void lm_xattr_init(void)
{
	if (!real_getxattr) {
		real_getxattr = dlsym(RTLD_NEXT, "getxattr");
		real_lgetxattr = dlsym(RTLD_NEXT, "lgetxattr");
		real_fgetxattr = dlsym(RTLD_NEXT, "fgetxattr");
		real_setxattr = dlsym(RTLD_NEXT, "setxattr");
	}
}

ssize_t getxattr(const char *path, const char *name, void *buf, size_t size)
{
	char p[PATH_MAX];

	lm_xattr_init();
	if (!strcmp(name, LM_XATTR) && realpath(path, p) && lm_under_root(p))
		return lm_xattr_get(p, buf, size);
	return real_getxattr(path, name, buf, size);
}

ssize_t lgetxattr(const char *path, const char *name, void *buf, size_t size)
{
	char p[PATH_MAX];

	lm_xattr_init();
	if (!strcmp(name, LM_XATTR) && realpath(path, p) && lm_under_root(p))
		return lm_xattr_get(p, buf, size);
	return real_lgetxattr(path, name, buf, size);
}

ssize_t fgetxattr(int fd, const char *name, void *buf, size_t size)
{
	char p[PATH_MAX];

	lm_xattr_init();
	if (!strcmp(name, LM_XATTR) && lm_fd_path(fd, p) == 0 && lm_under_root(p))
		return lm_xattr_get(p, buf, size);
	return real_fgetxattr(fd, name, buf, size);
}

/* Setting a directory's default (any layout, composite too: what lfs
 * setstripe -E ... DIR does). */
int setxattr(const char *path, const char *name, const void *value,
	     size_t size, int flags)
{
	char p[PATH_MAX];
	struct stat st;

	lm_xattr_init();
	if (!strcmp(name, LM_XATTR) && realpath(path, p) && lm_under_root(p) &&
	    stat(p, &st) == 0 && S_ISDIR(st.st_mode))
		return real_setxattr(p, LM_LOV, value, size, 0);
	return real_setxattr(path, name, value, size, flags);
}

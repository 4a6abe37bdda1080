/*
 * la_paths.c - which creations the shim touches, and where they land.
 *
 * The parent directory of the caller's path is opened with O_PATH: the
 * kernel resolves it (symbolic links, "..", the caller's dirfd) exactly as
 * the create will, so "dir/lnk/../f" is checked and recorded where it
 * really lands, and the create itself is made relative to that descriptor.
 * The absolute path (for LUSTRE_ALLOC_PATHS and the record) is the
 * kernel's name of that directory (/proc/self/fd/N) plus the last
 * component.
 *
 * A path is eligible when its directory is on Lustre (fstatfs f_type ==
 * LL_SUPER_MAGIC) or, when LUSTRE_ALLOC_PATHS is set, when it lies under
 * one of those prefixes (and then only there).  The file system type and
 * the directory's default layout are cached per directory (by the kernel's
 * name of it, up to LA_DIRKEY_MAX bytes; longer ones are not cached) for
 * LUSTRE_ALLOC_CACHE_S seconds, so an "lfs setstripe -d" on a directory
 * during a run is seen after at most that long.  The cache is lock-free:
 * a slot busy in another thread (or in the code a signal interrupted) is
 * simply bypassed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "la_internal.h"

#define LA_DIRCACHE_SLOTS 64
#define LA_DIRKEY_MAX 512

struct la_dirslot {
	atomic_int busy;
	size_t dirlen;
	char dir[LA_DIRKEY_MAX];
	double expires_us;     /* 0: empty */
	struct la_dirinfo info;
	struct la_pfl pfl;     /* info.pfl_ok: the composite default */
};

static struct la_dirslot la_dircache[LA_DIRCACHE_SLOTS];
static _Atomic uint64_t la_dircache_used; /* bit i: slot i was ever taken */
_Static_assert(LA_DIRCACHE_SLOTS <= 64, "one bit per slot");

int la_target_open(int dirfd, const char *path, struct la_work *w,
		   struct la_target *t)
{
	const char *slash, *base;
	size_t plen;

	t->pfd = -1;
	if (!path || !*path)
		return -1;
	slash = strrchr(path, '/');
	base = slash ? slash + 1 : path;
	/* "dir/", "." and "..": not a new regular file; open(2) decides */
	if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
		return -1;
	/* "<dir>/.", not "<dir>": the kernel then walks <dir> as an
	 * intermediate component, as the application's own open would, and
	 * never revalidates it as a last one.  On Lustre that revalidation
	 * is an MDS RPC whenever the directory's lock was cancelled, which
	 * every create in it does (llite/dcache.c ll_revalidate_dentry()
	 * trusts an intermediate component; fs/namei.c handle_dots() does not
	 * revalidate "."): 1 of the 7 RPCs a create under the shim cost on
	 * 2.17.0 (bench/lustre_vm_create_rpcs.py --variants-only). */
	if (!slash) {
		strcpy(w->parent, ".");
	} else {
		plen = slash == path ? 1 : (size_t)(slash - path);
		if (plen + 2 >= sizeof(w->parent))
			return -1;
		memcpy(w->parent, path, plen);
		if (plen == 1 && path[0] == '/')
			memcpy(w->parent + plen, ".", 2);
		else
			memcpy(w->parent + plen, "/.", 3);
	}
	t->pfd = la_real.openat(dirfd, w->parent,
				O_PATH | O_DIRECTORY | O_CLOEXEC);
	t->base = base;
	return t->pfd >= 0 ? 0 : -1;
}

int la_target_abspath(const struct la_target *t, struct la_work *w)
{
	char link[32];
	struct la_out o = { link, 0, sizeof(link) };
	struct la_out a = { w->abs, 0, sizeof(w->abs) };
	ssize_t n;

	la_put_str(&o, "/proc/self/fd/");
	la_put_i64(&o, t->pfd);
	n = readlink(link, w->abs, sizeof(w->abs) - 1);
	if (n <= 0 || w->abs[0] != '/')
		return -1; /* not reachable from our root */
	a.len = (size_t)n;
	w->abs[n] = '\0';
	if (a.len > 1)
		la_put_str(&a, "/");
	la_put_str(&a, t->base);
	return a.len + 1 < a.cap ? 0 : -1; /* cut: too long to record */
}

int la_under_paths(const char *abs)
{
	int i;

	for (i = 0; i < la_cfg.npaths; i++) {
		size_t n = la_cfg.pathlen[i];

		if (n == 0)
			return 1;
		if (strncmp(abs, la_cfg.paths[i], n) == 0 &&
		    (abs[n] == '/' || abs[n] == '\0'))
			return 1;
	}
	return 0;
}

int la_dir_is_lustre(int pfd)
{
	struct statfs sf;

	return fstatfs(pfd, &sf) == 0 &&
	       (unsigned long)sf.f_type == LA_LL_SUPER_MAGIC;
}

static struct la_dirslot *la_slot_for(const char *dir, size_t n)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	size_t i;

	for (i = 0; i < n; i++)
		h = (h ^ (unsigned char)dir[i]) * 16777619u;
	return &la_dircache[h % LA_DIRCACHE_SLOTS];
}

static int la_slot_trylock(struct la_dirslot *s)
{
	int zero = 0;

	if (!atomic_compare_exchange_strong(&s->busy, &zero, 1))
		return 0;
	atomic_fetch_or(&la_dircache_used, 1ull << (s - la_dircache));
	return 1;
}

/* The top directory of the Lustre mount dfd is on: walk ".." while the
 * parent is the same file system and Lustre.  A new descriptor, or -1. */
static int la_mount_root(int dfd)
{
	struct stat a, b;
	int cur = la_real.openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int depth;

	if (cur < 0 || fstat(cur, &a) != 0)
		goto fail;
	for (depth = 0; depth < 256; depth++) {
		int up = la_real.openat(cur, "..",
					O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (up < 0)
			goto fail;
		if (fstat(up, &b) != 0 || b.st_dev != a.st_dev ||
		    b.st_ino == a.st_ino || !la_dir_is_lustre(up)) {
			close(up);
			return cur;
		}
		close(cur);
		cur = up;
		a = b;
	}
fail:
	if (cur >= 0)
		close(cur);
	return -1;
}

/* The file system's default (the mount root's layout; a root without one
 * answers the MDT's lov.stripecount/stripesize, lod_object.c
 * lod_xattr_get()) into w->u.lum; its length, or -1. */
static ssize_t la_read_root_default(int dfd, struct la_work *w)
{
	int rfd = la_mount_root(dfd);
	ssize_t n;

	if (rfd < 0)
		return -1;
	n = la_backend_lustre.dir_default(rfd, w->u.lum, sizeof(w->u.lum));
	close(rfd);
	return n;
}

/* A composite default in w->u.lum: parsed into the workspace's pfl, or
 * marked self-extending (left to Lustre). */
static void la_take_composite(ssize_t n, struct la_work *w,
			      struct la_dirinfo *di)
{
	int rc = di->untouched ? -2
		 : la_parse_comp_default(w->u.lum, (size_t)n, &w->pfl);

	di->pfl_ok = rc == 0;
	if (rc == -2)
		di->untouched = LA_DIR_SEL;
}

/* The default a new file in this directory gets, as LOD decides it
 * (lod_object.c lod_ah_init()): the directory's own; without one, the
 * root's (clients before 2.13.51 answer ENODATA for such a directory,
 * after it the root's: llite/dir.c ll_dir_getstripe_default()); a plain
 * default's unset stripe count, size or pool come from the root's
 * (lod_need_inherit_more()).  A composite root default is parsed into the
 * workspace's pfl like a directory's. */
static void la_effective_default(int dfd, ssize_t n, struct la_work *w,
				 struct la_dirinfo *di)
{
	struct la_dirinfo root;

	if (n > 0 && la_parse_dir_default(w->u.lum, (size_t)n, di) == 0) {
		if (di->composite) {
			la_take_composite(n, w, di);
			return;
		}
		if (!di->is_lustre || di->untouched ||
		    (di->stripe_count && di->stripe_size && di->pool[0]))
			return;
		n = la_read_root_default(dfd, w);
		memset(&root, 0, sizeof(root));
		if (n > 0 &&
		    la_parse_dir_default(w->u.lum, (size_t)n, &root) == 0 &&
		    !root.composite && !root.untouched) {
			if (!di->stripe_count)
				di->stripe_count = root.stripe_count;
			if (!di->stripe_size)
				di->stripe_size = root.stripe_size;
			if (!di->pool[0])
				memcpy(di->pool, root.pool, sizeof(di->pool));
		}
		return;
	}
	if (!di->is_lustre)
		return;
	n = la_read_root_default(dfd, w);
	if (n > 0 && la_parse_dir_default(w->u.lum, (size_t)n, di) == 0 &&
	    di->composite)
		la_take_composite(n, w, di);
}

/* Read the directory's facts from the file system (no cache). */
static int la_dirinfo_read(int pfd, struct la_work *w, struct la_dirinfo *di)
{
	const struct la_backend *be;
	struct statfs sf;
	ssize_t n;
	int dfd;

	memset(di, 0, sizeof(*di));
	di->projid = -1;
	if (fstatfs(pfd, &sf) != 0)
		return -1;
	di->is_lustre = ((unsigned long)sf.f_type == LA_LL_SUPER_MAGIC);
	be = di->is_lustre ? &la_backend_lustre : &la_backend_record;
	/* the layout ioctl and xattr need a real descriptor, not O_PATH */
	dfd = la_real.openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return 0; /* unreadable directory: default unknown */
	n = be->dir_default(dfd, w->u.lum, sizeof(w->u.lum));
	{
		/* the project id a new file gets: the directory's when it
		 * passes it on (PROJINHERIT, as lfs project -s sets), else 0
		 * (ext4/ldiskfs/Lustre; FS_IOC_FSGETXATTR is what lfs project
		 * reads) */
		struct fsxattr fsx;

		if (ioctl(dfd, FS_IOC_FSGETXATTR, &fsx) == 0)
			di->projid = (fsx.fsx_xflags & FS_XFLAG_PROJINHERIT) ?
					     (int64_t)fsx.fsx_projid : 0;
	}
	la_effective_default(dfd, n, w, di);
	close(dfd);
	return 0;
}

int la_dirinfo(int pfd, const char *dir, size_t dirlen, struct la_work *w,
	       struct la_dirinfo *di)
{
	int cacheable = la_cfg.cache_s > 0 && dirlen < LA_DIRKEY_MAX;
	struct la_dirslot *s = la_slot_for(dir, dirlen);
	double now = la_now_us();

	if (cacheable && la_slot_trylock(s)) {
		int hit = s->expires_us > now && s->dirlen == dirlen &&
			  memcmp(s->dir, dir, dirlen) == 0;

		if (hit) {
			*di = s->info;
			if (di->pfl_ok)
				la_pfl_copy(&w->pfl, &s->pfl);
		}
		atomic_store(&s->busy, 0);
		if (hit)
			return 0;
	}
	if (la_dirinfo_read(pfd, w, di) != 0)
		return -1;
	if (cacheable && la_slot_trylock(s)) {
		memcpy(s->dir, dir, dirlen);
		s->dirlen = dirlen;
		s->info = *di;
		if (di->pfl_ok)
			la_pfl_copy(&s->pfl, &w->pfl);
		s->expires_us = now + la_cfg.cache_s * 1e6;
		atomic_store(&s->busy, 0);
	}
	return 0;
}

/* A slot held by a thread that does not exist in the fork child. */
void la_paths_atfork_child(void)
{
	uint64_t used = atomic_load(&la_dircache_used);
	int i;

	for (i = 0; i < LA_DIRCACHE_SLOTS; i++)
		if (used & (1ull << i))
			atomic_store(&la_dircache[i].busy, 0);
}

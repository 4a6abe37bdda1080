/*
 * test_layout_abi - unit tests of what cannot run without Lustre:
 *  - the packed structs against the sizes/offsets restated in
 *    docs/reference/lustre-client-layout-api.md,
 *  - the exact bytes the Lustre backend hands to ioctl(LL_IOC_LOV_SETSTRIPE),
 *  - the Lustre backend's create/fallback logic, driven through the one
 *    seam it has (la_lustre_ioctl) on a local filesystem,
 *  - the reply decoder, where a path really lands (O_PATH parent),
 *  - directory defaults through GETSTRIPE, the signal-safe text helpers.
 * Usage: test_layout_abi SCRATCH_DIR.  Prints one line per check; exit 0
 * when all pass.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <msgpack.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "la_internal.h"

#include "check.h"

static void test_struct_layout(void)
{
	CHECK(sizeof(struct la_lov_user_ost_data_v1) == 24);
	CHECK(offsetof(struct la_lov_user_ost_data_v1, l_ost_gen) == 16);
	CHECK(offsetof(struct la_lov_user_ost_data_v1, l_ost_idx) == 20);
	CHECK(sizeof(struct la_lov_user_md_v1) == 32);
	CHECK(offsetof(struct la_lov_user_md_v1, lmm_pattern) == 4);
	CHECK(offsetof(struct la_lov_user_md_v1, lmm_stripe_size) == 24);
	CHECK(offsetof(struct la_lov_user_md_v1, lmm_stripe_count) == 28);
	CHECK(offsetof(struct la_lov_user_md_v1, lmm_stripe_offset) == 30);
	CHECK(offsetof(struct la_lov_user_md_v1, lmm_objects) == 32);
	CHECK(sizeof(struct la_lov_user_md_v3) == 48);
	CHECK(offsetof(struct la_lov_user_md_v3, lmm_pool_name) == 32);
	CHECK(offsetof(struct la_lov_user_md_v3, lmm_objects) == 48);
	CHECK(la_lum_size(3) == 48 + 3 * 24);
	CHECK(LA_LL_IOC_LOV_SETSTRIPE == 0x4008669A);
	CHECK(LA_O_LOV_DELAY_CREATE == (O_NOCTTY | FASYNC));
}

static void put32(unsigned char *p, uint32_t v)
{
	p[0] = v & 0xff; p[1] = (v >> 8) & 0xff;
	p[2] = (v >> 16) & 0xff; p[3] = (v >> 24) & 0xff;
}

static void put16(unsigned char *p, uint16_t v)
{
	p[0] = v & 0xff; p[1] = (v >> 8) & 0xff;
}

/* Expected bytes built from the reference's offsets, not from our structs. */
static void test_lum_bytes(void)
{
	static const uint32_t osts[3] = { 3, 7, 11 };
	unsigned char want[48 + 3 * 24], got[48 + 3 * 24];
	int i;

	memset(want, 0, sizeof(want));
	put32(want + 0, 0x0BD50BD0);  /* LOV_USER_MAGIC_SPECIFIC */
	put32(want + 4, 0x1);         /* LOV_PATTERN_RAID0 */
	put32(want + 24, 1u << 20);   /* stripe size */
	put16(want + 28, 3);          /* stripe count */
	put16(want + 30, 3);          /* stripe offset = first OST */
	memcpy(want + 32, "flash", 5);
	for (i = 0; i < 3; i++)
		put32(want + 48 + 24 * i + 20, osts[i]);
	memset(got, 0xAA, sizeof(got));
	CHECK(la_build_lum(got, 1u << 20, 3, osts, "flash") == sizeof(want));
	CHECK(memcmp(got, want, sizeof(want)) == 0);
	CHECK(got[0] == 0xD0 && got[1] == 0x0B && got[2] == 0xD5 && got[3] == 0x0B);
}

/* ---- the Lustre backend through its seam ---- */
static unsigned char seen_lum[4096];
static unsigned long seen_req;
static int fake_errno;
static int fake_calls;
static const char *race_path;

#define OTHER_WRITER "rank 7 wrote this\n"

/* Another process (another MPI rank) opens the same path with O_CREAT, no
 * O_EXCL: it succeeds on the file we just created, and it writes. */
static void other_writer(const char *path)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		int fd = open(path, O_WRONLY | O_CREAT, 0666);

		_exit(fd >= 0 && write(fd, OTHER_WRITER, strlen(OTHER_WRITER)) ==
				 (ssize_t)strlen(OTHER_WRITER) && close(fd) == 0 ?
			      0 : 1);
	}
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid &&
	      WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* with fake_errno: fail the first fake_fail_calls calls (0: every one) */
static int fake_fail_calls;

/* GETSTRIPE: the file has a layout of this many stripes after a refused
 * SETSTRIPE (0: none, ENODATA as lov_object_getstripe() answers) */
static int fake_layout_after_refusal;

static int fake_ioctl(int fd, unsigned long req, void *arg)
{
	if (req == LA_LL_IOC_LOV_GETSTRIPE) {
		struct la_lov_user_md_v3 *v3 = arg;
		int i;

		if (!fake_layout_after_refusal) {
			errno = ENODATA;
			return -1;
		}
		v3->lmm_magic = LA_LOV_USER_MAGIC_V3;
		v3->lmm_stripe_count = (uint16_t)fake_layout_after_refusal;
		v3->lmm_stripe_size = 4u << 20;
		for (i = 0; i < fake_layout_after_refusal; i++)
			v3->lmm_objects[i].l_ost_idx = (uint32_t)(5 - 3 * i);
		return 0;
	}
	fake_calls++;
	seen_req = req;
	if (fcntl(fd, F_GETFD) < 0)
		return -1;
	if (race_path)
		other_writer(race_path);
	memcpy(seen_lum, arg, la_lum_size(2));
	if (fake_errno && (fake_fail_calls == 0 || fake_calls <= fake_fail_calls)) {
		errno = fake_errno;
		return -1;
	}
	return 0;
}

static void test_lustre_backend(const char *scratch)
{
	struct la_decision *d = calloc(1, sizeof(*d));
	static unsigned char lum[LA_LUM_MAX];
	struct la_outcome out;
	static uint32_t got[LA_MAX_STRIPES];
	char path[LA_PATH_MAX + 64];
	struct stat st;
	char buf0[64];
	int fd;
	/* every errno SETSTRIPE gives on Lustre, plus "not Lustre" (ENOTTY) */
	static const int setstripe_errnos[] = { EEXIST, EBUSY, ENOSPC, EDQUOT,
						EPERM, EREMOTEIO, ENODEV,
						EINVAL, ENOTTY };
	unsigned i;

	int (*orig)(int, unsigned long, void *) = la_lustre_ioctl;

	struct la_request rq = { .pool = "flash", .stripe_count = 3,
				 .stripe_size = 2u << 20 };
	struct la_request rq_none = { .pool = "", .stripe_count = 3,
				      .stripe_size = 2u << 20 };

	la_init();
	la_lustre_ioctl = fake_ioctl;
	d->ok = 1;
	d->count = 2;
	d->osts[0] = 5;
	d->osts[1] = 2;
	d->stripe_size = 4u << 20;

	snprintf(path, sizeof(path), "%s/lustre_ok", scratch);
	memset(&out, 0, sizeof(out));
	out.got = got;
	fake_errno = 0;
	fd = la_backend_lustre.create(AT_FDCWD, path, O_WRONLY | O_CREAT, 0600,
				      d, &rq, lum, &out);
	CHECK(fd >= 0);
	CHECK(out.applied == 1 && out.reason[0] == '\0');
	CHECK(seen_req == LA_LL_IOC_LOV_SETSTRIPE);
	CHECK(((struct la_lov_user_md_v3 *)seen_lum)->lmm_magic ==
	      LA_LOV_USER_MAGIC_SPECIFIC);
	CHECK(((struct la_lov_user_md_v3 *)seen_lum)->lmm_objects[1].l_ost_idx == 2);
	/* the pool (directory default's or hint's) goes into the layout */
	CHECK(!strcmp(((struct la_lov_user_md_v3 *)seen_lum)->lmm_pool_name,
		      "flash"));
	CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
	if (fd >= 0)
		close(fd);

	/* an existing file: EEXIST, no ioctl, the caller opens normally */
	fake_calls = 0;
	fd = la_backend_lustre.create(AT_FDCWD, path, O_WRONLY | O_CREAT, 0600,
				      d, &rq_none, lum, &out);
	CHECK(fd == -1 && errno == EEXIST && fake_calls == 0);

	/* a refused list: a second SETSTRIPE asks Lustre's allocator for the
	 * request's count, size and pool, no start OST */
	snprintf(path, sizeof(path), "%s/lustre_refused_once", scratch);
	memset(&out, 0, sizeof(out));
	out.got = got;
	fake_errno = ENOBUFS;
	fake_fail_calls = 1;
	fake_calls = 0;
	fd = la_backend_lustre.create(AT_FDCWD, path, O_WRONLY | O_CREAT, 0600,
				      d, &rq, lum, &out);
	CHECK(fd >= 0 && fake_calls == 2 && out.applied == 0);
	CHECK(out.refused_errno == ENOBUFS &&
	      out.recovery == LA_RECOVERED_DEFAULT);
	snprintf(buf0, sizeof(buf0), "setstripe_rejected:%d+default_layout",
		 ENOBUFS);
	CHECK(strcmp(out.reason, buf0) == 0);
	{
		struct la_lov_user_md_v3 *v3 = (void *)seen_lum;

		CHECK(v3->lmm_magic == LA_LOV_USER_MAGIC_V3 &&
		      v3->lmm_stripe_count == 3 &&
		      v3->lmm_stripe_size == (2u << 20) &&
		      v3->lmm_stripe_offset == LA_LOV_OFFSET_DEFAULT &&
		      strcmp(v3->lmm_pool_name, "flash") == 0);
	}
	if (fd >= 0)
		close(fd);
	fake_fail_calls = 0;

	for (i = 0; i < sizeof(setstripe_errnos) / sizeof(setstripe_errnos[0]);
	     i++) {
		int e = setstripe_errnos[i];
		char want[64], buf[64];
		struct stat fst;
		ssize_t n;
		int rfd;

		snprintf(path, sizeof(path), "%s/lustre_race_%d", scratch, e);
		memset(&out, 0, sizeof(out));
	out.got = got;
		fake_errno = e;
		race_path = path; /* another rank writes before the ioctl fails */
		fd = la_backend_lustre.create(AT_FDCWD, path,
					      O_RDWR | O_CREAT | O_TRUNC, 0640,
					      d, &rq_none, lum, &out);
		race_path = NULL;
		/* both SETSTRIPEs refused, no layout: the open fails as plain
		 * Lustre's would (the caller then retries the application's
		 * own open); the file another rank wrote meanwhile is kept */
		snprintf(want, sizeof(want), "setstripe_rejected:%d+removed", e);
		CHECK(fd == -1);
		CHECK(out.applied == 0 && strcmp(out.reason, want) == 0);
		CHECK(stat(path, &st) == 0 && st.st_nlink == 1 &&
		      (st.st_mode & 0777) == 0640);
		(void)fst;
		rfd = open(path, O_RDONLY);
		n = rfd >= 0 ? read(rfd, buf, sizeof(buf) - 1) : -1;
		buf[n > 0 ? n : 0] = '\0';
		CHECK(n == (ssize_t)strlen(OTHER_WRITER) &&
		      strcmp(buf, OTHER_WRITER) == 0);
		if (rfd >= 0)
			close(rfd);
		if (fd >= 0)
			close(fd);
	}

	/* both refused, nobody else touched it: removed, no file left */
	snprintf(path, sizeof(path), "%s/lustre_nowhere", scratch);
	memset(&out, 0, sizeof(out));
	out.got = got;
	fake_errno = ENOSPC;
	fd = la_backend_lustre.create(AT_FDCWD, path, O_WRONLY | O_CREAT, 0644,
				      d, &rq_none, lum, &out);
	CHECK(fd == -1 && errno == ENOSPC && out.recovery == LA_REMOVED);
	CHECK(stat(path, &st) != 0 && errno == ENOENT);
	/* a read-only create keeps its file without a layout, as Lustre */
	snprintf(path, sizeof(path), "%s/lustre_nowhere_ro", scratch);
	memset(&out, 0, sizeof(out));
	out.got = got;
	fd = la_backend_lustre.create(AT_FDCWD, path, O_RDONLY | O_CREAT, 0644,
				      d, &rq_none, lum, &out);
	snprintf(buf0, sizeof(buf0), "setstripe_rejected:%d+no_layout", ENOSPC);
	CHECK(fd >= 0 && strcmp(out.reason, buf0) == 0);
	if (fd >= 0)
		close(fd);
	/* refused after the layout was made (a 0444 create, mdt_open.c:
	 * EACCES after the layout): applied, read back, said */
	snprintf(path, sizeof(path), "%s/lustre_late", scratch);
	memset(&out, 0, sizeof(out));
	out.got = got;
	fake_errno = EACCES;
	fake_layout_after_refusal = 2;
	fake_calls = 0;
	fd = la_backend_lustre.create(AT_FDCWD, path, O_WRONLY | O_CREAT, 0444,
				      d, &rq_none, lum, &out);
	snprintf(buf0, sizeof(buf0), "setstripe_late:%d", EACCES);
	CHECK(fd >= 0 && out.applied == 1 && fake_calls == 1 &&
	      strcmp(out.reason, buf0) == 0 && out.refused_errno == 0);
	if (fd >= 0)
		close(fd);
	fake_layout_after_refusal = 0;
	/* no stripe size given by anyone: the layout carries 0 (LOD's default) */
	snprintf(path, sizeof(path), "%s/lustre_size0", scratch);
	memset(&out, 0, sizeof(out));
	out.got = got;
	fake_errno = 0;
	rq_none.stripe_size_lustre = 1;
	fd = la_backend_lustre.create(AT_FDCWD, path, O_WRONLY | O_CREAT, 0644,
				      d, &rq_none, lum, &out);
	CHECK(fd >= 0 && ((struct la_lov_user_md_v3 *)seen_lum)->lmm_stripe_size == 0);
	if (fd >= 0)
		close(fd);
	rq_none.stripe_size_lustre = 0;
	la_lustre_ioctl = orig;
	free(d);
}

/* ---- reply decoder ---- */
struct pk {
	msgpack_sbuffer sb;
	msgpack_packer p;
};

static void pk_init(struct pk *k)
{
	msgpack_sbuffer_init(&k->sb);
	msgpack_packer_init(&k->p, &k->sb, msgpack_sbuffer_write);
}

static void key(struct pk *k, const char *s)
{
	msgpack_pack_str(&k->p, strlen(s));
	msgpack_pack_str_body(&k->p, s, strlen(s));
}

static int parse_reply_with(uint64_t id, int ok, const int *osts, int n,
			    uint64_t ssize, int want_id, int want_count,
			    struct la_decision *d)
{
	struct pk k;
	int i, rc;

	pk_init(&k);
	msgpack_pack_map(&k.p, 5);
	key(&k, "v"); msgpack_pack_int(&k.p, 1);
	key(&k, "id"); msgpack_pack_uint64(&k.p, id);
	key(&k, "ok");
	if (ok) msgpack_pack_true(&k.p); else msgpack_pack_false(&k.p);
	if (ok) {
		key(&k, "osts");
		msgpack_pack_array(&k.p, (size_t)n);
		for (i = 0; i < n; i++)
			msgpack_pack_int(&k.p, osts[i]);
		key(&k, "stripe_size"); msgpack_pack_uint64(&k.p, ssize);
	} else {
		key(&k, "errno"); msgpack_pack_int(&k.p, 28);
		key(&k, "error"); msgpack_pack_nil(&k.p);
	}
	memset(d, 0, sizeof(*d));
	rc = la_parse_reply(k.sb.data, k.sb.size, (uint64_t)want_id,
			    want_count, d);
	msgpack_sbuffer_destroy(&k.sb);
	return rc;
}

static void test_reply_decoder(void)
{
	struct la_decision *d = calloc(1, sizeof(*d));
	static const int good[3] = { 4, 0, 6 }, dup[3] = { 4, 0, 4 };
	static const int neg[2] = { 1, -3 };

	CHECK(parse_reply_with(9, 1, good, 3, 1 << 20, 9, 3, d) == 0 && d->ok &&
	      d->count == 3 && d->osts[2] == 6 && d->stripe_size == 1 << 20);
	CHECK(parse_reply_with(9, 1, good, 3, 1 << 20, 8, 3, d) == 1);
	CHECK(parse_reply_with(9, 1, dup, 3, 1 << 20, 9, 3, d) == -EPROTO &&
	      !strcmp(d->reason, "mapper_garbage:osts_duplicate"));
	CHECK(parse_reply_with(9, 1, good, 3, 1 << 20, 9, 2, d) == -EPROTO &&
	      !strcmp(d->reason, "mapper_garbage:osts_count"));
	CHECK(parse_reply_with(9, 1, neg, 2, 1 << 20, 9, 2, d) == -EPROTO);
	/* clipped to the usable OSTs: fewer than asked is a valid layout */
	CHECK(parse_reply_with(9, 1, good, 3, 1 << 20, 9, 8, d) == 0 &&
	      d->ok && d->count == 3);
	CHECK(parse_reply_with(9, 1, good, 3, 1000, 9, 3, d) == -EPROTO &&
	      !strcmp(d->reason, "mapper_garbage:stripe_size"));
	CHECK(parse_reply_with(9, 0, NULL, 0, 0, 9, 3, d) == -ENOSPC &&
	      !strcmp(d->reason, "mapper_error:28"));
	CHECK(la_parse_reply("\xc1\xc1", 2, 1, 1, d) == -EPROTO && !d->ok);
	CHECK(la_parse_reply("\x93\x01\x02\x03", 4, 1, 1, d) == -EPROTO &&
	      !strcmp(d->reason, "mapper_garbage:not_a_map"));
	free(d);
}

/* Where a create really lands: the kernel resolves the parent. */
static void test_paths(const char *scratch)
{
	static struct la_work w;
	struct la_target t;
	char want[LA_PATH_MAX + 64], dir[LA_PATH_MAX + 64];
	int dfd;

	/* scratch/dir/lnk -> scratch/elsewhere/sub: "dir/lnk/../f" is
	 * scratch/elsewhere/f, not the lexical scratch/dir/f */
	snprintf(dir, sizeof(dir), "%s/dir", scratch);
	mkdir(dir, 0700);
	snprintf(dir, sizeof(dir), "%s/elsewhere", scratch);
	mkdir(dir, 0700);
	snprintf(dir, sizeof(dir), "%s/elsewhere/sub", scratch);
	mkdir(dir, 0700);
	snprintf(want, sizeof(want), "%s/dir/lnk", scratch);
	CHECK(symlink(dir, want) == 0);
	snprintf(dir, sizeof(dir), "%s/dir/lnk/../f", scratch);
	snprintf(want, sizeof(want), "%s/elsewhere/f", scratch);
	CHECK(la_target_open(AT_FDCWD, dir, &w, &t) == 0 &&
	      !strcmp(t.base, "f"));
	CHECK(la_target_abspath(&t, &w) == 0 && !strcmp(w.abs, want));
	close(t.pfd);

	dfd = open(scratch, O_RDONLY | O_DIRECTORY);
	snprintf(want, sizeof(want), "%s/elsewhere/sub/g", scratch);
	CHECK(la_target_open(dfd, "./dir/lnk/g", &w, &t) == 0 &&
	      la_target_abspath(&t, &w) == 0 && !strcmp(w.abs, want));
	close(t.pfd);
	close(dfd);
	CHECK(la_target_open(AT_FDCWD, "/etc", &w, &t) == 0 &&
	      la_target_abspath(&t, &w) == 0 && !strcmp(w.abs, "/etc"));
	close(t.pfd);
	/* not new regular files: left to open(2) */
	CHECK(la_target_open(AT_FDCWD, "/tmp/", &w, &t) == -1 && t.pfd == -1);
	CHECK(la_target_open(AT_FDCWD, "/tmp/..", &w, &t) == -1);
	CHECK(la_target_open(AT_FDCWD, "/no/such/dir/f", &w, &t) == -1);
}

/* ---- directory defaults, through the ioctl seam ---- */
static const void *getstripe_reply;
static size_t getstripe_len;

static int fake_getstripe(int fd, unsigned long req, void *arg)
{
	CHECK(req == LA_LL_IOC_LOV_GETSTRIPE && fcntl(fd, F_GETFD) >= 0);
	/* the buffer is announced as a v3 */
	CHECK(((struct la_lov_user_md_v3 *)arg)->lmm_magic ==
	      LA_LOV_USER_MAGIC_V3);
	if (!getstripe_reply) {
		errno = ENODATA;
		return -1;
	}
	memcpy(arg, getstripe_reply, getstripe_len);
	return 0;
}

static void test_dir_defaults(const char *scratch)
{
	static unsigned char buf[LA_LUM_MAX];
	struct la_lov_user_md_v3 v3;
	struct la_lov_user_md_v1 v1;
	uint32_t comp = LA_LOV_USER_MAGIC_COMP_V1;
	struct la_dirinfo di;
	int dfd = open(scratch, O_RDONLY | O_DIRECTORY);
	ssize_t n;

	la_lustre_ioctl = fake_getstripe;
	memset(&v3, 0, sizeof(v3));
	v3.lmm_magic = LA_LOV_USER_MAGIC_V3;
	v3.lmm_stripe_size = 4u << 20;
	v3.lmm_stripe_count = 3;
	v3.lmm_stripe_offset = LA_LOV_OFFSET_DEFAULT;
	memcpy(v3.lmm_pool_name, "flash", 5);
	getstripe_reply = &v3;
	getstripe_len = sizeof(v3);
	n = la_backend_lustre.dir_default(dfd, buf, sizeof(buf));
	memset(&di, 0, sizeof(di));
	CHECK(n > 0 && la_parse_dir_default(buf, (size_t)n, &di) == 0);
	CHECK(di.has_default && !di.composite && di.stripe_count == 3 &&
	      di.stripe_size == 4u << 20 && !strcmp(di.pool, "flash"));

	memset(&v1, 0, sizeof(v1));
	v1.lmm_magic = LA_LOV_USER_MAGIC_V1;
	v1.lmm_stripe_size = 1u << 20;
	v1.lmm_stripe_count = 0xffff; /* -c -1: every OST */
	v1.lmm_stripe_offset = LA_LOV_OFFSET_DEFAULT;
	getstripe_reply = &v1;
	getstripe_len = sizeof(v1);
	n = la_backend_lustre.dir_default(dfd, buf, sizeof(buf));
	memset(&di, 0, sizeof(di));
	CHECK(n > 0 && la_parse_dir_default(buf, (size_t)n, &di) == 0);
	CHECK(di.stripe_count == -1 && di.pool[0] == '\0');
	/* lfs setstripe -i 2 DIR: the user's start OST, left to Lustre */
	v1.lmm_stripe_offset = 2;
	memset(&di, 0, sizeof(di));
	CHECK(la_parse_dir_default(&v1, sizeof(v1), &di) == 0 &&
	      di.untouched == LA_DIR_OFFSET);

	getstripe_reply = &comp;
	getstripe_len = sizeof(comp);
	n = la_backend_lustre.dir_default(dfd, buf, sizeof(buf));
	memset(&di, 0, sizeof(di));
	CHECK(n > 0 && la_parse_dir_default(buf, (size_t)n, &di) == 0);
	CHECK(di.composite && !di.has_default);

	getstripe_reply = NULL; /* ENODATA: no default on the directory */
	CHECK(la_backend_lustre.dir_default(dfd, buf, sizeof(buf)) == -1);
	/* short or unknown bytes are not a default */
	CHECK(la_parse_dir_default(&v3, 20, &di) == -1);
	comp = 0x12345678;
	CHECK(la_parse_dir_default(&comp, sizeof(comp), &di) == -1);
	close(dfd);
}

/* ---- a file's layout read back (shadow reports) ---- */
static void test_file_layout(const char *scratch)
{
	static unsigned char lum[LA_LUM_MAX], got[LA_LUM_MAX];
	struct la_lov_user_md_v1 *v1 = (struct la_lov_user_md_v1 *)lum;
	const uint32_t placed[3] = { 7, 2, 11 };
	uint32_t osts[LA_MAX_STRIPES];
	uint64_t ss = 0;
	char path[LA_PATH_MAX + 16];
	size_t len = sizeof(*v1) + 3 * sizeof(struct la_lov_user_ost_data_v1);
	int fd, i;

	/* what GETSTRIPE gives for a file Lustre placed: v1, objects filled */
	memset(lum, 0, sizeof(lum));
	v1->lmm_magic = LA_LOV_USER_MAGIC_V1;
	v1->lmm_pattern = LA_LOV_PATTERN_RAID0;
	v1->lmm_stripe_size = 4u << 20;
	v1->lmm_stripe_count = 3;
	for (i = 0; i < 3; i++)
		v1->lmm_objects[i].l_ost_idx = placed[i];
	CHECK(la_parse_file_layout(lum, len, osts, LA_MAX_STRIPES, &ss) == 3);
	CHECK(osts[0] == 7 && osts[1] == 2 && osts[2] == 11 && ss == 4u << 20);
	CHECK(la_parse_file_layout(lum, len - 1, osts, LA_MAX_STRIPES, &ss) == -1);
	CHECK(la_parse_file_layout(lum, len, osts, 2, &ss) == -1);
	/* v3: objects after the pool name */
	la_build_lum(got, 1u << 20, 3, placed, "flash");
	((struct la_lov_user_md_v3 *)got)->lmm_magic = LA_LOV_USER_MAGIC_V3;
	CHECK(la_parse_file_layout(got, la_lum_size(3), osts, LA_MAX_STRIPES,
				   &ss) == 3 && osts[2] == 11 && ss == 1u << 20);

	/* the Lustre backend: GETSTRIPE on the file, opened read-only */
	snprintf(path, sizeof(path), "%s/shadow_file", scratch);
	fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	CHECK(fd >= 0);
	close(fd);
	la_lustre_ioctl = fake_getstripe;
	getstripe_reply = lum;
	getstripe_len = len;
	CHECK(la_backend_lustre.file_layout(path, got, sizeof(got), osts,
					    LA_MAX_STRIPES, &ss) == 3 &&
	      osts[1] == 2);
	getstripe_reply = NULL; /* ENODATA: no layout yet, try again */
	CHECK(la_backend_lustre.file_layout(path, got, sizeof(got), osts,
					    LA_MAX_STRIPES, &ss) == 0);
	unlink(path);
	CHECK(la_backend_lustre.file_layout(path, got, sizeof(got), osts,
					    LA_MAX_STRIPES, &ss) == -1);
}

/* ---- signal-safe text ---- */
static void test_fmt(void)
{
	char buf[16], reason[12];
	struct la_out o = { buf, 0, sizeof(buf) };

	buf[0] = '\0';
	la_put_u64(&o, 0);
	la_put_str(&o, " ");
	la_put_i64(&o, -42);
	CHECK(!strcmp(buf, "0 -42"));
	o.len = 0;
	la_put_tenths(&o, 139.64);
	la_put_str(&o, "/");
	la_put_tenths(&o, -1.0); /* never negative */
	CHECK(!strcmp(buf, "139.6/0.0"));
	o.len = 0;
	la_put_u64(&o, 18446744073709551615ull); /* 20 digits, cut at 15 */
	CHECK(o.len == sizeof(buf) - 1 && !strcmp(buf, "184467440737095"));
	la_reason(reason, sizeof(reason), "setstripe", 121);
	CHECK(!strcmp(reason, "setstripe:1")); /* cut, still terminated */
	la_reason(reason, sizeof(reason), "create", 13);
	CHECK(!strcmp(reason, "create:13"));
}

int main(int argc, char **argv)
{
	char scratch[LA_PATH_MAX];

	if (argc != 2 || !realpath(argv[1], scratch))
		return 2;
	test_struct_layout();
	test_lum_bytes();
	test_lustre_backend(scratch);
	test_reply_decoder();
	test_paths(scratch);
	test_dir_defaults(scratch);
	test_file_layout(scratch);
	test_fmt();
	return CHECK_SUMMARY();
}

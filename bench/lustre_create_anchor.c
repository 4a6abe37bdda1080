/*
 * lustre_create_anchor - creates files on a Lustre client three ways, for
 * bench/lustre_vm_create_rpcs.py (built and run in the lustre-vm guest,
 * against the guest's liblustreapi):
 *
 *   plain DIR N SIZE         open(O_WRONLY|O_CREAT|O_EXCL), SIZE bytes
 *                            written, close: what an application does (run
 *                            bare, and under the shim)
 *   llapi DIR N SIZE NOSTS   llapi_layout_file_create() with the OST named
 *                            (stripe count 1, OST i % NOSTS): what a
 *                            program that sets its own layout pays, the
 *                            anchor of the shim's cost
 *   variant DIR N SIZE NOSTS HOW
 *                            the shim's create with parts switched on by
 *                            the letters of HOW (create_variant()), to
 *                            find which part costs an RPC
 *   steps DIR N SIZE NOSTS STATS
 *                            the shim's create (liblustre_alloc/la_create.c,
 *                            la_backend.c la_lustre_create()) one system
 *                            call at a time (no existence check: the
 *                            create's O_EXCL is one; no GETSTRIPE: the
 *                            SETSTRIPE answers with the layout), the client's MDC stats file
 *                            STATS (lctl list_param -p mdc.*.stats) read
 *                            after each: prints, per step, the RPCs it sent
 *                            by type, summed over the N files
 *
 * Files are DIR/a<i>.  Prints "created=<n>"; exit 1 on any failure.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <lustre/lustreapi.h>

#define MAX_COUNTERS 64
#define MAX_STEPS 12

struct counters {
	int n;
	char name[MAX_COUNTERS][64];
	unsigned long long v[MAX_COUNTERS];
};

static const char *stats_path;
static const char *step_name[MAX_STEPS];
static struct counters step_sum[MAX_STEPS];
static int nsteps;
static struct counters last;

static void die(const char *what, const char *path)
{
	fprintf(stderr, "lustre_create_anchor: %s %s: %s\n", what, path ? path : "",
		strerror(errno));
	exit(1);
}

static void read_stats(struct counters *c)
{
	char line[512], name[64];
	unsigned long long v;
	FILE *f = fopen(stats_path, "r");

	if (!f)
		die("open", stats_path);
	c->n = 0;
	while (fgets(line, sizeof(line), f) && c->n < MAX_COUNTERS) {
		if (sscanf(line, "%63s %llu samples", name, &v) != 2)
			continue;
		strcpy(c->name[c->n], name);
		c->v[c->n++] = v;
	}
	fclose(f);
}

static unsigned long long value_of(const struct counters *c, const char *name)
{
	int i;

	for (i = 0; i < c->n; i++)
		if (!strcmp(c->name[i], name))
			return c->v[i];
	return 0;
}

/* Adds what the stats moved since the last call to step k's sums. */
static void step_done(int k, const char *name)
{
	struct counters now;
	struct counters *s = &step_sum[k];
	int i, j;

	if (!stats_path)
		return;
	step_name[k] = name;
	if (k + 1 > nsteps)
		nsteps = k + 1;
	read_stats(&now);
	for (i = 0; i < now.n; i++) {
		unsigned long long d = now.v[i] - value_of(&last, now.name[i]);

		if (!strcmp(now.name[i], "req_waittime") ||
		    !strcmp(now.name[i], "req_active") || d == 0)
			continue; /* per-RPC gauges, not RPC types */
		for (j = 0; j < s->n && strcmp(s->name[j], now.name[i]); j++)
			;
		if (j == s->n) {
			if (s->n == MAX_COUNTERS)
				continue;
			strcpy(s->name[s->n], now.name[i]);
			s->v[s->n++] = 0;
		}
		s->v[j] += d;
	}
	last = now;
}

static void write_all(int fd, size_t size, const char *path)
{
	static char buf[1 << 20];

	while (size > 0) {
		size_t n = size < sizeof(buf) ? size : sizeof(buf);
		ssize_t w = write(fd, buf, n);

		if (w <= 0)
			die("write", path);
		size -= (size_t)w;
	}
}

static void create_steps(const char *dir, int i, size_t size, int nosts)
{
	char base[64], dot[4096];
	struct statfs sf;
	union {
		struct lov_user_md_v3 v3;
		char bytes[sizeof(struct lov_user_md_v3) +
			   64 * sizeof(struct lov_user_ost_data_v1)];
	} lum;
	int pfd, fd;

	snprintf(base, sizeof(base), "a%d", i);
	snprintf(dot, sizeof(dot), "%s/.", dir);
	pfd = open(dot, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (pfd < 0)
		die("open", dot);
	step_done(0, "open the directory as \"<dir>/.\" (O_PATH)");
	if (fstatfs(pfd, &sf) != 0)
		die("fstatfs", dir);
	step_done(1, "fstatfs of the directory");
	if (i == 0) { /* the shim caches a directory's default (LUSTRE_ALLOC_CACHE_S) */
		int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		memset(&lum, 0, sizeof(lum));
		lum.v3.lmm_magic = LOV_USER_MAGIC_V3;
		lum.v3.lmm_stripe_count = 64;
		if (dfd < 0)
			die("open", dir);
		if (ioctl(dfd, LL_IOC_LOV_GETSTRIPE, &lum) != 0 && errno != ENODATA)
			die("GETSTRIPE", dir);
		close(dfd);
	}
	step_done(2, "GETSTRIPE of the directory (first file only)");
	fd = openat(pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_LOV_DELAY_CREATE | O_CLOEXEC,
		    0644);
	if (fd < 0)
		die("create", base);
	step_done(3, "open(O_CREAT|O_EXCL|O_LOV_DELAY_CREATE)");
	memset(&lum, 0, sizeof(lum));
	lum.v3.lmm_magic = LOV_USER_MAGIC_SPECIFIC;
	lum.v3.lmm_pattern = LOV_PATTERN_RAID0;
	lum.v3.lmm_stripe_count = 1;
	lum.v3.lmm_stripe_offset = (unsigned short)(i % nosts);
	lum.v3.lmm_objects[0].l_ost_idx = (unsigned)(i % nosts);
	if (ioctl(fd, LL_IOC_LOV_SETSTRIPE, &lum) != 0)
		die("SETSTRIPE", base);
	/* the layout Lustre made is in lum now (ll_lov_setstripe()) */
	{
		struct lov_user_md_v1 *v1 = (struct lov_user_md_v1 *)&lum;
		unsigned got = v1->lmm_magic == LOV_USER_MAGIC_V3 ? lum.v3.lmm_objects[0].l_ost_idx
								  : v1->lmm_objects[0].l_ost_idx;

		if (v1->lmm_stripe_count != 1 || got != (unsigned)(i % nosts)) {
			errno = EPROTO;
			die("SETSTRIPE answer", base);
		}
	}
	step_done(4, "SETSTRIPE (an OST list; its answer holds the layout)");
	write_all(fd, size, base);
	step_done(5, "write");
	if (close(fd) != 0)
		die("close", base);
	close(pfd);
	step_done(6, "close");
}

/* One create the shim's way with parts switched by the letters of how:
 * 'p' open the parent O_PATH and create relative to it (else by the path),
 * 'q' the same with the parent opened as "<dir>/." (the shim's way),
 * 's' fstatfs of the parent, 'x' a LOV_USER_MAGIC_SPECIFIC list (else a v1
 * layout with the start OST, as llapi_layout_file_create() sends for one
 * stripe), 'g' GETSTRIPE after the SETSTRIPE. */
static void create_variant(const char *dir, int i, size_t size, int nosts, const char *how)
{
	char base[64], path[4096];
	struct statfs sf;
	union {
		struct lov_user_md_v3 v3;
		struct lov_user_md_v1 v1;
		char bytes[sizeof(struct lov_user_md_v3) +
			   64 * sizeof(struct lov_user_ost_data_v1)];
	} lum;
	int pfd = -1, fd;
	int flags = O_WRONLY | O_CREAT | O_EXCL | O_LOV_DELAY_CREATE | O_CLOEXEC;

	snprintf(base, sizeof(base), "a%d", i);
	snprintf(path, sizeof(path), "%s/%s", dir, base);
	if (strchr(how, 'p') || strchr(how, 'q')) {
		char dot[4096];

		/* 'q': "<dir>/.", as the shim opens it (la_paths.c) */
		snprintf(dot, sizeof(dot), "%s%s", dir, strchr(how, 'q') ? "/." : "");
		pfd = open(dot, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (pfd < 0)
			die("open", dir);
		if (strchr(how, 's') && fstatfs(pfd, &sf) != 0)
			die("fstatfs", dir);
		fd = openat(pfd, base, flags, 0644);
	} else {
		if (strchr(how, 's') && statfs(dir, &sf) != 0)
			die("statfs", dir);
		fd = open(path, flags, 0644);
	}
	if (fd < 0)
		die("create", path);
	memset(&lum, 0, sizeof(lum));
	if (strchr(how, 'x')) {
		lum.v3.lmm_magic = LOV_USER_MAGIC_SPECIFIC;
		lum.v3.lmm_pattern = LOV_PATTERN_RAID0;
		lum.v3.lmm_stripe_count = 1;
		lum.v3.lmm_stripe_offset = (unsigned short)(i % nosts);
		lum.v3.lmm_objects[0].l_ost_idx = (unsigned)(i % nosts);
	} else {
		lum.v1.lmm_magic = LOV_USER_MAGIC_V1;
		lum.v1.lmm_pattern = LOV_PATTERN_RAID0;
		lum.v1.lmm_stripe_count = 1;
		lum.v1.lmm_stripe_offset = (unsigned short)(i % nosts);
	}
	if (ioctl(fd, LL_IOC_LOV_SETSTRIPE, &lum) != 0)
		die("SETSTRIPE", path);
	if (strchr(how, 'g')) {
		memset(&lum, 0, sizeof(lum));
		lum.v3.lmm_magic = LOV_USER_MAGIC_V3;
		lum.v3.lmm_stripe_count = 64;
		if (ioctl(fd, LL_IOC_LOV_GETSTRIPE, &lum) != 0)
			die("GETSTRIPE", path);
	}
	write_all(fd, size, path);
	if (close(fd) != 0)
		die("close", path);
	if (pfd >= 0)
		close(pfd);
}

int main(int argc, char **argv)
{
	const char *mode, *dir;
	int n, i, nosts = 1;
	size_t size;
	char path[4096];

	if (argc < 5)
		goto usage;
	mode = argv[1];
	dir = argv[2];
	n = atoi(argv[3]);
	size = (size_t)strtoull(argv[4], NULL, 10);
	if (argc > 5)
		nosts = atoi(argv[5]);
	if (nosts < 1)
		goto usage;
	if (!strcmp(mode, "steps")) {
		if (argc < 7)
			goto usage;
		stats_path = argv[6];
		read_stats(&last);
	}
	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/a%d", dir, i);
		if (!strcmp(mode, "plain")) {
			int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);

			if (fd < 0)
				die("create", path);
			write_all(fd, size, path);
			if (close(fd) != 0)
				die("close", path);
		} else if (!strcmp(mode, "llapi")) {
			struct llapi_layout *l = llapi_layout_alloc();
			int fd;

			if (!l || llapi_layout_stripe_count_set(l, 1) != 0 ||
			    llapi_layout_ost_index_set(l, 0, i % nosts) != 0)
				die("llapi_layout", path);
			fd = llapi_layout_file_create(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
						      0644, l);
			llapi_layout_free(l);
			if (fd < 0)
				die("llapi_layout_file_create", path);
			write_all(fd, size, path);
			if (close(fd) != 0)
				die("close", path);
		} else if (!strcmp(mode, "steps")) {
			create_steps(dir, i, size, nosts);
		} else if (!strcmp(mode, "variant")) {
			create_variant(dir, i, size, nosts, argc > 6 ? argv[6] : "");
		} else {
			goto usage;
		}
	}
	for (i = 0; i < nsteps; i++) {
		int j;

		for (j = 0; j < step_sum[i].n; j++)
			printf("step\t%d\t%s\t%s\t%llu\n", i, step_name[i], step_sum[i].name[j],
			       step_sum[i].v[j]);
	}
	printf("created=%d\n", n);
	return 0;
usage:
	fprintf(stderr, "usage: lustre_create_anchor plain|llapi DIR N SIZE [NOSTS]\n"
			"       lustre_create_anchor variant DIR N SIZE NOSTS HOW\n"
			"       lustre_create_anchor steps DIR N SIZE NOSTS MDC_STATS\n");
	return 2;
}

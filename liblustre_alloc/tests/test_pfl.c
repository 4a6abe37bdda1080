/*
 * test_pfl - composite (PFL) layouts at the seam, on exact bytes:
 *
 *   test_pfl SCRATCH_DIR   the structs against the reference's offsets,
 *                          directory defaults written by hand from Lustre's
 *                          documentation parsed, and the bytes the Lustre
 *                          backend hands to ioctl(LL_IOC_LOV_SETSTRIPE)
 *   test_pfl pack          a composite request, hex (the Python test decodes
 *                          it with the mapper's decoder)
 *   test_pfl parse FILE    decode a composite reply body, print it
 *
 * Expected bytes are built with put16/put32/put64 at the offsets of
 * docs/reference/lustre-client-layout-api.md ("Composite layouts"), never
 * from our structs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "la_internal.h"

#include "check.h"

#define MIB (1ull << 20)
#define EOF64 0xFFFFFFFFFFFFFFFFull

static void put16(unsigned char *p, uint16_t v)
{
	p[0] = v & 0xff; p[1] = v >> 8;
}

static void put32(unsigned char *p, uint32_t v)
{
	put16(p, v & 0xffff); put16(p + 2, v >> 16);
}

static void put64(unsigned char *p, uint64_t v)
{
	put32(p, (uint32_t)v); put32(p + 4, (uint32_t)(v >> 32));
}

/* One template blob: lov_user_md v1 (32 bytes) or, with a pool, v3 (48). */
static size_t blob(unsigned char *p, uint32_t pattern, uint32_t size,
		   uint16_t count, const char *pool)
{
	size_t n = pool ? 48 : 32;

	memset(p, 0, n);
	put32(p, pool ? 0x0BD30BD0 : 0x0BD10BD0);
	put32(p + 4, pattern);
	put32(p + 24, size);
	put16(p + 28, count);
	put16(p + 30, 0xffff); /* no start OST */
	if (pool)
		memcpy(p + 32, pool, strlen(pool));
	return n;
}

struct comp {
	uint32_t flags;
	uint64_t start, end;
	uint32_t pattern, size;
	uint16_t count;
	const char *pool;
};

/* A directory's composite default as GETSTRIPE gives it. */
static size_t template(unsigned char *p, const struct comp *c, int n,
		       uint16_t mirrors)
{
	size_t off = 32 + 48 * (size_t)n;
	int i;

	memset(p, 0, off);
	put32(p, 0x0BD60BD0);
	put16(p + 14, (uint16_t)n);
	put16(p + 16, mirrors);
	for (i = 0; i < n; i++) {
		unsigned char *e = p + 32 + 48 * i;
		size_t b = blob(p + off, c[i].pattern, c[i].size, c[i].count,
				c[i].pool);

		put32(e + 0, 7 + (uint32_t)i); /* ids the MDS gave */
		put32(e + 4, c[i].flags);
		put64(e + 8, c[i].start);
		put64(e + 16, c[i].end);
		put32(e + 24, (uint32_t)off);
		put32(e + 28, (uint32_t)b);
		off += b;
	}
	put32(p + 4, (uint32_t)off);
	return off;
}

static void test_structs(void)
{
	CHECK(sizeof(struct la_lov_comp_md_v1) == 32);
	CHECK(offsetof(struct la_lov_comp_md_v1, lcm_entry_count) == 14);
	CHECK(offsetof(struct la_lov_comp_md_v1, lcm_mirror_count) == 16);
	CHECK(offsetof(struct la_lov_comp_md_v1, lcm_entries) == 32);
	CHECK(sizeof(struct la_lov_comp_md_entry_v1) == 48);
	CHECK(offsetof(struct la_lov_comp_md_entry_v1, lcme_start) == 8);
	CHECK(offsetof(struct la_lov_comp_md_entry_v1, lcme_end) == 16);
	CHECK(offsetof(struct la_lov_comp_md_entry_v1, lcme_offset) == 24);
	CHECK(offsetof(struct la_lov_comp_md_entry_v1, lcme_size) == 28);
	CHECK(offsetof(struct la_lov_comp_md_entry_v1, lcme_timestamp) == 36);
}

/* lfs setstripe -E 64K -L mdt -E 1G -c 2 -S 4M -p flash -E 4G -c 1
 *   -z 256M (SEL: the component and its extension) -E -1 -c -1 DIR */
static const struct comp DOM_PFL[] = {
	{ 0x10, 0, 65536, 0x100, 65536, 0, NULL },     /* DoM (INIT: stripped) */
	{ 0, 65536, 1u << 30, 0x1, 4u << 20, 2, "flash" },
	{ 0, 1u << 30, 1ull << 31, 0x1, 1u << 20, 1, NULL },
	{ 0x40, 1ull << 31, 4ull << 30, 0x1, 1u << 20, 1, NULL }, /* SEL ext */
	{ 0, 4ull << 30, EOF64, 0x1, 0, 0xffff, NULL },
};

static void test_parse(void)
{
	static unsigned char t[4096];
	static struct la_pfl pfl;
	size_t n = template(t, DOM_PFL, 5, 0);
	struct la_dirinfo di;

	memset(&di, 0, sizeof(di));
	CHECK(la_parse_dir_default(t, n, &di) == 0 && di.composite);
	/* a self-extending default (-2: left to Lustre), parsed all the same */
	CHECK(la_parse_comp_default(t, n, &pfl) == -2);
	CHECK(pfl.n == 5 && pfl.nost == 3 && pfl.len == n);
	CHECK(pfl.c[0].kind == LA_PFL_MDT && pfl.c[3].kind == LA_PFL_EXT);
	CHECK(pfl.c[1].kind == LA_PFL_OST && pfl.c[1].stripe_count == 2 &&
	      pfl.c[1].stripe_size == 4u << 20 && !strcmp(pfl.c[1].pool, "flash"));
	/* count 0xffff: every OST; stripe size 0: LOD's default, kept in
	 * the layout, priced at LA_PRICING_STRIPE_SIZE */
	CHECK(pfl.c[4].kind == LA_PFL_OST && pfl.c[4].stripe_count == -1 &&
	      pfl.c[4].stripe_size == 4 * MIB &&
	      pfl.c[4].layout_stripe_size == 0 && pfl.c[4].end == LA_LUSTRE_EOF);
	CHECK(pfl.c[2].start == 1u << 30 && pfl.c[2].end == 1ull << 31);

	/* what the shim leaves to Lustre: FLR mirrors, overlapping extents,
	 * a blob outside the buffer, truncation, too many components */
	n = template(t, DOM_PFL, 5, 1);
	CHECK(la_parse_comp_default(t, n, &pfl) == -1);
	n = template(t, DOM_PFL, 5, 0);
	put64(t + 32 + 48 * 2 + 8, 65536);         /* comp 2 starts inside 1 */
	CHECK(la_parse_comp_default(t, n, &pfl) == -1);
	n = template(t, DOM_PFL, 5, 0);
	put32(t + 32 + 48 * 4 + 24, (uint32_t)n);  /* blob past the end */
	CHECK(la_parse_comp_default(t, n, &pfl) == -1);
	n = template(t, DOM_PFL, 5, 0);
	CHECK(la_parse_comp_default(t, n - 1, &pfl) == -1);
	put16(t + 14, LA_PFL_MAX + 1);
	CHECK(la_parse_comp_default(t, n, &pfl) == -1);
	{
		/* overstriping and a foreign blob are kept as they are */
		struct comp odd[2] = { DOM_PFL[1], DOM_PFL[4] };

		odd[0].pattern = 0x201; /* RAID0 | OVERSTRIPING */
		n = template(t, odd, 2, 0);
		put32(t + 32 + 96 + 48, 0x0BD70BD0); /* not v1/v3: foreign */
		CHECK(la_parse_comp_default(t, n, &pfl) == 0);
		CHECK(pfl.nost == 0 && pfl.c[0].kind == LA_PFL_KEEP &&
		      pfl.c[1].kind == LA_PFL_KEEP);
	}
}

static unsigned char seen[LA_LUM_MAX];
static size_t seen_len;

static int fake_setstripe(int fd, unsigned long req, void *arg)
{
	uint32_t size;

	CHECK(req == LA_LL_IOC_LOV_SETSTRIPE && fcntl(fd, F_GETFD) >= 0);
	memcpy(&size, (unsigned char *)arg + 4, sizeof(size)); /* lcm_size */
	seen_len = size <= sizeof(seen) ? size : 0;
	memcpy(seen, arg, seen_len);
	return 0;
}

/* The SPECIFIC blob of an OST component naming osts. */
static size_t specific(unsigned char *p, uint32_t size, const uint32_t *osts,
		       int n, const char *pool)
{
	int i;

	memset(p, 0, 48 + 24 * (size_t)n);
	put32(p, 0x0BD50BD0);
	put32(p + 4, 0x1);
	put32(p + 24, size);
	put16(p + 28, (uint16_t)n);
	put16(p + 30, (uint16_t)osts[0]);
	if (pool)
		memcpy(p + 32, pool, strlen(pool));
	for (i = 0; i < n; i++)
		put32(p + 48 + 24 * i + 20, osts[i]);
	return 48 + 24 * (size_t)n;
}

static void entry(unsigned char *e, uint32_t flags, uint64_t start,
		  uint64_t end, size_t off, size_t len)
{
	memset(e, 0, 48);
	put32(e + 4, flags);
	put64(e + 8, start);
	put64(e + 16, end);
	put32(e + 24, (uint32_t)off);
	put32(e + 28, (uint32_t)len);
}

static void test_setstripe_bytes(const char *scratch)
{
	static unsigned char t[4096], want[4096], lum[LA_LUM_MAX];
	static struct la_pfl pfl;
	static struct la_decision d;
	static const uint32_t a[] = { 5, 1 }, b[] = { 3 }, c[] = { 0, 2, 7 };
	struct la_outcome out;
	char path[LA_PATH_MAX + 16];
	size_t n = template(t, DOM_PFL, 5, 0), off, len;
	int fd;

	CHECK(la_parse_comp_default(t, n, &pfl) == -2);
	memset(&d, 0, sizeof(d));
	d.ok = 1;
	d.ncomp = 3;
	d.comp_count[0] = 2;
	d.comp_count[1] = 1;
	d.comp_count[2] = 3;
	memcpy(d.osts, a, sizeof(a));
	memcpy(d.osts + 2, b, sizeof(b));
	memcpy(d.osts + 3, c, sizeof(c));
	d.count = 6;
	d.pfl = &pfl;

	/* the composite the create sets, built by hand: ids 0, INIT
	 * cleared, the DoM and SEL blobs as the template had them, each OST
	 * component a SPECIFIC blob (its pool, else the file's "ssd") */
	off = 32 + 5 * 48;
	memset(want, 0, sizeof(want));
	put32(want, 0x0BD60BD0);
	put16(want + 14, 5);
	len = 32; /* DoM: the template's v1 blob */
	memcpy(want + off, t + 32 + 5 * 48, len);
	entry(want + 32, 0, 0, 65536, off, len);
	off += len;
	len = specific(want + off, 4u << 20, a, 2, "flash");
	entry(want + 32 + 48, 0, 65536, 1u << 30, off, len);
	off += len;
	len = specific(want + off, 1u << 20, b, 1, "ssd");
	entry(want + 32 + 96, 0, 1u << 30, 1ull << 31, off, len);
	off += len;
	len = 32; /* SEL extension: the template's blob, flag kept */
	memcpy(want + off, t + 32 + 5 * 48 + 32 + 48 + 32, len);
	entry(want + 32 + 144, 0x40, 1ull << 31, 4ull << 30, off, len);
	off += len;
	len = specific(want + off, 0, c, 3, "ssd"); /* 0: LOD's default */
	entry(want + 32 + 192, 0, 4ull << 30, EOF64, off, len);
	off += len;
	put32(want + 4, (uint32_t)off);

	CHECK(la_build_comp(lum, sizeof(lum), &d, "ssd") == off);
	CHECK(memcmp(lum, want, off) == 0);
	/* too small a buffer: nothing half-built is used */
	CHECK(la_build_comp(lum, off - 1, &d, "ssd") == 0);

	/* the same bytes reach SETSTRIPE through the Lustre backend */
	la_init();
	la_lustre_ioctl = fake_setstripe;
	snprintf(path, sizeof(path), "%s/pfl_file", scratch);
	unlink(path);
	memset(&out, 0, sizeof(out));
	{
		struct la_request rq = { .pool = "ssd", .stripe_count = 1,
					 .stripe_size = 1u << 20 };

		fd = la_backend_lustre.create(AT_FDCWD, path,
					      O_WRONLY | O_CREAT, 0600, &d,
					      &rq, lum, &out);
	}
	CHECK(fd >= 0 && out.applied == 1);
	CHECK(seen_len == off && memcmp(seen, want, off) == 0);
	if (fd >= 0)
		close(fd);
}

/* lfs setstripe -E 1M -c 1 -o 3 -E 1G -c 4 -o 1,2,5,7 -E -1 -c 8 F, the
 * reference's example, written by hand: what the shim sets when the
 * mapper chose those OSTs under a -E 1M -c 1 -E 1G -c 4 -E -1 -c 8 default */
static void test_reference_example(void)
{
	static const struct comp plain[] = {
		{ 0, 0, 1u << 20, 0x1, 1u << 20, 1, NULL },
		{ 0, 1u << 20, 1u << 30, 0x1, 1u << 20, 4, NULL },
		{ 0, 1u << 30, EOF64, 0x1, 1u << 20, 8, NULL },
	};
	static const uint32_t o1[] = { 3 }, o2[] = { 1, 2, 5, 7 },
			      o3[] = { 0, 4, 6, 8, 9, 10, 11, 12 };
	static unsigned char t[4096], want[4096], lum[LA_LUM_MAX];
	static struct la_pfl pfl;
	static struct la_decision d;
	size_t off = 32 + 3 * 48, len;

	CHECK(la_parse_comp_default(t, template(t, plain, 3, 0), &pfl) == 0);
	memset(&d, 0, sizeof(d));
	d.ok = 1;
	d.ncomp = 3;
	d.comp_count[0] = 1;
	d.comp_count[1] = 4;
	d.comp_count[2] = 8;
	memcpy(d.osts, o1, sizeof(o1));
	memcpy(d.osts + 1, o2, sizeof(o2));
	memcpy(d.osts + 5, o3, sizeof(o3));
	d.pfl = &pfl;
	memset(want, 0, sizeof(want));
	put32(want, 0x0BD60BD0);
	put16(want + 14, 3);
	len = specific(want + off, 1u << 20, o1, 1, NULL);
	entry(want + 32, 0, 0, 1u << 20, off, len);
	off += len;
	len = specific(want + off, 1u << 20, o2, 4, NULL);
	entry(want + 80, 0, 1u << 20, 1u << 30, off, len);
	off += len;
	len = specific(want + off, 1u << 20, o3, 8, NULL);
	entry(want + 128, 0, 1u << 30, EOF64, off, len);
	off += len;
	put32(want + 4, (uint32_t)off);
	CHECK(off == 32 + 3 * 48 + 3 * 48 + 13 * 24);
	CHECK(la_build_comp(lum, sizeof(lum), &d, NULL) == off);
	CHECK(memcmp(lum, want, off) == 0);
}

static int pack(void)
{
	static unsigned char t[4096];
	static struct la_pfl pfl;
	static char buf[LA_REQ_MAX];
	struct la_request rq = { .job = "ior.7", .path = "/lustre/run/f",
				 .pool = "ssd", .stripe_count = 1,
				 .stripe_size = MIB,
				 .expected_bytes = 3ull << 30, .uid = 1000,
				 .gid = 100, .projid = 42 };
	size_t n;

	la_init();
	la_cfg.pfl_all = 1;
	/* -2: self-extending (left to Lustre), but parsed whole: its packing
	 * still shows how an extension's range is priced */
	if (la_parse_comp_default(t, template(t, DOM_PFL, 5, 0), &pfl) != -2)
		return 1;
	n = la_pack_composite(buf, sizeof(buf), 5, &rq, &pfl);
	printf("composite=");
	for (size_t i = 0; i < n; i++)
		printf("%02x", (unsigned char)buf[i]);
	printf("\nsmall=%zu\n", la_pack_composite(buf, 16, 5, &rq, &pfl));
	return 0;
}

static int parse(const char *path)
{
	static char buf[LA_LEASE_REPLY_MAX];
	static struct la_decision d;
	FILE *f = fopen(path, "rb");
	size_t len;
	int rc, i, j, at = 0;

	if (!f)
		return 2;
	len = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	rc = la_parse_reply(buf, len, 9, LA_WANT_COMPOSITE, &d);
	printf("rc=%d ok=%d policy=%s fallback=%s reason=%s layouts=", rc,
	       d.ok, d.policy, d.mapper_fallback, d.reason);
	for (i = 0; d.ok && i < d.ncomp; i++) {
		for (j = 0; j < d.comp_count[i]; j++)
			printf("%s%u", j ? "," : "", d.osts[at + j]);
		at += d.comp_count[i];
		printf(";");
	}
	printf("\n");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "pack") == 0)
		return pack();
	if (argc == 3 && strcmp(argv[1], "parse") == 0)
		return parse(argv[2]);
	if (argc != 2) {
		fprintf(stderr, "usage: test_pfl SCRATCH_DIR | pack | parse FILE\n");
		return 2;
	}
	/* every OST component named (the site's opt-in); the default is
	 * tested in tests/client/test_composite.py */
	la_init();
	la_cfg.pfl_all = 1;
	test_structs();
	test_parse();
	test_setstripe_bytes(argv[1]);
	test_reference_example();
	return CHECK_SUMMARY();
}

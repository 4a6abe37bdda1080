/*
 * test_lease_wire - the shim's protocol v2 frames against the mapper's own
 * encoder and decoder (tests/client/test_lease_wire.py drives it):
 *
 *   test_lease_wire parse FILE   decode the reply body in FILE, print it
 *   test_lease_wire pack         print a lease request and a release, hex
 *
 * Links the shim's objects (la_lease_wire.o, la_mapper.o, ...).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "la_internal.h"

static void hex(const char *what, const char *buf, size_t len)
{
	printf("%s=", what);
	for (size_t i = 0; i < len; i++)
		printf("%02x", (unsigned char)buf[i]);
	printf("\n");
}

static int parse(const char *path)
{
	static char buf[LA_LEASE_REPLY_MAX + 16];
	static struct la_lease_reply r;
	FILE *f = fopen(path, "rb");
	size_t len;
	int rc, i, j;

	if (!f)
		return 2;
	len = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	rc = la_parse_lease_reply(buf, len, &r);
	printf("rc=%d v=%d id=%llu ok=%d err=%d lease=%llu stripe_size=%llu "
	       "lease_ms=%d per_create=%d retry_ms=%d policy=%s layouts=",
	       rc, r.version, (unsigned long long)r.id, r.ok, r.err,
	       (unsigned long long)r.lease,
	       (unsigned long long)r.stripe_size, r.lease_ms, r.per_create,
	       r.retry_ms, r.policy);
	for (i = 0; i < (rc == 0 ? r.nlayouts : 0); i++) {
		for (j = 0; j < r.counts[i]; j++)
			printf("%s%u", j ? "," : "", r.osts[i][j]);
		printf(";");
	}
	printf(" revoke=");
	for (i = 0; i < r.nrevoke; i++)
		printf("%s%llu", i ? "," : "", (unsigned long long)r.revoke[i]);
	printf("\n");
	return 0;
}

static int pack(void)
{
	static char buf[LA_REQ_MAX];
	struct la_request rq = { 0 };
	uint64_t leases[2] = { 11, 12 };
	int used[2] = { 3, 0 };
	size_t len;

	rq.job = "ior.7";
	rq.path = "/lustre/run";
	rq.pool = "flash";
	rq.stripe_count = 2;
	rq.stripe_size = 4 << 20;
	rq.expected_bytes = 1 << 30;
	rq.uid = 1000;
	rq.gid = 100;
	rq.projid = 42;
	len = la_pack_lease(buf, sizeof(buf), 5, 16, &rq);
	if (!len)
		return 1;
	hex("lease", buf, len);
	struct la_file_used files[2] = { { 11, 0, "f.0" }, { 11, 2, "f.2" } };

	len = la_pack_release(buf, sizeof(buf), 6, leases, used, 2, NULL, 0);
	if (!len)
		return 1;
	hex("release", buf, len);
	len = la_pack_release(buf, sizeof(buf), 7, leases, used, 1, files, 2);
	if (!len)
		return 1;
	hex("release_files", buf, len);
	/* too small a buffer: refused, never cut */
	printf("small=%zu\n", la_pack_lease(buf, 8, 5, 16, &rq));
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "parse") == 0)
		return parse(argv[2]);
	if (argc == 2 && strcmp(argv[1], "pack") == 0)
		return pack();
	return 2;
}

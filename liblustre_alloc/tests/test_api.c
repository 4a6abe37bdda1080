/*
 * test_api - the explicit API (lustre_alloc.h), linked with
 * -llustre_alloc_api, no LD_PRELOAD.
 *   test_api up DIR    mapper running: ping, query, create with a hint
 *   test_api down DIR  mapper stopped: ping/query fail fast, create works
 *   test_api pool DIR  create with a hint naming pool "ssd"
 * Configuration from the environment (LUSTRE_ALLOC_MAPPER, _RECORD, ...).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lustre_alloc.h"

#include "check.h"

int main(int argc, char **argv)
{
	struct lustre_alloc_hint hint = { .stripe_count = 2,
					  .stripe_size = 4 << 20,
					  .expected_bytes = 1 << 30 };
	struct lustre_alloc_hint bad = { .stripe_size = 1000 };
	struct lustre_alloc_layout *lay;
	char path[8192];
	int up, fd, rc;

	if (argc != 3)
		return 2;
	lay = calloc(1, sizeof(*lay));
	up = strcmp(argv[1], "up") == 0;
	snprintf(path, sizeof(path), "%s/api_file", argv[2]);
	if (strcmp(argv[1], "pool") == 0) {
		hint.pool = "ssd";
		fd = lustre_alloc_create(path, O_WRONLY, 0644, &hint);
		CHECK(fd >= 0);
		if (fd >= 0)
			close(fd);
		free(lay);
		return CHECK_SUMMARY();
	}

	rc = lustre_alloc_ping(0);
	CHECK(up ? rc == 0 : rc < 0);
	rc = lustre_alloc_query("/scratch/x", &hint, lay);
	if (up) {
		CHECK(rc == 0);
		CHECK(lay->stripe_count == 2 && lay->osts[0] != lay->osts[1]);
		CHECK(lay->stripe_size == 4 << 20);
		printf("osts=%u,%u policy=%s\n", lay->osts[0], lay->osts[1],
		       lay->policy);
	} else {
		CHECK(rc == -ETIMEDOUT || rc == -EHOSTUNREACH);
	}
	CHECK(lustre_alloc_query(NULL, &bad, lay) == -EINVAL);

	fd = lustre_alloc_create(path, O_WRONLY, 0644, &hint);
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	/* exists: opened normally; with O_EXCL: EEXIST like open(2) */
	fd = lustre_alloc_create(path, O_WRONLY, 0644, NULL);
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	errno = 0;
	CHECK(lustre_alloc_create(path, O_WRONLY | O_EXCL, 0644, NULL) == -1 &&
	      errno == EEXIST);
	free(lay);
	return CHECK_SUMMARY();
}

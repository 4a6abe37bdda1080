/*
 * lustre_alloc.h - explicit API of liblustre_alloc, for applications that
 * prefer linking (-llustre_alloc_api) over LD_PRELOAD.
 *
 * The library asks the lustre-alloc global mapper (Paul et al. 2017,
 * Section III, Fig. 4: client library L) for the OSTs of a new file and
 * creates the file with that layout.  The mapper is an optimisation, never a
 * dependency: when it cannot answer in time the file is created with
 * Lustre's default allocator.  Configuration comes from the environment,
 * read once (see docs/client.md).
 */
#ifndef LUSTRE_ALLOC_H
#define LUSTRE_ALLOC_H

#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LUSTRE_ALLOC_MAX_STRIPES 2000

/* What the application knows about the file it is about to write.
 * Zero fields mean "not given": environment hint, then directory default. */
struct lustre_alloc_hint {
	int stripe_count;        /* 1..OST count, -1 for all OSTs, 0 = default */
	uint64_t stripe_size;    /* bytes, multiple of 65536, 0 = default */
	uint64_t expected_bytes; /* bytes the application will write, 0 = unknown */
	const char *pool;        /* OST pool name, NULL = all OSTs */
};

/* A layout as decided by the mapper. */
struct lustre_alloc_layout {
	uint64_t stripe_size;  /* bytes per stripe */
	int stripe_count;      /* entries used in osts[] */
	uint32_t osts[LUSTRE_ALLOC_MAX_STRIPES]; /* OST indices in stripe order */
	char policy[32];       /* mapper policy that decided, e.g. "round_robin" */
	char fallback[32];     /* "" or why the mapper's primary policy did not decide */
};

/*
 * Create path like open(path, flags | O_CREAT, mode), on the OSTs the mapper
 * chooses (on Lustre; elsewhere the decision is only recorded when
 * LUSTRE_ALLOC_RECORD is set).  An existing file is opened normally (EEXIST
 * if flags has O_EXCL).  Returns a file descriptor, or -1 with errno set as
 * open(2) would.  hint may be NULL.
 */
int lustre_alloc_create(const char *path, int flags, mode_t mode,
			const struct lustre_alloc_hint *hint);

/*
 * Ask the mapper for a layout without creating anything.  path is only
 * logged by the mapper and may be NULL.  Returns 0 and fills *out, or a
 * negative errno: -ETIMEDOUT (no reply within LUSTRE_ALLOC_TIMEOUT_MS),
 * -EPROTO (undecodable reply), the mapper's errno for a refused request
 * (e.g. -ENOSPC), -EINVAL for a bad hint.
 */
int lustre_alloc_query(const char *path, const struct lustre_alloc_hint *hint,
		       struct lustre_alloc_layout *out);

/* Ping the mapper; returns 0 if it answered within timeout_ms (<= 0: the
 * configured timeout), else a negative errno. */
int lustre_alloc_ping(int timeout_ms);

#ifdef __cplusplus
}
#endif
#endif

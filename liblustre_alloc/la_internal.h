/*
 * la_internal.h - pieces of liblustre_alloc shared between its objects.
 *
 *   la_config.c   environment, read once; real libc symbols (dlsym RTLD_NEXT)
 *   la_paths.c    absolute paths, eligibility, per-directory statfs cache
 *   la_mapper.c   ZeroMQ DEALER + msgpack client of the mapper (protocol v1)
 *   la_backend.c  layout backends: Lustre ioctl, record-only
 *   la_record.c   the record file (one line per decision)
 *   la_create.c   the decision: ask, create with layout, fall back
 *   la_shim.c     the LD_PRELOAD wrappers (only in liblustre_alloc.so)
 *   la_api.c      lustre_alloc.h
 */
#ifndef LA_INTERNAL_H
#define LA_INTERNAL_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "lustre_alloc.h"
#include "lustre_layout_abi.h"

#define LA_HIDDEN __attribute__((visibility("hidden")))
#define LA_EXPORT __attribute__((visibility("default")))

#define LA_PATH_MAX 4096

/* ---- real symbols ---- */
struct la_real {
	int (*open)(const char *, int, ...);
	int (*open64)(const char *, int, ...);
	int (*openat)(int, const char *, int, ...);
	int (*openat64)(int, const char *, int, ...);
	int (*creat)(const char *, mode_t);
	int (*creat64)(const char *, mode_t);
	int (*open_2)(const char *, int);
	int (*open64_2)(const char *, int);
	int (*openat_2)(int, const char *, int);
	FILE *(*fopen)(const char *, const char *);
	FILE *(*fopen64)(const char *, const char *);
};
LA_HIDDEN extern struct la_real la_real;

/* ---- configuration (docs/client.md lists every variable) ---- */
struct la_config {
	int enabled;               /* LUSTRE_ALLOC_DISABLE unset/0 */
	char mapper[512];          /* LUSTRE_ALLOC_MAPPER */
	int timeout_ms;            /* LUSTRE_ALLOC_TIMEOUT_MS */
	int retry_ms;              /* LUSTRE_ALLOC_RETRY_MS */
	char job[256];             /* resolved application id */
	int stripe_count;          /* LUSTRE_ALLOC_STRIPE_COUNT, 0 = not given */
	uint64_t stripe_size;      /* LUSTRE_ALLOC_STRIPE_SIZE, 0 = not given */
	uint64_t expected_bytes;   /* LUSTRE_ALLOC_EXPECTED_BYTES */
	char pool[LA_LOV_MAXPOOLNAME + 1]; /* LUSTRE_ALLOC_POOL */
	char record[LA_PATH_MAX];  /* LUSTRE_ALLOC_RECORD, "" = no record */
	int npaths;                /* LUSTRE_ALLOC_PATHS */
	char *paths[64];
	size_t pathlen[64];
};
LA_HIDDEN extern struct la_config la_cfg;

/* Resolve real symbols and read the environment, once (pthread_once). */
LA_HIDDEN void la_init(void);

/* Recursion guard: non-zero while this thread is inside the shim; libzmq,
 * dlopen and the record file open files too, and a signal handler that
 * opens a file while this thread is in the shim passes straight through. */
LA_HIDDEN extern __thread int la_in_shim __attribute__((tls_model("initial-exec")));

LA_HIDDEN double la_now_us(void);

/* ---- paths ---- */
struct la_dirinfo {
	int is_lustre;
	int stripe_count;      /* directory default, 0 = unknown */
	uint64_t stripe_size;  /* directory default, 0 = unknown */
};
/* Absolute, lexically normalised form of (dirfd, path); 0 or -1. */
LA_HIDDEN int la_abspath(int dirfd, const char *path, char *out, size_t outsz);
LA_HIDDEN int la_under_paths(const char *abs);
/* statfs type and default layout of the directory holding abs (cached). */
LA_HIDDEN int la_dirinfo(const char *abs, struct la_dirinfo *di);
LA_HIDDEN void la_paths_atfork_prepare(void);
LA_HIDDEN void la_paths_atfork_release(void);
LA_HIDDEN void la_paths_free(void);

/* ---- mapper client ---- */
struct la_request {
	const char *job;
	const char *path;
	const char *pool;
	int stripe_count;
	uint64_t stripe_size;
	uint64_t expected_bytes;
};
struct la_decision {
	int ok;                     /* 1: osts/stripe_size valid */
	int count;
	uint32_t osts[LA_MAX_STRIPES];
	uint64_t stripe_size;
	char policy[32];
	char mapper_fallback[32];
	char reason[64];            /* "" when ok, else why not */
	double mapper_us;           /* round trip, 0 if not asked */
	int err;                    /* negative errno for the API */
};
/* Ask for a layout; never blocks longer than timeout_ms.  Fills d. */
LA_HIDDEN void la_mapper_alloc(const struct la_request *rq, int timeout_ms,
			       struct la_decision *d);
/* The same without the process-wide back-off (explicit API). */
LA_HIDDEN void la_mapper_query(const struct la_request *rq, int timeout_ms,
			       struct la_decision *d);
LA_HIDDEN int la_mapper_ping(int timeout_ms);
#define LA_WANT_PONG (-1000)
/* Parse a reply body; exported for the unit test. 0 ok, else -errno. */
LA_HIDDEN int la_parse_reply(const char *buf, size_t len, uint64_t want_id,
			     int want_count, struct la_decision *d);
LA_HIDDEN size_t la_pack_request(char *buf, size_t cap, uint64_t id,
				 const struct la_request *rq);
LA_HIDDEN void la_mapper_atfork_prepare(void);
LA_HIDDEN void la_mapper_atfork_parent(void);
LA_HIDDEN void la_mapper_atfork_child(void);
LA_HIDDEN void la_mapper_shutdown(void);

/* ---- layout backends: the Lustre / not-on-Lustre seam ---- */
struct la_outcome {
	int applied;        /* layout applied (or, record backend, would be) */
	char reason[64];    /* why not, when the backend fell back */
};
struct la_backend {
	const char *name;
	/* Create the NEW file (dirfd, path) with d's layout.  flags are the
	 * application's; the backend adds O_CREAT|O_EXCL (and what it needs).
	 * Returns fd, or -1 with errno (EEXIST: the caller opens normally). */
	int (*create)(int dirfd, const char *path, int flags, mode_t mode,
		      const struct la_decision *d, struct la_outcome *out);
	/* Directory default stripe count/size; 0 or -1 (unknown). */
	int (*dir_default)(const char *dir, int *count, uint64_t *size);
};
LA_HIDDEN extern const struct la_backend la_backend_lustre;
LA_HIDDEN extern const struct la_backend la_backend_record;
/* The ioctl the Lustre backend calls: the one replaceable point of the
 * seam (tests/test_layout_abi.c drives the backend through it). */
LA_HIDDEN extern int (*la_lustre_ioctl)(int fd, unsigned long req, void *arg);
/* Fill lum (size >= la_lum_size(n)) with a SPECIFIC layout; returns bytes. */
LA_HIDDEN size_t la_lum_size(int count);
LA_HIDDEN size_t la_build_lum(void *lum, uint64_t stripe_size, int count,
			      const uint32_t *osts, const char *pool);

/* ---- record ---- */
struct la_record_line {
	const char *path;
	const char *backend;
	const char *op;
	int req_count;
	uint64_t req_size;
	const struct la_decision *d;
	const struct la_outcome *out;
	double total_us;
};
LA_HIDDEN void la_record(const struct la_record_line *r);
LA_HIDDEN void la_record_atfork_prepare(void);
LA_HIDDEN void la_record_atfork_release(void);
LA_HIDDEN void la_record_close(void);

/* ---- the decision ---- */
/* Create the new file (dirfd, path) whose absolute form is abs.  Returns
 * what open(2) with the application's flags would: fd, or -1 + errno. */
LA_HIDDEN int la_create(int dirfd, const char *path, const char *abs,
			const struct la_dirinfo *di, int flags, mode_t mode,
			const struct lustre_alloc_hint *hint, const char *op);
/* Whole pipeline for a wrapper: eligibility, existence, la_create.  Returns
 * 1 and sets *fd when it handled the call, 0 to pass straight through. */
LA_HIDDEN void la_fill_request(struct la_request *rq, const char *abs,
				const struct la_dirinfo *di,
				const struct lustre_alloc_hint *hint);
LA_HIDDEN int la_maybe_create(int dirfd, const char *path, int flags,
			      mode_t mode, const char *op, int *fd,
			      const struct lustre_alloc_hint *hint, int explicit_call);

#endif

/*
 * la_internal.h - pieces of liblustre_alloc shared between its objects.
 *
 *   la_config.c   environment, read once; real libc symbols (dlsym RTLD_NEXT)
 *   la_fmt.c      async-signal-safe text building (no printf, no malloc)
 *   la_paths.c    the real parent directory, eligibility, per-directory cache
 *   la_work.c     preallocated per-create workspaces
 *   la_helper.c   the helper thread that owns every ZeroMQ socket
 *   la_mapper.c   mapper protocol v1: request packing, reply decoding, ask
 *   la_lease_wire.c  protocol v2 frames: lease/release packing, reply decoding
 *   la_lease.c    layouts leased ahead: taken by creates, refilled, returned
 *   la_curve.c    CURVE key files for the mapper connection
 *   la_backend.c  layout backends: Lustre ioctl, record-only; dir defaults
 *   la_pfl.c      composite (PFL) defaults: parse, ask per component, build
 *   la_record.c   the record file (one line per decision)
 *   la_report.c   shadow reports: Lustre's layout read back, sent off the create path
 *   la_create.c   the decision: ask, create with layout, fall back
 *   la_shim.c     the LD_PRELOAD wrappers (only in liblustre_alloc.so)
 *   la_api.c      lustre_alloc.h
 *
 * Signal safety: everything an intercepted create runs on the application's
 * thread (la_maybe_create and what it calls) uses only async-signal-safe
 * calls: system calls, atomics, futexes, string copies; no malloc, no stdio,
 * no mutex, no ZeroMQ.  ZeroMQ runs on the helper thread (la_helper.c).
 */
#ifndef LA_INTERNAL_H
#define LA_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>

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
	int (*close)(int);
	int (*fclose)(FILE *);
};
LA_HIDDEN extern struct la_real la_real;

/* Z85 text of a CURVE key (40 characters + NUL). */
#define LA_Z85_KEY 41

/* ---- configuration (docs/client.md lists every variable) ---- */
struct la_config {
	int enabled;               /* LUSTRE_ALLOC_DISABLE unset/0 */
	char mapper[512];          /* LUSTRE_ALLOC_MAPPER */
	int timeout_ms;            /* LUSTRE_ALLOC_TIMEOUT_MS */
	int retry_ms;              /* LUSTRE_ALLOC_RETRY_MS */
	int cache_s;               /* LUSTRE_ALLOC_CACHE_S, 0 = no cache */
	int lease;                 /* LUSTRE_ALLOC_LEASE: 1 lease layouts ahead (v2) */
	int sizes;                 /* LUSTRE_ALLOC_SIZES=1: report file sizes at close (v2) */
	int start_at_load;         /* LUSTRE_ALLOC_START=load: helper at load, not at the first create */
	char job[256];             /* resolved application id */
	int stripe_count;          /* LUSTRE_ALLOC_STRIPE_COUNT, 0 = not given */
	uint64_t stripe_size;      /* LUSTRE_ALLOC_STRIPE_SIZE, 0 = not given */
	uint64_t expected_bytes;   /* LUSTRE_ALLOC_EXPECTED_BYTES */
	char pool[LA_LOV_MAXPOOLNAME + 1]; /* LUSTRE_ALLOC_POOL */
	int pfl_all;               /* LUSTRE_ALLOC_PFL_ALL: name OSTs of every PFL component */
	char fsname[9];            /* LUSTRE_ALLOC_FSNAME (mkfs.lustre --fsname: at most 8), "" = the mapper's only one */
	char record[LA_PATH_MAX];  /* LUSTRE_ALLOC_RECORD, "" = no record */
	int npaths;                /* LUSTRE_ALLOC_PATHS */
	char *paths[64];
	size_t pathlen[64];
	/* CURVE (la_curve.c): on when curve_server[0]; curve_error says why
	 * the configured keys could not be used (then no mapper is asked). */
	char curve_server[LA_Z85_KEY];
	char curve_public[LA_Z85_KEY];
	char curve_secret[LA_Z85_KEY];
	char curve_error[64];
};
LA_HIDDEN extern struct la_config la_cfg;

/* Resolve real symbols and read the environment, once (pthread_once). */
LA_HIDDEN void la_init(void);

/* Recursion guard: non-zero while this thread is inside the shim; libzmq
 * and the record file open files too, and a signal handler that opens a
 * file while this thread is in the shim passes straight through. */
LA_HIDDEN extern __thread int la_in_shim __attribute__((tls_model("initial-exec")));

LA_HIDDEN double la_now_us(void);
/* getpid()/gettid() without a system call each time (cached; the fork
 * child handler forgets them). */
LA_HIDDEN pid_t la_getpid(void);
LA_HIDDEN pid_t la_gettid(void);

/* ---- async-signal-safe text (la_fmt.c) ---- */
struct la_out {
	char *p;
	size_t len, cap; /* p[len] is always NUL; cut when full */
};
LA_HIDDEN void la_put_str(struct la_out *o, const char *s);
LA_HIDDEN void la_put_u64(struct la_out *o, uint64_t v);
LA_HIDDEN void la_put_i64(struct la_out *o, int64_t v);
/* v with one decimal (microseconds in the record). */
LA_HIDDEN void la_put_tenths(struct la_out *o, double v);
/* "what:errno" into a fixed reason buffer. */
LA_HIDDEN void la_reason(char *dst, size_t cap, const char *what, int e);

/* ---- composite (PFL) directory defaults (la_pfl.c) ---- */
#define LA_PFL_MAX 16     /* components of a default the shim places */
#define LA_PFL_BYTES 4096 /* largest composite default kept */
/* What a component of a composite default is: OST components are placed by
 * the mapper; Data-on-MDT, self-extending (SEL) extension and anything else
 * (foreign, overstriped, OSTs already named) are kept as they are. */
enum { LA_PFL_OST, LA_PFL_MDT, LA_PFL_EXT, LA_PFL_KEEP };
struct la_pfl_comp {
	uint64_t start, end;       /* extent [start, end), bytes; end LUSTRE_EOF */
	uint32_t flags;            /* lcme_flags of the template */
	int kind;                  /* LA_PFL_* */
	int stripe_count;          /* OST: -1 every OST, else >= 1 */
	uint64_t stripe_size;      /* OST: bytes, as the mapper prices it */
	uint64_t layout_stripe_size; /* OST: the template's, 0 = Lustre's default */
	char pool[LA_LOV_MAXPOOLNAME + 1]; /* OST: "" none */
	uint32_t blob_off, blob_len; /* the template's blob in raw */
};
struct la_pfl {
	int n;                     /* components */
	int nost;                  /* of them LA_PFL_OST */
	struct la_pfl_comp c[LA_PFL_MAX];
	size_t len;                /* bytes of raw */
	unsigned char raw[LA_PFL_BYTES]; /* the default as GETSTRIPE gave it */
};
/* Parse a composite default (lov_comp_md_v1 from GETSTRIPE) into pfl.
 * 0; -2 a self-extending (SEL) default; -1 not one the shim places
 * (malformed, too large, more than LA_PFL_MAX components, FLR mirrors):
 * either way the create is left to Lustre.  OST components that start
 * after 0 are kept as the template has them unless la_cfg.pfl_all. */
LA_HIDDEN int la_parse_comp_default(const void *buf, size_t len,
				    struct la_pfl *pfl);
/* *dst = *src, copying only the bytes in use. */
LA_HIDDEN void la_pfl_copy(struct la_pfl *dst, const struct la_pfl *src);

/* ---- the mapper's answer ---- */
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
	uint64_t shadow_token;      /* shadow mode: report Lustre's layout under it */
	uint64_t lease;             /* the lease the layout came from, 0 asked per create */
	int to_lustre;              /* the mapper left this create to Lustre's allocator */
	void *lease_slot;           /* its ring slot: la_lease_created() once created */
	/* composite: osts holds the OST components' lists one after the
	 * other, comp_count[i] OSTs each; pfl the directory's template */
	int ncomp;
	int comp_count[LA_PFL_MAX];
	const struct la_pfl *pfl;
};

/* ---- directory facts ---- */
struct la_dirinfo {
	int is_lustre;
	int has_default;       /* a plain (v1/v3) default layout was read */
	int composite;         /* PFL/composite default */
	int pfl_ok;            /* composite and parsed into the workspace's pfl */
	int untouched;         /* LA_DIR_*: a default the shim leaves to Lustre */
	int stripe_count;      /* directory default, 0 = unknown */
	uint64_t stripe_size;  /* directory default, 0 = unknown */
	char pool[LA_LOV_MAXPOOLNAME + 1]; /* directory default's pool, "" */
	int64_t projid;        /* project id a new file gets here, -1 unknown */
};
/* Defaults the shim passes to Lustre untouched: a self-extending layout
 * (LOV_USER_MAGIC_SEL, or a composite with an extension component) and a
 * directory default that names its OSTs (LOV_USER_MAGIC_SPECIFIC). */
enum { LA_DIR_PLACE, LA_DIR_SEL, LA_DIR_SPECIFIC, LA_DIR_OFFSET };
/* A directory default layout as LL_IOC_LOV_GETSTRIPE (or the lustre.lov
 * xattr) gives it: lov_user_md v1/v3 or a composite; 0 or -1. */
LA_HIDDEN int la_parse_dir_default(const void *buf, size_t len,
				   struct la_dirinfo *di);

/* Raise *hwm to at least v (the highest slot index ever used + 1: a fork
 * child resets only those slots; touching the untouched ones would fault
 * in megabytes of zero pages for every fork). */
LA_HIDDEN void la_raise_hwm(atomic_int *hwm, int v);

/* futex(2) on a process-private word (the wait/wake of the create path:
 * a system call, async-signal-safe). */
LA_HIDDEN long la_futex(atomic_int *addr, int op, int val,
			const struct timespec *ts);
/* Sleep while *addr == val, at most until deadline_us (la_now_us). */
LA_HIDDEN void la_futex_wait_until(atomic_int *addr, int val,
				   double deadline_us);

/* ---- per-create workspace (la_work.c) ---- */
#define LA_LUM_MAX (sizeof(struct la_lov_user_md_v3) + \
		    LA_MAX_STRIPES * sizeof(struct la_lov_user_ost_data_v1))
struct la_work {
	atomic_int busy;
	double deadline_us;        /* the create's whole mapper budget */
	char parent[LA_PATH_MAX];  /* directory part of the caller's path */
	char abs[LA_PATH_MAX];     /* where the file really lands */
	struct la_decision d;
	struct la_pfl pfl;         /* the directory's composite default */
	uint32_t got[LA_MAX_STRIPES]; /* the OSTs Lustre gave the file */
	union {                    /* one use at a time */
		unsigned char lum[LA_LUM_MAX];   /* SETSTRIPE/GETSTRIPE */
		char line[LA_LUM_MAX];           /* the record line */
	} u;
};
/* A free workspace; when every one is in use, wait for one until
 * deadline_us; NULL after that (the create then passes straight through). */
LA_HIDDEN struct la_work *la_work_get(double deadline_us);
LA_HIDDEN void la_work_put(struct la_work *w);
LA_HIDDEN void la_work_atfork_child(void);

/* ---- paths ---- */
/* The caller's (dirfd, path) split into its real parent directory and
 * last component. */
struct la_target {
	int pfd;               /* O_PATH descriptor of the parent, or -1 */
	const char *base;      /* last component (points into the path) */
};
/* Open the parent of path with O_PATH (the kernel resolves every symbolic
 * link and ".."); 0, or -1 when the shim should leave the call alone. */
LA_HIDDEN int la_target_open(int dirfd, const char *path, struct la_work *w,
			     struct la_target *t);
/* The absolute path where (t->pfd, t->base) lands, into w->abs; 0 or -1. */
LA_HIDDEN int la_target_abspath(const struct la_target *t, struct la_work *w);
LA_HIDDEN int la_under_paths(const char *abs);
/* fstatfs(pfd) says Lustre (uncached: one system call, cheaper than
 * naming the directory). */
LA_HIDDEN int la_dir_is_lustre(int pfd);
/* statfs type and default layout of the directory pfd, whose absolute
 * name is dir[0..dirlen) (cached for LUSTRE_ALLOC_CACHE_S seconds by that
 * name); 0 or -1. */
LA_HIDDEN int la_dirinfo(int pfd, const char *dir, size_t dirlen,
			 struct la_work *w, struct la_dirinfo *di);
LA_HIDDEN void la_paths_atfork_child(void);

/* ---- mapper client ---- */
/* The stripe size the mapper prices a layout with when nobody gave one:
 * Lustre's default since 2.16.0 (LOV_DESC_STRIPE_SIZE_DEFAULT, lustre_idl.h:
 * 4 << LNET_MTU_BITS; 1 MiB in 2.15 and before).  The layout itself then
 * carries 0: Lustre applies its own. */
#define LA_PRICING_STRIPE_SIZE (4u << 20)
struct la_request {
	const char *job;
	const char *path;
	const char *pool;
	int stripe_count;
	uint64_t stripe_size;  /* bytes, as sent to the mapper */
	/* 1: nobody gave a stripe size (hint, environment, directory or
	 * file system default): the layout carries 0 and LOD applies its own
	 * default (lod_qos.c lod_qos_parse_config(): a zero lmm_stripe_size
	 * keeps the default), 4 MiB in 2.16+, 1 MiB before */
	int stripe_size_lustre;
	/* 1: the stripe count, size or pool came from a hint or the environment,
	 * not from the directory: a plain create would not give them */
	int own_layout;
	uint64_t expected_bytes;
	uint32_t uid, gid;     /* effective ids of the creating process */
	int64_t projid;        /* the file's project id to be, -1 unknown */
};
/* Ask for a layout; never blocks longer than timeout_ms.  Fills d.
 * Async-signal-safe (the helper thread talks to the mapper). */
LA_HIDDEN void la_mapper_alloc(const struct la_request *rq, int timeout_ms,
			       struct la_decision *d);
/* The OSTs of each OST component of pfl, asked in one protocol v2 composite
 * alloc; d->ncomp/comp_count checked against the template.  Fills d. */
LA_HIDDEN void la_mapper_composite(const struct la_request *rq,
				   const struct la_pfl *pfl, int timeout_ms,
				   struct la_decision *d);
/* The exchange alone (la_mapper.c): d as the mapper answered. */
LA_HIDDEN void la_mapper_ask_composite(const struct la_request *rq,
				       const struct la_pfl *pfl, int timeout_ms,
				       struct la_decision *d);
LA_HIDDEN size_t la_pack_composite(char *buf, size_t cap, uint64_t id,
				   const struct la_request *rq,
				   const struct la_pfl *pfl);
/* The same without the process-wide back-off (explicit API). */
LA_HIDDEN void la_mapper_query(const struct la_request *rq, int timeout_ms,
			       struct la_decision *d);
LA_HIDDEN int la_mapper_ping(int timeout_ms);
/* The process-wide back-off after a mapper timeout (LUSTRE_ALLOC_RETRY_MS):
 * while active, creates go to Lustre's allocator without asking. */
LA_HIDDEN int la_mapper_backoff_active(void);
LA_HIDDEN void la_mapper_backoff_start(void);
#define LA_WANT_PONG (-1000)
#define LA_WANT_COMPOSITE (-1001) /* a composite reply: layouts per component */
/* Parse a reply body; exported for the unit test. 0 ok, 1 another
 * request's reply, else -errno. */
LA_HIDDEN int la_parse_reply(const char *buf, size_t len, uint64_t want_id,
			     int want_count, struct la_decision *d);
LA_HIDDEN size_t la_pack_request(char *buf, size_t cap, uint64_t id,
				 const struct la_request *rq);

/* ---- protocol v2: leases (la_lease_wire.c, la_lease.c) ---- */
#define LA_LEASE_MAX_STRIPES 64   /* wider layouts are asked per create */
#define LA_LEASE_ASK_MAX 256      /* layouts asked in one lease */
#define LA_LEASE_REVOKE_MAX 64    /* revoked lease ids read from one reply */
#define LA_LEASE_REPLY_MAX 65536  /* largest reply body read */
struct la_lease_reply {
	uint64_t id, lease, stripe_size;
	int version;               /* the reply's v: 1 from a v1 mapper */
	int ok, err, per_create, retry_ms, lease_ms;
	int to_lustre;             /* allocator "lustre": create plainly for retry_ms */
	int nlayouts;
	int counts[LA_LEASE_ASK_MAX];
	uint32_t osts[LA_LEASE_ASK_MAX][LA_LEASE_MAX_STRIPES];
	char policy[32];
	int nrevoke;
	uint64_t revoke[LA_LEASE_REVOKE_MAX];
};
/* Pack a lease request (count layouts of rq's class; rq->path is the
 * directory) or a release of n (lease, used) pairs; bytes, 0 if too large. */
LA_HIDDEN size_t la_pack_lease(char *buf, size_t cap, uint64_t id, int count,
			       const struct la_request *rq);
/* A file created with a leased layout, named in a release. */
#define LA_NAME_MAX 255            /* NAME_MAX, <linux/limits.h> */
struct la_file_used {
	uint64_t lease;
	int index;                 /* the layout's place in its lease */
	char name[LA_NAME_MAX + 1];
};
LA_HIDDEN size_t la_pack_release(char *buf, size_t cap, uint64_t id,
				 const uint64_t *leases, const int *used, int n,
				 const struct la_file_used *files, int nfiles);
/* Decode a lease reply into r: 0 granted, 1 a release's answer (ignored),
 * -errno refused or malformed (r->err, r->per_create, r->retry_ms and
 * r->revoke say what the mapper asked for). */
LA_HIDDEN int la_parse_lease_reply(const char *buf, size_t len,
				   struct la_lease_reply *r);
/* What la_lease_take did. */
enum { LA_LEASE_TAKEN, LA_LEASE_PER_CREATE, LA_LEASE_LUSTRE };
/* Take the next leased layout of rq's class (the directory is
 * rq->path[0..dirlen)) into d, waiting for a refill at most until
 * deadline_us.  LA_LEASE_TAKEN: d holds it; LA_LEASE_PER_CREATE: ask per
 * create (v1); LA_LEASE_LUSTRE: use Lustre's allocator (d->reason says
 * why).  Async-signal-safe. */
LA_HIDDEN int la_lease_take(const struct la_request *rq, size_t dirlen,
			    double deadline_us, struct la_decision *d);
/* Helper thread: refill, reap, release, expire; ms until the next pass
 * (-1: none due).  la_leases_socket is polled for replies (NULL: none). */
LA_HIDDEN int la_leases_run(void);
LA_HIDDEN void *la_leases_socket(void);
LA_HIDDEN void la_leases_on_readable(void);
/* Helper thread, at exit: return every lease held. */
LA_HIDDEN void la_leases_close(void);
LA_HIDDEN void la_leases_atfork_child(void);
/* Counters (the stats the record and the tests read). */
enum { LA_LS_TAKEN, LA_LS_WAITED, LA_LS_ASKED, LA_LS_GRANTED, LA_LS_REFUSED,
       LA_LS_REVOKED, LA_LS_EXPIRED, LA_LS_RELEASES, LA_LS_REFRESHED,
       LA_LS_TO_LUSTRE,
       LA_LS_N };
LA_HIDDEN uint64_t la_lease_stat(int which);
/* The create that took d's leased layout is over: name (the file's last
 * path component) got it when applied; async-signal-safe.  Every create
 * that took a leased layout calls it once. */
LA_HIDDEN void la_lease_created(const struct la_decision *d, const char *name,
				int applied);
/* Drop what is left of lease (Lustre refused one of its layouts: the rest
 * came from the same sample); async-signal-safe. */
LA_HIDDEN void la_lease_forget(uint64_t lease);

/* ---- file sizes at close (la_sizes.c) ---- */
/* A file this process created (fd) whose size is sent when it is closed;
 * async-signal-safe. */
LA_HIDDEN void la_sizes_track(int fd);
/* The close wrapper: queue fd's size if it is a tracked file (before the
 * real close); async-signal-safe. */
LA_HIDDEN void la_sizes_closing(int fd);
/* The fclose wrapper: real_fclose(f) into *rc, and f's file's size queued
 * after it if it is tracked. */
LA_HIDDEN void la_sizes_closing_stream(FILE *f, int (*real_fclose)(FILE *),
				       int *rc);
/* Helper thread: send what is queued (force: now, not batched); ms until
 * the next pass is due, or -1.  At exit, close the socket. */
LA_HIDDEN int la_sizes_run(int force);
/* Sizes queued or waiting for the connection. */
LA_HIDDEN int la_sizes_pending(void);
LA_HIDDEN void la_sizes_close(void);
LA_HIDDEN void la_sizes_atfork_child(void);
LA_HIDDEN size_t la_pack_sizes(char *buf, size_t cap, uint64_t id,
			       const char *job, const uint64_t *sizes, int n);
enum { LA_SZ_SENT, LA_SZ_DROPPED, LA_SZ_N };
LA_HIDDEN uint64_t la_sizes_stat(int which);

/* ---- libzmq and libmsgpack-c, dlopen()ed at the helper's start (la_libs.c) ---- */
/* 0: loaded (now or before); -1: they cannot be (one line on stderr, once). */
LA_HIDDEN int la_libs_load(void);

/* ---- the helper thread (la_helper.c) ---- */
#define LA_REQ_MAX (LA_PATH_MAX + 1024)
struct la_call {
	atomic_int state;        /* LA_CALL_* (la_helper.c) */
	uint64_t id;
	int want_count;
	double deadline_us;
	size_t reqlen;
	char req[LA_REQ_MAX];    /* the packed request */
	struct la_decision d;    /* the helper's answer */
};
/* Start the helper if it does not run in this process, loading libzmq and
 * libmsgpack-c first (la_libs_load()).  Not signal-safe: called from the
 * first create in scope (la_create.c), la_init with LUSTRE_ALLOC_START=load,
 * the explicit API and the fork child handler. */
LA_HIDDEN void la_helper_start(void);
LA_HIDDEN int la_helper_running(void);
/* Claim a call slot (NULL: all busy or no helper), then la_helper_wait. */
LA_HIDDEN struct la_call *la_helper_claim(void);
/* Hand the packed call to the helper and wait for it until its deadline.
 * 0: c->d holds the answer (copied to d); -ETIMEDOUT: no answer, d->reason
 * says whether the request was sent.  The call is released either way. */
LA_HIDDEN int la_helper_wait(struct la_call *c, struct la_decision *d);
LA_HIDDEN void la_helper_release(struct la_call *c);
LA_HIDDEN void la_helper_atfork_child(void);
LA_HIDDEN void la_helper_shutdown(void);
/* Wake the helper (async-signal-safe). */
LA_HIDDEN void la_helper_wake(void);
/* A new DEALER connected to the mapper with the configured CURVE keys
 * (helper thread only), or NULL. */
LA_HIDDEN void *la_helper_socket(void);

/* ---- shadow reports (la_report.c) ---- */
struct la_backend;
/* Queue the report of a file created with Lustre's layout for the shadow
 * decision token (async-signal-safe; dropped when the queue is full). */
LA_HIDDEN void la_report_queue(uint64_t token, const char *path,
			       const struct la_backend *be);
/* Helper thread: read and send what is due; ms until the next retry, or -1. */
LA_HIDDEN int la_reports_run(void);
LA_HIDDEN void la_reports_close(void);
/* Reports queued or being read. */
LA_HIDDEN int la_reports_pending(void);
/* At exit: let the helper send what is queued, at most a bounded while. */
LA_HIDDEN void la_reports_flush_at_exit(void);
LA_HIDDEN void la_reports_atfork_child(void);
LA_HIDDEN uint64_t la_reports_dropped_count(void);
/* Pack a shadow report (docs/protocol.md); bytes, 0 when it does not fit. */
LA_HIDDEN size_t la_pack_report(char *buf, size_t cap, uint64_t id,
				uint64_t token, const uint32_t *osts, int count,
				uint64_t stripe_size);

/* ---- CURVE (la_curve.c) ---- */
/* Read LUSTRE_ALLOC_CURVE_* key files into la_cfg (not signal-safe). */
LA_HIDDEN void la_curve_load(void);

/* ---- layout backends: the Lustre / not-on-Lustre seam ---- */
/* How a file whose layout Lustre refused got one (la_backend.c). */
enum { LA_NOT_REFUSED, LA_RECOVERED_DEFAULT, LA_REMOVED,
       LA_RECOVERY_FAILED };
struct la_outcome {
	int applied;        /* layout applied (or, record backend, would be) */
	int refused_errno;  /* SETSTRIPE's errno when Lustre refused it, else 0 */
	int recovery;       /* LA_RECOVERED_* / LA_REMOVED: what became of it */
	char reason[64];    /* why not, when the backend fell back */
	uint32_t *got;      /* LA_MAX_STRIPES: the OSTs Lustre gave the file */
	int got_count;      /* read back: stripes in got, 0 not read */
	int got_known;      /* got came back with the SETSTRIPE: no read-back */
	uint64_t got_size;  /* read back: its stripe size, bytes */
};
struct la_backend {
	const char *name;
	/* Create the NEW file (dirfd, path) with d's layout in rq's pool (or
	 * no pool).  flags are the application's; the backend adds
	 * O_CREAT|O_EXCL (and what it needs).  rq's stripe count and size are
	 * the layout Lustre's allocator is asked for when it refuses d's.
	 * lum is scratch space of LA_LUM_MAX bytes.  Returns fd, or -1 with
	 * errno (EEXIST: the caller opens normally). */
	int (*create)(int dirfd, const char *path, int flags, mode_t mode,
		      const struct la_decision *d, const struct la_request *rq,
		      void *lum, struct la_outcome *out);
	/* The layout the new file fd has, into out->got (lum scratch):
	 * its stripe count, 0 none, -1 nothing to read. */
	int (*read_back)(int fd, void *lum, struct la_outcome *out);
	/* Default layout of the directory dirfd (an O_RDONLY descriptor) into
	 * buf (cap bytes); returns its length, or -1 (none, unknown). */
	ssize_t (*dir_default)(int dirfd, void *buf, size_t cap);
	/* The layout of the existing file path (helper thread only): its OSTs
	 * into osts (at most max) and *stripe_size; buf is scratch of cap
	 * bytes.  Returns the stripe count, 0 when it has no layout yet, -1
	 * when it cannot be read (gone, not plain, ...). */
	int (*file_layout)(const char *path, void *buf, size_t cap,
			   uint32_t *osts, int max, uint64_t *stripe_size);
};
LA_HIDDEN extern const struct la_backend la_backend_lustre;
/* Layouts Lustre refused, by how the file then got one (LA_RECOVERED_*,
 * LA_RECOVERY_FAILED); async-signal-safe. */
LA_HIDDEN void la_refusal_count(int recovery);
LA_HIDDEN uint64_t la_refusal_stat(int recovery);
LA_HIDDEN extern const struct la_backend la_backend_record;
/* The ioctl the Lustre backend calls: the replaceable point of the seam
 * (tests/test_layout_abi.c drives the backend through it). */
LA_HIDDEN extern int (*la_lustre_ioctl)(int fd, unsigned long req, void *arg);
/* The record backend's stand-in for a Lustre directory default: this user
 * xattr holding the bytes LL_IOC_LOV_GETSTRIPE would give. */
#define LA_DIR_DEFAULT_XATTR "user.lustre_alloc.lov"
/* A file's plain layout (lov_user_md v1/v3 with objects, as GETSTRIPE gives
 * it): its OST indices into osts (at most max), *stripe_size; returns the
 * stripe count, or -1 (composite, truncated, unknown magic, too many). */
LA_HIDDEN int la_parse_file_layout(const void *buf, size_t len, uint32_t *osts,
				   int max, uint64_t *stripe_size);
/* Fill buf with the composite layout of d->pfl whose OST components name
 * d's OSTs (LOV_USER_MAGIC_SPECIFIC blobs, pool: the component's, else
 * pool), the other components copied from the template; bytes, 0 when it
 * does not fit cap. */
LA_HIDDEN size_t la_build_comp(void *buf, size_t cap, const struct la_decision *d,
			       const char *pool);
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
	const char *pool;           /* pool of the layout ("" none) */
	const struct la_pfl *pfl;   /* the composite default, NULL plain */
	const struct la_decision *d;
	const struct la_outcome *out;
	double total_us;
};
/* Async-signal-safe; builds the line in buf (cap bytes). */
LA_HIDDEN void la_record(const struct la_record_line *r, char *buf, size_t cap);
LA_HIDDEN void la_record_close(void);

/* ---- the decision ---- */
LA_HIDDEN void la_fill_request(struct la_request *rq, const char *abs,
			       const struct la_dirinfo *di,
			       const struct lustre_alloc_hint *hint);
/* Whole pipeline for a wrapper: eligibility, existence, create.  Returns
 * 1 and sets *fd when it handled the call, 0 to pass straight through. */
LA_HIDDEN int la_maybe_create(int dirfd, const char *path, int flags,
			      mode_t mode, const char *op, int *fd,
			      const struct lustre_alloc_hint *hint, int explicit_call);

#endif

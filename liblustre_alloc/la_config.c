/*
 * la_config.c - real libc symbols, looked up once with dlsym(RTLD_NEXT), and
 * the environment, read once.  Every variable is documented with its default
 * in docs/client.md.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "la_internal.h"

struct la_real la_real;
struct la_config la_cfg;
__thread int la_in_shim __attribute__((tls_model("initial-exec")));

static pthread_once_t la_once = PTHREAD_ONCE_INIT;

#define LA_DEFAULT_MAPPER "tcp://127.0.0.1:5558"
#define LA_DEFAULT_TIMEOUT_MS 50
#define LA_DEFAULT_RETRY_MS 1000
/* Directory facts (file system type, default layout) are re-read after
 * this long: an lfs setstripe -d during a run is seen within it. */
#define LA_DEFAULT_CACHE_S 10

double la_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static atomic_int la_pid_cache;
static __thread pid_t la_tid_cache __attribute__((tls_model("initial-exec")));
static atomic_uint la_fork_gen; /* bumped in every fork child */
static __thread unsigned la_tid_gen __attribute__((tls_model("initial-exec")));

pid_t la_getpid(void)
{
	pid_t p = atomic_load(&la_pid_cache);

	if (!p) {
		p = getpid();
		atomic_store(&la_pid_cache, p);
	}
	return p;
}

pid_t la_gettid(void)
{
	unsigned gen = atomic_load(&la_fork_gen);

	if (!la_tid_cache || la_tid_gen != gen) {
		la_tid_cache = (pid_t)syscall(SYS_gettid);
		la_tid_gen = gen;
	}
	return la_tid_cache;
}

#define LA_RESOLVE(field, name) \
	do { *(void **)(&la_real.field) = dlsym(RTLD_NEXT, name); } while (0)

static void la_resolve(void)
{
	LA_RESOLVE(open, "open");
	LA_RESOLVE(open64, "open64");
	LA_RESOLVE(openat, "openat");
	LA_RESOLVE(openat64, "openat64");
	LA_RESOLVE(creat, "creat");
	LA_RESOLVE(creat64, "creat64");
	LA_RESOLVE(open_2, "__open_2");
	LA_RESOLVE(open64_2, "__open64_2");
	LA_RESOLVE(openat_2, "__openat_2");
	LA_RESOLVE(fopen, "fopen");
	LA_RESOLVE(fopen64, "fopen64");
	LA_RESOLVE(close, "close");
	LA_RESOLVE(fclose, "fclose");
}

static long la_env_long(const char *name, long dflt, long lo, long hi)
{
	const char *s = getenv(name);
	char *end;
	long v;

	if (!s || !*s)
		return dflt;
	errno = 0;
	v = strtol(s, &end, 0);
	if (errno || *end || v < lo || v > hi)
		return dflt;
	return v;
}

/* Size with an optional K/M/G suffix (powers of 1024), as lfs accepts. */
static uint64_t la_env_size(const char *name)
{
	const char *s = getenv(name);
	char *end;
	unsigned long long v;

	if (!s || !*s || *s == '-')
		return 0;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno)
		return 0;
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	default: break;
	}
	if (*end)
		return 0;
	return v;
}

static void la_copy(char *dst, size_t cap, const char *src)
{
	size_t n = strlen(src);

	if (n >= cap)
		n = cap - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* Lustre's jobid: jobid_var, else the jobid_name template "%e.%u"
 * (executable name = the task's comm, and uid). */
static void la_job_identity(void)
{
	const char *s = getenv("LUSTRE_ALLOC_JOBID");
	const char *var;
	char comm[17] = "";

	if (s && *s) {
		la_copy(la_cfg.job, sizeof(la_cfg.job), s);
		return;
	}
	var = getenv("LUSTRE_ALLOC_JOBID_VAR");
	if (!var || !*var)
		var = "SLURM_JOB_ID";
	s = getenv(var);
	if (s && *s) {
		la_copy(la_cfg.job, sizeof(la_cfg.job), s);
		return;
	}
	if (prctl(PR_GET_NAME, comm, 0, 0, 0) != 0 || !comm[0])
		strcpy(comm, "unknown");
	snprintf(la_cfg.job, sizeof(la_cfg.job), "%s.%u", comm,
		 (unsigned)getuid());
}

static void la_read_paths(void)
{
	const char *s = getenv("LUSTRE_ALLOC_PATHS");
	const char *p, *e;

	if (!s)
		return;
	for (p = s; *p && la_cfg.npaths < 64; p = *e ? e + 1 : e) {
		size_t n;
		char *copy;
		static char pathbuf[8192];
		static size_t used;

		e = strchr(p, ':');
		if (!e)
			e = p + strlen(p);
		n = (size_t)(e - p);
		while (n > 1 && p[n - 1] == '/')
			n--;            /* "/scratch/" matches like "/scratch" */
		if (n == 0 || p[0] != '/')
			continue;       /* only absolute prefixes */
		if (used + n + 1 > sizeof(pathbuf))
			break;
		copy = pathbuf + used;
		used += n + 1;
		memcpy(copy, p, n);
		copy[n] = '\0';
		la_cfg.paths[la_cfg.npaths] = copy;
		la_cfg.pathlen[la_cfg.npaths] = (n == 1) ? 0 : n; /* "/" = all */
		la_cfg.npaths++;
	}
}

/* The fork child has one thread: the workspaces, cache slots and calls
 * of the parent's other threads are not in use, and the helper thread must
 * be started again.  (No prepare/parent handlers: nothing is locked.) */
static void la_atfork_child(void)
{
	atomic_store(&la_pid_cache, 0);
	atomic_fetch_add(&la_fork_gen, 1);
	la_work_atfork_child();
	la_paths_atfork_child();
	la_helper_atfork_child();
}

static void la_init_once(void)
{
	const char *s;

	la_in_shim++;
	la_resolve();
	memset(&la_cfg, 0, sizeof(la_cfg));
	s = getenv("LUSTRE_ALLOC_DISABLE");
	la_cfg.enabled = !(s && *s && strcmp(s, "0") != 0);
	s = getenv("LUSTRE_ALLOC_MAPPER");
	la_copy(la_cfg.mapper, sizeof(la_cfg.mapper), s ? s : LA_DEFAULT_MAPPER);
	la_cfg.timeout_ms = (int)la_env_long("LUSTRE_ALLOC_TIMEOUT_MS",
					     LA_DEFAULT_TIMEOUT_MS, 1, 60000);
	la_cfg.retry_ms = (int)la_env_long("LUSTRE_ALLOC_RETRY_MS",
					   LA_DEFAULT_RETRY_MS, 0, 3600000);
	la_cfg.stripe_count = (int)la_env_long("LUSTRE_ALLOC_STRIPE_COUNT", 0,
					       -1, LA_MAX_STRIPES);
	la_cfg.stripe_size = la_env_size("LUSTRE_ALLOC_STRIPE_SIZE");
	if (la_cfg.stripe_size % LA_STRIPE_SIZE_UNIT ||
	    la_cfg.stripe_size > UINT32_MAX)
		la_cfg.stripe_size = 0; /* not a valid Lustre stripe size */
	la_cfg.expected_bytes = la_env_size("LUSTRE_ALLOC_EXPECTED_BYTES");
	s = getenv("LUSTRE_ALLOC_POOL");
	if (s && *s)
		la_copy(la_cfg.pool, sizeof(la_cfg.pool), s);
	s = getenv("LUSTRE_ALLOC_FSNAME");
	if (s && *s && strlen(s) < sizeof(la_cfg.fsname))
		la_copy(la_cfg.fsname, sizeof(la_cfg.fsname), s);
	s = getenv("LUSTRE_ALLOC_RECORD");
	if (s && *s)
		la_copy(la_cfg.record, sizeof(la_cfg.record), s);
	la_cfg.lease = (int)la_env_long("LUSTRE_ALLOC_LEASE", 1, 0, 1);
	la_cfg.sizes = (int)la_env_long("LUSTRE_ALLOC_SIZES", 0, 0, 1);
	s = getenv("LUSTRE_ALLOC_START");
	la_cfg.start_at_load = s && strcmp(s, "load") == 0;
	la_cfg.pfl_all = (int)la_env_long("LUSTRE_ALLOC_PFL_ALL", 0, 0, 1);
	la_cfg.cache_s = (int)la_env_long("LUSTRE_ALLOC_CACHE_S",
					  LA_DEFAULT_CACHE_S, 0, 86400);
	la_job_identity();
	la_read_paths();
	la_curve_load();
	pthread_atfork(NULL, NULL, la_atfork_child);
	/* A process that never creates a file in scope never loads libzmq
	 * nor starts the helper (la_create.c starts it at the first create). */
	if (la_cfg.enabled && la_cfg.start_at_load)
		la_helper_start();
	la_in_shim--;
}

void la_init(void)
{
	pthread_once(&la_once, la_init_once);
}

__attribute__((constructor)) static void la_constructor(void)
{
	la_init();
}

__attribute__((destructor)) static void la_destructor(void)
{
	la_in_shim++;
	la_helper_shutdown();
	la_record_close();
	la_in_shim--;
}

/*
 * la_libs.c - libzmq and libmsgpack-c, loaded when the helper first starts.
 *
 * The shim is preloaded into every process of a job, most of which never
 * create a file on Lustre (a login node's cp, sed and python -c; a
 * workflow's short steps).  Linked against libzmq, each of them mapped
 * libzmq, libstdc++, libsodium, libpgm, libnorm and the Kerberos libraries
 * at start (20 libraries) and paid about 2-3 ms for it.  So the shim names
 * neither library in DT_NEEDED: these definitions stand in for the 19
 * functions it calls and forward to the real ones, which la_libs_load()
 * dlopen()s (RTLD_LOCAL: an application's own libzmq, e.g. pyzmq's bundled
 * copy, is neither replaced nor seen) when the first create in scope starts
 * the helper thread (la_helper_start()).
 *
 * The definitions are hidden from the application by the version scripts
 * (liblustre_alloc.map, liblustre_alloc_api.map): zmq.h declares them with
 * default visibility, and an exported zmq_send would interpose the
 * application's.  When the libraries cannot be loaded, each fails with
 * ENOSYS (the helper does not start; creates get Lustre's default).
 *
 * Library names: the SONAMEs of the libraries the build found (Makefile:
 * LA_ZMQ_SONAME, LA_MSGPACK_SONAME), so a build against msgpack-c 6
 * (libmsgpack-c.so.2) loads what it was compiled for.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <msgpack.h>
#include <zmq.h>

#include "la_internal.h"

#ifndef LA_ZMQ_SONAME
#define LA_ZMQ_SONAME "libzmq.so.5"
#endif
#ifndef LA_MSGPACK_SONAME
#define LA_MSGPACK_SONAME "libmsgpackc.so.2"
#endif

#define LA_ZMQ_FUNCS(X) \
	X(zmq_close) X(zmq_connect) X(zmq_ctx_new) X(zmq_ctx_set) \
	X(zmq_ctx_term) X(zmq_getsockopt) X(zmq_msg_close) X(zmq_msg_data) \
	X(zmq_msg_init) X(zmq_msg_move) X(zmq_msg_recv) X(zmq_msg_size) \
	X(zmq_poll) X(zmq_recv) X(zmq_send) X(zmq_setsockopt) X(zmq_socket)
#define LA_MSGPACK_FUNCS(X) X(msgpack_unpack_next) X(msgpack_zone_free)

static struct {
#define LA_PTR(f) __typeof__(&f) f;
	LA_ZMQ_FUNCS(LA_PTR)
	LA_MSGPACK_FUNCS(LA_PTR)
#undef LA_PTR
} la_lib;

/* 1: loaded, -1: failed; tried once per process image (pthread_once) */
static atomic_int la_libs_state;
static pthread_once_t la_libs_once = PTHREAD_ONCE_INIT;

static void *la_open_lib(const char *name)
{
	void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		/* one line, once: the creates go on with Lustre's default */
		const char *e = dlerror();
		char line[512];
		int n = snprintf(line, sizeof(line),
				 "liblustre_alloc: cannot load %s (%s); files "
				 "get Lustre's default layout\n",
				 name, e ? e : "?");

		if (n > 0 && write(STDERR_FILENO, line,
				   (size_t)n < sizeof(line) ? (size_t)n
							    : sizeof(line) - 1) < 0)
			n = 0;
	}
	return h;
}

static void la_libs_load_once(void)
{
	void *zmq, *mp;
	int ok = 1;

	la_in_shim++; /* the loader's own opens go straight through */
	zmq = la_open_lib(LA_ZMQ_SONAME);
	mp = zmq ? la_open_lib(LA_MSGPACK_SONAME) : NULL;
	if (zmq && mp) {
#define LA_SYM(f, h) \
	if (!(*(void **)(&la_lib.f) = dlsym(h, #f))) \
		ok = 0;
#define LA_ZSYM(f) LA_SYM(f, zmq)
#define LA_MSYM(f) LA_SYM(f, mp)
		LA_ZMQ_FUNCS(LA_ZSYM)
		LA_MSGPACK_FUNCS(LA_MSYM)
#undef LA_ZSYM
#undef LA_MSYM
#undef LA_SYM
	} else {
		ok = 0;
	}
	if (!ok)
		memset(&la_lib, 0, sizeof(la_lib)); /* the handles stay open */
	atomic_store(&la_libs_state, ok ? 1 : -1);
	la_in_shim--;
}

int la_libs_load(void)
{
	pthread_once(&la_libs_once, la_libs_load_once);
	return atomic_load(&la_libs_state) > 0 ? 0 : -1;
}


/* A caller before the helper started (the C unit tests, which link these
 * objects and call the wire code directly) loads the libraries itself. */
#define LA_CALL(f, fail, ...) \
	do { \
		if (!la_lib.f && la_libs_load() != 0) { \
			errno = ENOSYS; \
			return fail; \
		} \
		return la_lib.f(__VA_ARGS__); \
	} while (0)

int zmq_close(void *s) { LA_CALL(zmq_close, -1, s); }
int zmq_connect(void *s, const char *addr) { LA_CALL(zmq_connect, -1, s, addr); }
void *zmq_ctx_new(void)
{
	if (!la_lib.zmq_ctx_new && la_libs_load() != 0) {
		errno = ENOSYS;
		return NULL;
	}
	return la_lib.zmq_ctx_new();
}
int zmq_ctx_set(void *c, int option, int v) { LA_CALL(zmq_ctx_set, -1, c, option, v); }
int zmq_ctx_term(void *c) { LA_CALL(zmq_ctx_term, -1, c); }
int zmq_getsockopt(void *s, int option, void *v, size_t *len)
{
	LA_CALL(zmq_getsockopt, -1, s, option, v, len);
}
int zmq_msg_close(zmq_msg_t *m) { LA_CALL(zmq_msg_close, -1, m); }
void *zmq_msg_data(zmq_msg_t *m) { LA_CALL(zmq_msg_data, NULL, m); }
int zmq_msg_init(zmq_msg_t *m) { LA_CALL(zmq_msg_init, -1, m); }
int zmq_msg_move(zmq_msg_t *d, zmq_msg_t *s) { LA_CALL(zmq_msg_move, -1, d, s); }
int zmq_msg_recv(zmq_msg_t *m, void *s, int flags) { LA_CALL(zmq_msg_recv, -1, m, s, flags); }
size_t zmq_msg_size(const zmq_msg_t *m) { LA_CALL(zmq_msg_size, 0, m); }
int zmq_poll(zmq_pollitem_t *items, int n, long timeout)
{
	LA_CALL(zmq_poll, -1, items, n, timeout);
}
int zmq_recv(void *s, void *buf, size_t len, int flags) { LA_CALL(zmq_recv, -1, s, buf, len, flags); }
int zmq_send(void *s, const void *buf, size_t len, int flags) { LA_CALL(zmq_send, -1, s, buf, len, flags); }
int zmq_setsockopt(void *s, int option, const void *v, size_t len)
{
	LA_CALL(zmq_setsockopt, -1, s, option, v, len);
}
void *zmq_socket(void *c, int type) { LA_CALL(zmq_socket, NULL, c, type); }

msgpack_unpack_return msgpack_unpack_next(msgpack_unpacked *result, const char *data,
					  size_t len, size_t *off)
{
	LA_CALL(msgpack_unpack_next, MSGPACK_UNPACK_PARSE_ERROR, result, data, len, off);
}

void msgpack_zone_free(msgpack_zone *zone)
{
	if (la_lib.msgpack_zone_free || la_libs_load() == 0)
		la_lib.msgpack_zone_free(zone);
}

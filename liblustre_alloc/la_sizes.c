/*
 * la_sizes.c - file sizes at close (docs/protocol.md "Protocol v2: file
 * sizes"): the size each file the shim created had when the application
 * closed it, sent to the mapper so that its chains learn the application's
 * file sizes (the create announced none).
 *
 * At create (la_sizes_track, from la_create) the descriptor's entry records
 * the file's device and inode and the process generation.  At close
 * (la_sizes_closing, from the close and fclose wrappers) a tracked
 * descriptor is fstat()ed, and when it is still the file tracked its size
 * is queued in a ring: a ticket and two stores
 * (async-signal-safe; nothing else happens on the application's thread:
 * the helper looks every LA_SIZES_LINGER_US while files are tracked, and
 * is woken only at a create that finds it idle for longer).
 * The helper thread sends what is queued, in close order, as `sizes`
 * messages of at most LA_SIZES_MSG (once LA_SIZES_BATCH wait, or the oldest
 * waited LA_SIZES_LINGER_US) on a DEALER socket of its own, opened at
 * its first pass so that it is connected when the first file closes (sizes
 * wait for the connection up to LA_SIZES_WAIT_US); replies are drained,
 * never waited for.  At exit the process waits up to 0.2 s for what is
 * queued, as for shadow reports.
 *
 * Not sent (and never an error for the application): a descriptor at or
 * above LA_SIZE_FDS, a descriptor closed some other way (dup2, close_range,
 * exit), a full ring, an unreachable mapper.  A fork child sends nothing
 * of its parent's files (the generation changes at fork).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zmq.h>

#include "la_internal.h"
#include "la_msgpack.h"

#define LA_SIZE_FDS 65536      /* descriptors tracked: fd < this */
#define LA_SIZES_RING 4096     /* sizes queued for the helper */
#define LA_SIZES_MSG 1024      /* sizes per message (the mapper's MAX_SIZES) */
#define LA_SIZES_BODY 16384    /* > 1024 sizes + a 255-byte job */
#define LA_SIZES_BATCH 64          /* send once this many wait ... */
#define LA_SIZES_LINGER_US 100000.0  /* ... or the oldest waited this long */
#define LA_SIZES_RETRY_US 50000.0  /* a socket not connected yet: retry after */
#define LA_SIZES_WAIT_US 5e6       /* ... for at most this long, then drop */

struct la_fd_entry {
	_Atomic uint64_t gen;  /* la_size_gen when tracked, 0 free */
	uint64_t dev, ino;
};

struct la_size_slot {
	_Atomic uint64_t seq;  /* ticket + 1 when ready, 0 free */
	uint64_t size;
};

static struct la_fd_entry la_fds[LA_SIZE_FDS];
static struct la_size_slot la_ring[LA_SIZES_RING];
static _Atomic uint64_t la_size_gen = 1;
static _Atomic uint64_t la_size_ticket;
static atomic_int la_size_queued;
static atomic_int la_size_open;     /* tracked, not closed yet (about) */
static _Atomic double la_sizes_pass_us; /* the helper's last pass */
static _Atomic uint64_t la_size_stats[LA_SZ_N];

/* ---- application side (async-signal-safe) ---- */

void la_sizes_track(int fd)
{
	struct la_fd_entry *e;
	struct stat st;

	if (fd < 0 || fd >= LA_SIZE_FDS || !la_cfg.sizes || !la_helper_running())
		return;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
		return;
	e = &la_fds[fd];
	e->dev = (uint64_t)st.st_dev;
	e->ino = (uint64_t)st.st_ino;
	if (!atomic_exchange(&e->gen, atomic_load(&la_size_gen)))
		atomic_fetch_add(&la_size_open, 1);
	/* the helper passes at least every LA_SIZES_LINGER_US while files are
	 * tracked; wake it only when it has not passed for longer (idle) */
	if (la_now_us() - atomic_load(&la_sizes_pass_us) > 2 * LA_SIZES_LINGER_US)
		la_helper_wake();
}

/* The size of tracked fd, or -1 when fd is not (or no longer) a file this
 * process tracked; untracks it either way. */
static int64_t la_sizes_take(int fd, int fd_for_stat)
{
	struct la_fd_entry *e;
	uint64_t gen;
	struct stat st;

	if (fd < 0 || fd >= LA_SIZE_FDS)
		return -1;
	e = &la_fds[fd];
	gen = atomic_load(&e->gen);
	if (!gen)
		return -1;
	if (!atomic_compare_exchange_strong(&e->gen, &gen, 0))
		return -1; /* another thread's close */
	if (atomic_load(&la_size_open) > 0)
		atomic_fetch_sub(&la_size_open, 1);
	if (gen != atomic_load(&la_size_gen))
		return -1; /* the parent's file */
	if (fstat(fd_for_stat, &st) != 0 || (uint64_t)st.st_dev != e->dev ||
	    (uint64_t)st.st_ino != e->ino)
		return -1; /* the number now names another file */
	return (int64_t)st.st_size;
}

static void la_sizes_queue(int64_t size)
{
	uint64_t t, want = 0;
	int queued;
	struct la_size_slot *s;

	if (size < 0)
		return;
	t = atomic_fetch_add(&la_size_ticket, 1);
	s = &la_ring[t % LA_SIZES_RING];
	if (!atomic_compare_exchange_strong(&s->seq, &want, UINT64_MAX)) {
		atomic_fetch_add(&la_size_stats[LA_SZ_DROPPED], 1);
		return; /* the ring is full */
	}
	s->size = (uint64_t)size;
	atomic_store(&s->seq, t + 1);
	queued = atomic_fetch_add(&la_size_queued, 1);
	/* The helper looks every LA_SIZES_LINGER_US while files are tracked;
	 * it is woken only before the ring could fill.  A wake per close
	 * took creates from 18 us to 350 us median on a 2-core machine
	 * (bench/create_rate.py --sizes; docs/client.md). */
	if (queued + 1 == LA_SIZES_RING / 2)
		la_helper_wake();
}

void la_sizes_closing(int fd)
{
	la_sizes_queue(la_sizes_take(fd, fd));
}

void la_sizes_closing_stream(FILE *f, int (*real_fclose)(FILE *), int *rc)
{
	int fd = f ? fileno(f) : -1, copy = -1;

	/* the stream's buffer reaches the file in fclose: stat a duplicate of
	 * the descriptor after it */
	if (fd >= 0 && fd < LA_SIZE_FDS && atomic_load(&la_fds[fd].gen))
		copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	*rc = real_fclose(f);
	if (copy >= 0) {
		la_sizes_queue(la_sizes_take(fd, copy));
		la_real.close(copy);
	}
}

/* ---- helper side ---- */

static void *la_sizes_sock;
static _Atomic uint64_t la_sizes_next_id = 1;

static int la_sizes_cmp(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;

	return x[0] < y[0] ? -1 : x[0] > y[0];
}

size_t la_pack_sizes(char *buf, size_t cap, uint64_t id, const char *job,
		     const uint64_t *sizes, int n)
{
	struct la_buf b = { buf, 0, cap, 0 };
	msgpack_packer pk;
	int i;

	msgpack_packer_init(&pk, &b, la_buf_write);
	msgpack_pack_map(&pk, 5 + (la_cfg.fsname[0] ? 1 : 0));
	la_pack_cstr(&pk, "v");
	msgpack_pack_int(&pk, 2);
	la_pack_cstr(&pk, "op");
	la_pack_cstr(&pk, "sizes");
	la_pack_cstr(&pk, "id");
	msgpack_pack_uint64(&pk, id);
	la_pack_cstr(&pk, "job");
	la_pack_cstr(&pk, job);
	la_pack_cstr(&pk, "sizes");
	msgpack_pack_array(&pk, (size_t)n);
	for (i = 0; i < n; i++)
		msgpack_pack_uint64(&pk, sizes[i]);
	if (la_cfg.fsname[0]) {
		la_pack_cstr(&pk, "fsname");
		la_pack_cstr(&pk, la_cfg.fsname);
	}
	return b.overflow ? 0 : b.len;
}

/* Sizes taken from the ring, not sent yet (helper only): a new socket has
 * no connection for a moment (ZMQ_IMMEDIATE), so they wait for it. */
static uint64_t la_pending[LA_SIZES_RING];
static atomic_int la_npending;
static double la_pending_since_us;

static int la_sizes_socket(void)
{
	int linger = 200; /* what is sent at exit gets out */

	if (la_sizes_sock)
		return 1;
	la_sizes_sock = la_helper_socket();
	if (la_sizes_sock)
		zmq_setsockopt(la_sizes_sock, ZMQ_LINGER, &linger, sizeof(linger));
	return la_sizes_sock != NULL;
}

/* 0 sent, -EAGAIN not connected yet, -1 failed. */
static int la_sizes_send(const uint64_t *sizes, int n)
{
	char body[LA_SIZES_BODY];
	size_t len;

	if (!la_sizes_socket())
		return -1;
	len = la_pack_sizes(body, sizeof(body),
			    atomic_fetch_add(&la_sizes_next_id, 1), la_cfg.job,
			    sizes, n);
	if (!len)
		return -1;
	if (zmq_send(la_sizes_sock, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT) != 0)
		return errno == EAGAIN ? -EAGAIN : -1;
	return zmq_send(la_sizes_sock, body, len, ZMQ_DONTWAIT) == (int)len ? 0 : -1;
}

int la_sizes_run(int force)
{
	static uint64_t got[LA_SIZES_RING][2]; /* (ticket, size), helper only */
	char drain[64];
	int i, n = 0, k = atomic_load(&la_npending), sent = 0;

	if (!la_cfg.sizes)
		return -1;
	atomic_store(&la_sizes_pass_us, la_now_us());
	if (!atomic_load(&la_size_open) && !atomic_load(&la_size_queued) && !k)
		return -1; /* nothing tracked: no socket, no pass due */
	la_sizes_socket(); /* connected before the first file closes */
	if (la_sizes_sock)
		while (zmq_recv(la_sizes_sock, drain, sizeof(drain), ZMQ_DONTWAIT) >= 0)
			;
	if (atomic_load(&la_size_queued)) {
		for (i = 0; i < LA_SIZES_RING; i++) {
			struct la_size_slot *s = &la_ring[i];
			uint64_t seq = atomic_load(&s->seq);

			if (seq == 0 || seq == UINT64_MAX)
				continue;
			got[n][0] = seq;
			got[n][1] = s->size;
			n++;
			atomic_store(&s->seq, 0);
			atomic_fetch_sub(&la_size_queued, 1);
		}
		qsort(got, (size_t)n, sizeof(got[0]), la_sizes_cmp);
		if (k == 0)
			la_pending_since_us = la_now_us();
		for (i = 0; i < n; i++) {
			if (k == LA_SIZES_RING) {
				atomic_fetch_add(&la_size_stats[LA_SZ_DROPPED], 1);
				continue;
			}
			la_pending[k++] = got[i][1];
		}
	}
	atomic_store(&la_npending, k);
	if (k && !force && k < LA_SIZES_BATCH &&
	    la_now_us() - la_pending_since_us < LA_SIZES_LINGER_US)
		return (int)((LA_SIZES_LINGER_US - (la_now_us() - la_pending_since_us)) /
			     1000.0) + 1; /* a batch, or the oldest 0.1 s old */
	while (sent < k) {
		int m = k - sent < LA_SIZES_MSG ? k - sent : LA_SIZES_MSG;
		int rc = la_sizes_send(la_pending + sent, m);

		if (rc == -EAGAIN && la_now_us() - la_pending_since_us < LA_SIZES_WAIT_US)
			break; /* not connected yet: next pass */
		atomic_fetch_add(&la_size_stats[rc == 0 ? LA_SZ_SENT : LA_SZ_DROPPED],
				 (uint64_t)m);
		sent += m;
	}
	if (sent)
		memmove(la_pending, la_pending + sent, (size_t)(k - sent) * sizeof(la_pending[0]));
	atomic_store(&la_npending, k - sent);
	if (k - sent)
		return (int)(LA_SIZES_RETRY_US / 1000.0);
	/* files still open: look again for their sizes */
	return atomic_load(&la_size_open) ? (int)(LA_SIZES_LINGER_US / 1000.0) : -1;
}

int la_sizes_pending(void)
{
	return atomic_load(&la_size_queued) + atomic_load(&la_npending);
}

void la_sizes_close(void)
{
	if (la_sizes_sock)
		zmq_close(la_sizes_sock);
	la_sizes_sock = NULL;
}

void la_sizes_atfork_child(void)
{
	int i;

	la_sizes_sock = NULL; /* the parent's: never touched here */
	atomic_store(&la_npending, 0);
	atomic_fetch_add(&la_size_gen, 1);
	for (i = 0; i < LA_SIZES_RING; i++)
		atomic_store(&la_ring[i].seq, 0);
	atomic_store(&la_size_queued, 0);
	atomic_store(&la_size_open, 0);
}

uint64_t la_sizes_stat(int which)
{
	return which >= 0 && which < LA_SZ_N ?
		       atomic_load(&la_size_stats[which]) : 0;
}

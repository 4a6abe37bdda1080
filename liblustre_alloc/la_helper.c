/*
 * la_helper.c - the helper thread: the only thread that touches ZeroMQ.
 *
 * An application thread that needs the mapper (la_mapper.c) claims a call
 * slot with a compare-and-swap, packs its request into the slot's
 * preallocated buffer, marks it QUEUED, wakes the helper through an eventfd
 * and sleeps on the slot's state word (futex) until the answer or its
 * deadline.  All of that is async-signal-safe, so a signal handler may
 * create files while its thread is inside malloc or inside libzmq.  At the
 * deadline the application thread abandons the slot and creates the file
 * with Lustre's default; the helper frees the slot when it notices.
 *
 * The helper gives every call in flight a DEALER socket of its own
 * (ZMQ_IMMEDIATE: nothing is queued towards a mapper that is not
 * connected), sends [b"", request] and matches the reply by request id; a
 * socket whose call timed out goes back to the pool and the late reply is
 * dropped by id when it is next used.
 *
 * Slot states (atomic):
 *   FREE -> PACKING (app claimed) -> QUEUED (app: helper, send it)
 *        -> SENT (helper) -> DONE (helper: answer in the slot) -> FREE (app)
 *   QUEUED/SENT -> ABANDONED (app: past its deadline) -> FREE (helper)
 *
 * Fork: the child has no helper thread.  Its fork handler leaves the
 * parent's ZeroMQ context and sockets untouched (they are the parent's),
 * opens its own eventfd, empties the slots and starts a new helper.
 * The helper blocks every signal, so the application's signals are never
 * run on it (a handler there would wait for itself).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "la_internal.h"

#define LA_CALLS 128

enum { LA_CALL_FREE, LA_CALL_PACKING, LA_CALL_QUEUED, LA_CALL_SENT,
       LA_CALL_DONE, LA_CALL_ABANDONED };

static struct la_call la_calls[LA_CALLS];
static atomic_int la_calls_hwm;     /* slots ever claimed: [0, hwm) */

static int la_efd = -1;
/* Identity of our eventfd: an application that closes every descriptor
 * (closefrom) and opens a file that gets its number must never receive
 * our 8-byte wake-ups. */
static dev_t la_efd_dev;
static ino_t la_efd_ino;
static atomic_int la_running;       /* a helper serves this process */
static atomic_int la_stop;
static atomic_int la_sizes_flush;  /* exiting: send sizes without batching */
static pid_t la_helper_pid;
static pthread_t la_helper_tid;

/* ---- helper-private state ---- */
struct la_sock {
	void *s;
	int call;       /* slot served, -1 idle */
	int sent;
	int stale;      /* a reply may still come for a call given up */
};
static void *la_ctx;
static struct la_sock la_socks[LA_CALLS];
static int la_nsocks;
static uint64_t la_adopted_id[LA_CALLS]; /* last request id taken up */
static int la_call_sock[LA_CALLS];
/* What a fork child inherited and must never touch; kept reachable
 * (volatile: stores to variables nobody reads are otherwise dropped). */
static void *volatile la_abandoned_ctx;
static void *volatile la_abandoned_socks[LA_CALLS];

long la_futex(atomic_int *addr, int op, int val, const struct timespec *ts)
{
	return syscall(SYS_futex, (int *)addr, op | FUTEX_PRIVATE_FLAG, val,
		       ts, NULL, 0);
}

void la_futex_wait_until(atomic_int *addr, int val, double deadline_us)
{
	double left_us = deadline_us - la_now_us();
	struct timespec ts;

	if (left_us <= 0)
		return;
	ts.tv_sec = (time_t)(left_us / 1e6);
	ts.tv_nsec = (long)(fmod(left_us, 1e6) * 1000.0);
	la_futex(addr, FUTEX_WAIT, val, &ts);
}

void la_helper_wake(void)
{
	uint64_t one = 1;
	struct stat st;
	ssize_t w;

	if (fstat(la_efd, &st) != 0 || st.st_dev != la_efd_dev ||
	    st.st_ino != la_efd_ino || S_ISREG(st.st_mode))
		return; /* not ours any more: the caller times out */
	w = write(la_efd, &one, sizeof(one));
	(void)w; /* counter full: the helper is awake anyway */
}

/* ---- application side (async-signal-safe) ---- */

int la_helper_running(void)
{
	return atomic_load(&la_running) && la_helper_pid == la_getpid();
}

struct la_call *la_helper_claim(void)
{
	int i;

	if (!la_helper_running())
		return NULL;
	for (i = 0; i < LA_CALLS; i++) {
		int want = LA_CALL_FREE;

		if (atomic_compare_exchange_strong(&la_calls[i].state, &want,
						   LA_CALL_PACKING)) {
			la_raise_hwm(&la_calls_hwm, i + 1);
			return &la_calls[i];
		}
	}
	return NULL;
}

void la_helper_release(struct la_call *c)
{
	atomic_store(&c->state, LA_CALL_FREE);
}

static void la_decision_copy(struct la_decision *dst,
			     const struct la_decision *src)
{
	dst->ok = src->ok;
	dst->count = src->count;
	if (src->ok && src->count > 0 && src->count <= LA_MAX_STRIPES)
		memcpy(dst->osts, src->osts,
		       (size_t)src->count * sizeof(src->osts[0]));
	dst->stripe_size = src->stripe_size;
	memcpy(dst->policy, src->policy, sizeof(dst->policy));
	memcpy(dst->mapper_fallback, src->mapper_fallback,
	       sizeof(dst->mapper_fallback));
	memcpy(dst->reason, src->reason, sizeof(dst->reason));
	dst->err = src->err;
	dst->shadow_token = src->shadow_token;
	dst->ncomp = src->ok && src->ncomp <= LA_PFL_MAX ? src->ncomp : 0;
	memcpy(dst->comp_count, src->comp_count,
	       (size_t)dst->ncomp * sizeof(src->comp_count[0]));
}

int la_helper_wait(struct la_call *c, struct la_decision *d)
{
	c->d.ok = 0;
	c->d.reason[0] = c->d.policy[0] = c->d.mapper_fallback[0] = '\0';
	c->d.err = 0;
	c->d.ncomp = 0;
	atomic_store(&c->state, LA_CALL_QUEUED);
	la_helper_wake();
	for (;;) {
		int s = atomic_load(&c->state);
		double left_us = c->deadline_us - la_now_us();

		if (s == LA_CALL_DONE) {
			la_decision_copy(d, &c->d);
			atomic_store(&c->state, LA_CALL_FREE);
			return 0;
		}
		if (left_us <= 0) {
			if (!atomic_compare_exchange_strong(&c->state, &s,
							    LA_CALL_ABANDONED))
				continue; /* answered just now */
			strcpy(d->reason, s == LA_CALL_QUEUED ?
					  "mapper_unreachable" :
					  "mapper_timeout");
			la_helper_wake(); /* to free the slot */
			return s == LA_CALL_QUEUED ? -EHOSTUNREACH : -ETIMEDOUT;
		}
		la_futex_wait_until(&c->state, s, c->deadline_us);
	}
}

/* ---- helper side ---- */

static int la_ms_left(double deadline_us)
{
	double left = deadline_us - la_now_us();

	return left <= 0 ? 0 : (int)ceil(left / 1000.0);
}

static void la_sock_release(int k)
{
	if (k < 0)
		return;
	if (la_socks[k].sent)
		la_socks[k].stale = 1; /* la_complete clears it */
	la_call_sock[la_socks[k].call] = -1;
	la_socks[k].call = -1;
	la_socks[k].sent = 0;
}

/* Drain one multipart message; 0 and body in *body if it is [b"", body]. */
static int la_recv_reply(void *sock, zmq_msg_t *body)
{
	zmq_msg_t part;
	int more = 0, good = 1, nparts = 0;
	size_t sz = sizeof(more);

	do {
		zmq_msg_init(&part);
		if (zmq_msg_recv(&part, sock, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&part);
			return nparts ? -EPROTO : -errno;
		}
		nparts++;
		zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &sz);
		if (nparts == 1) {
			if (zmq_msg_size(&part) != 0 || !more)
				good = 0;
			zmq_msg_close(&part);
		} else if (nparts == 2 && good && !more) {
			zmq_msg_move(body, &part);
			zmq_msg_close(&part);
		} else {
			good = 0;
			zmq_msg_close(&part);
		}
	} while (more);
	return good && nparts == 2 ? 0 : -EPROTO;
}

static void la_drain(void *sock)
{
	for (;;) {
		zmq_msg_t body;
		int rc;

		zmq_msg_init(&body);
		rc = la_recv_reply(sock, &body);
		zmq_msg_close(&body);
		if (rc == -EAGAIN)
			return;
	}
}

void *la_helper_socket(void)
{
	int one = 1, zero = 0, hwm = 64;
	void *s = zmq_socket(la_ctx, ZMQ_DEALER);

	if (!s)
		return NULL;
	zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
	zmq_setsockopt(s, ZMQ_IMMEDIATE, &one, sizeof(one));
	zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof(hwm));
	zmq_setsockopt(s, ZMQ_RCVHWM, &hwm, sizeof(hwm));
	if (la_cfg.curve_server[0] &&
	    (zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, la_cfg.curve_server,
			    LA_Z85_KEY) != 0 ||
	     zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, la_cfg.curve_public,
			    LA_Z85_KEY) != 0 ||
	     zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, la_cfg.curve_secret,
			    LA_Z85_KEY) != 0)) {
		zmq_close(s);
		return NULL;
	}
	if (zmq_connect(s, la_cfg.mapper) != 0) {
		zmq_close(s);
		return NULL;
	}
	return s;
}

/* An idle socket for call i (a new one if none), or -1. */
static int la_sock_take(int i)
{
	int k;

	for (k = 0; k < la_nsocks; k++)
		if (la_socks[k].call < 0)
			break;
	if (k == la_nsocks) {
		if (la_nsocks == LA_CALLS)
			return -1;
		la_socks[k].s = la_helper_socket();
		if (!la_socks[k].s)
			return -1;
		la_nsocks++;
	} else if (la_socks[k].stale) {
		la_drain(la_socks[k].s); /* late replies to abandoned calls */
		la_socks[k].stale = 0;
	}
	la_socks[k].call = i;
	la_socks[k].sent = 0;
	la_call_sock[i] = k;
	return k;
}

/* The answer is in the slot: hand it over (or free an abandoned slot). */
static void la_complete(int i)
{
	struct la_call *c = &la_calls[i];
	int s = atomic_load(&c->state);
	int k = la_call_sock[i];

	if (k >= 0)
		la_socks[k].sent = 0; /* answered: nothing more will come */
	la_sock_release(k);
	while (s == LA_CALL_QUEUED || s == LA_CALL_SENT) {
		if (atomic_compare_exchange_strong(&c->state, &s,
						   LA_CALL_DONE)) {
			la_futex(&c->state, FUTEX_WAKE, 1, NULL);
			return;
		}
	}
	if (s == LA_CALL_ABANDONED)
		atomic_store(&c->state, LA_CALL_FREE);
}

static void la_on_send_ready(int k);

/* Take up new calls (sent at once when the mapper is connected, else when
 * the socket becomes writable), free abandoned ones. */
static void la_scan_calls(void)
{
	int i, n = atomic_load(&la_calls_hwm);

	for (i = 0; i < n; i++) {
		struct la_call *c = &la_calls[i];
		int s = atomic_load(&c->state);

		if (s == LA_CALL_ABANDONED) {
			la_sock_release(la_call_sock[i]);
			atomic_store(&c->state, LA_CALL_FREE);
		} else if (s == LA_CALL_QUEUED && la_adopted_id[i] != c->id) {
			int k;

			la_adopted_id[i] = c->id;
			k = la_sock_take(i);
			if (k < 0) {
				strcpy(c->d.reason, "mapper_socket");
				c->d.err = -ENOTCONN;
				la_complete(i);
			} else {
				la_on_send_ready(k);
			}
		}
	}
}

static void la_on_send_ready(int k)
{
	int i = la_socks[k].call;
	struct la_call *c = &la_calls[i];
	int queued = LA_CALL_QUEUED;

	/* with ZMQ_IMMEDIATE, EAGAIN on the first frame: no mapper connected
	 * yet; the poll loop tries again when the socket becomes writable */
	int rc = zmq_send(la_socks[k].s, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT);

	if (rc != 0 && errno == EAGAIN)
		return;
	if (rc != 0 || zmq_send(la_socks[k].s, c->req, c->reqlen,
				ZMQ_DONTWAIT) != (int)c->reqlen) {
		la_reason(c->d.reason, sizeof(c->d.reason), "mapper_send",
			  errno);
		c->d.err = -EAGAIN;
		la_complete(i);
		return;
	}
	la_socks[k].sent = 1;
	/* fails only when the caller gave up meanwhile (the scan frees it) */
	atomic_compare_exchange_strong(&c->state, &queued, LA_CALL_SENT);
}

static void la_on_reply(int k)
{
	int i = la_socks[k].call;
	struct la_call *c = &la_calls[i];

	for (;;) {
		zmq_msg_t body;
		int rc;

		zmq_msg_init(&body);
		rc = la_recv_reply(la_socks[k].s, &body);
		if (rc == -EAGAIN) {
			zmq_msg_close(&body);
			return;
		}
		if (rc != 0) {
			zmq_msg_close(&body);
			strcpy(c->d.reason, "mapper_garbage:frames");
			c->d.err = -EPROTO;
			la_complete(i);
			return;
		}
		rc = la_parse_reply(zmq_msg_data(&body), zmq_msg_size(&body),
				    c->id, c->want_count, &c->d);
		zmq_msg_close(&body);
		if (rc == 1)
			continue; /* a late reply to an earlier request */
		la_complete(i);
		return;
	}
}

static void *la_helper_main(void *arg)
{
	zmq_pollitem_t items[LA_CALLS + 2];
	int owner[LA_CALLS + 2];
	int k;

	(void)arg;
	la_in_shim = 1; /* libzmq's own opens go straight to libc */
	while (!atomic_load(&la_stop)) {
		int n = 1, timeout = -1, j;

		la_scan_calls();
		{
			int due = la_reports_run(); /* shadow reports */
			int sizes_due = la_sizes_run(atomic_load(&la_sizes_flush));
			int lease_due = la_leases_run(); /* v2 leases */

			if (due >= 0)
				timeout = due;
			if (sizes_due >= 0 && (timeout < 0 || sizes_due < timeout))
				timeout = sizes_due;
			if (lease_due >= 0 && (timeout < 0 || lease_due < timeout))
				timeout = lease_due;
		}
		items[0].socket = NULL;
		items[0].fd = la_efd;
		items[0].events = ZMQ_POLLIN;
		items[0].revents = 0;
		if (la_leases_socket()) {
			items[n].socket = la_leases_socket();
			items[n].fd = -1;
			items[n].events = ZMQ_POLLIN;
			items[n].revents = 0;
			owner[n++] = -1;
		}
		for (k = 0; k < la_nsocks; k++) {
			int i = la_socks[k].call, left;

			if (i < 0)
				continue;
			left = la_ms_left(la_calls[i].deadline_us);
			if (left <= 0) { /* the caller gives up by itself */
				la_sock_release(k);
				continue;
			}
			if (timeout < 0 || left < timeout)
				timeout = left;
			items[n].socket = la_socks[k].s;
			items[n].fd = -1;
			items[n].events = la_socks[k].sent ? ZMQ_POLLIN :
							     ZMQ_POLLOUT;
			items[n].revents = 0;
			owner[n++] = k;
		}
		if (zmq_poll(items, n, timeout) < 0 && errno != EINTR)
			break; /* context gone */
		if (items[0].revents & ZMQ_POLLIN) {
			uint64_t v;
			ssize_t r = read(la_efd, &v, sizeof(v));

			(void)r;
		}
		for (j = 1; j < n; j++) {
			k = owner[j];
			if (k < 0) {
				if (items[j].revents & ZMQ_POLLIN)
					la_leases_on_readable();
				continue;
			}
			if (la_socks[k].call < 0)
				continue;
			if ((items[j].revents & ZMQ_POLLOUT) && !la_socks[k].sent)
				la_on_send_ready(k);
			else if (items[j].revents & ZMQ_POLLIN)
				la_on_reply(k);
		}
	}
	la_leases_close(); /* returns what the process still holds */
	la_sizes_run(1); /* closed just before exit */
	la_sizes_close();
	for (k = 0; k < la_nsocks; k++)
		zmq_close(la_socks[k].s);
	la_nsocks = 0;
	la_reports_close();
	zmq_ctx_term(la_ctx);
	la_ctx = NULL;
	return NULL;
}

static pthread_mutex_t la_start_mu = PTHREAD_MUTEX_INITIALIZER;

void la_helper_start(void)
{
	pthread_mutex_t *mu = &la_start_mu;
	sigset_t all, old;
	int i;

	if (la_helper_running() || !la_cfg.mapper[0])
		return;
	pthread_mutex_lock(mu);
	if (la_helper_running() || la_libs_load() != 0)
		goto out;
	if (la_efd < 0) {
		struct stat st;

		la_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (la_efd >= 0 && fstat(la_efd, &st) == 0) {
			la_efd_dev = st.st_dev;
			la_efd_ino = st.st_ino;
		}
	}
	la_ctx = zmq_ctx_new();
	if (la_efd < 0 || !la_ctx)
		goto out;
	zmq_ctx_set(la_ctx, ZMQ_BLOCKY, 0);
	for (i = 0; i < LA_CALLS; i++) {
		la_call_sock[i] = -1;
		la_socks[i].call = -1;
	}
	atomic_store(&la_stop, 0);
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	if (pthread_create(&la_helper_tid, NULL, la_helper_main, NULL) == 0) {
		la_helper_pid = la_getpid();
		atomic_store(&la_running, 1);
	} else {
		zmq_ctx_term(la_ctx);
		la_ctx = NULL;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
out:
	pthread_mutex_unlock(mu);
}

void la_helper_atfork_child(void)
{
	int i, was = atomic_load(&la_running);

	la_reports_atfork_child();
	la_leases_atfork_child();
	la_sizes_atfork_child();
	atomic_store(&la_sizes_flush, 0);
	if (la_ctx) {
		la_abandoned_ctx = la_ctx;
		for (i = 0; i < LA_CALLS; i++)
			la_abandoned_socks[i] = la_socks[i].s;
	}
	la_ctx = NULL;
	memset(la_socks, 0, sizeof(la_socks));
	la_nsocks = 0;
	for (i = 0; i < atomic_load(&la_calls_hwm); i++) {
		atomic_store(&la_calls[i].state, LA_CALL_FREE);
		la_adopted_id[i] = 0;
	}
	atomic_store(&la_running, 0);
	if (la_efd >= 0)
		close(la_efd); /* shared with the parent: ours is new */
	la_efd = -1;
	/* held by a parent thread at fork time, perhaps */
	pthread_mutex_init(&la_start_mu, NULL);
	if (was)
		la_helper_start();
}

void la_helper_shutdown(void)
{
	if (!la_helper_running())
		return;
	la_reports_flush_at_exit();
	{
		/* sizes of files closed just before exit */
		double until = la_now_us() + 200000.0;
		struct timespec ts = { 0, 5000000 }; /* 5 ms */

		atomic_store(&la_sizes_flush, 1);
		while (la_sizes_pending() && la_now_us() < until) {
			la_helper_wake();
			nanosleep(&ts, NULL);
		}
	}
	atomic_store(&la_stop, 1);
	la_helper_wake();
	pthread_join(la_helper_tid, NULL);
	atomic_store(&la_running, 0);
	/* la_efd stays open: a thread still finishing a create may write to
	 * it, and a closed number may already be one of the application's */
}

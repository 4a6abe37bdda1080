/*
 * la_report.c - shadow reports (docs/protocol.md "Shadow reports"): in shadow
 * mode the mapper answers "use Lustre's allocator" with a token; the shim
 * creates the file with Lustre's layout and reports back, off the create
 * path, which OSTs Lustre chose.
 *
 * The create path only queues (path, token, backend) into a preallocated
 * slot (a compare-and-swap, a string copy, an eventfd write: async-signal-
 * safe).  The helper thread reads the layout back by path through the
 * backend (LL_IOC_LOV_GETSTRIPE on Lustre; the user xattr the emulator
 * writes elsewhere), retrying every LA_REPORT_RETRY_US while the layout is
 * not there yet (an emulated MDS places the file a moment later), for at
 * most LA_REPORT_WAIT_US, then sends one fire-and-forget report on a DEALER
 * socket of its own (replies are drained and ignored).  A full queue, an
 * unreadable layout or an unreachable mapper drops the report: shadow mode
 * never slows an application or fails a create.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "la_internal.h"

#define LA_REPORTS 256
#define LA_REPORT_RETRY_US 50000.0
#define LA_REPORT_WAIT_US 5e6
/* At exit, how long the process waits for reports still queued (a file
 * created just before exit): on Lustre the layout is there at once, so this
 * bounds a wait that is normally a few microseconds. */
#define LA_REPORT_EXIT_WAIT_US 200000.0

enum { LA_REP_FREE, LA_REP_FILLING, LA_REP_READY };

struct la_report_slot {
	atomic_int state;
	uint64_t token;
	const struct la_backend *be;
	double first_us, next_us;
	char path[LA_PATH_MAX];
};

static struct la_report_slot la_reports[LA_REPORTS];
static atomic_int la_reports_hwm;
static _Atomic uint64_t la_reports_dropped;
static _Atomic uint64_t la_report_next_id = 1;

/* ---- application side (async-signal-safe) ---- */

void la_report_queue(uint64_t token, const char *path,
		     const struct la_backend *be)
{
	size_t n = strlen(path);
	int i;

	if (!token || n >= LA_PATH_MAX || !la_helper_running())
		return;
	for (i = 0; i < LA_REPORTS; i++) {
		int want = LA_REP_FREE;

		if (atomic_compare_exchange_strong(&la_reports[i].state, &want,
						   LA_REP_FILLING)) {
			struct la_report_slot *s = &la_reports[i];

			la_raise_hwm(&la_reports_hwm, i + 1);
			s->token = token;
			s->be = be;
			memcpy(s->path, path, n + 1);
			s->first_us = s->next_us = la_now_us();
			atomic_store(&s->state, LA_REP_READY);
			la_helper_wake();
			return;
		}
	}
	atomic_fetch_add(&la_reports_dropped, 1);
}

/* ---- helper side ---- */

static void *la_report_sock;

static void la_report_drain(void)
{
	char buf[256];

	while (zmq_recv(la_report_sock, buf, sizeof(buf), ZMQ_DONTWAIT) >= 0)
		;
}

/* Send the report of slot s; 0 sent, -EAGAIN not connected yet (a new
 * socket has no connection for a moment: ZMQ_IMMEDIATE), -1 failed. */
static int la_report_send(const struct la_report_slot *s,
			  const uint32_t *osts, int count, uint64_t stripe_size)
{
	char body[LA_REQ_MAX];
	size_t len;

	if (!la_report_sock) {
		la_report_sock = la_helper_socket();
		if (!la_report_sock)
			return -1;
	}
	la_report_drain();
	len = la_pack_report(body, sizeof(body),
			     atomic_fetch_add(&la_report_next_id, 1), s->token,
			     osts, count, stripe_size);
	if (len == 0)
		return -1;
	if (zmq_send(la_report_sock, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT) != 0)
		return errno == EAGAIN ? -EAGAIN : -1;
	return zmq_send(la_report_sock, body, len, ZMQ_DONTWAIT) == (int)len ?
		       0 : -1;
}

int la_reports_run(void)
{
	static uint32_t osts[LA_MAX_STRIPES];
	static unsigned char lum[LA_LUM_MAX];
	int i, n = atomic_load(&la_reports_hwm), wait_ms = -1;
	double now = la_now_us();

	if (la_report_sock)
		la_report_drain();
	for (i = 0; i < n; i++) {
		struct la_report_slot *s = &la_reports[i];
		uint64_t stripe_size = 0;
		int count, left, sent;

		if (atomic_load(&s->state) != LA_REP_READY)
			continue;
		if (s->next_us > now) {
			left = (int)((s->next_us - now) / 1000.0) + 1;
			if (wait_ms < 0 || left < wait_ms)
				wait_ms = left;
			continue;
		}
		count = s->be->file_layout(s->path, lum, sizeof(lum), osts,
					   LA_MAX_STRIPES, &stripe_size);
		sent = count > 0 ? la_report_send(s, osts, count, stripe_size)
				 : -1;
		if ((count == 0 || sent == -EAGAIN) &&
		    now - s->first_us < LA_REPORT_WAIT_US) {
			s->next_us = now + LA_REPORT_RETRY_US;
			left = (int)(LA_REPORT_RETRY_US / 1000.0);
			if (wait_ms < 0 || left < wait_ms)
				wait_ms = left;
			continue; /* not placed, or not connected, yet */
		}
		if (sent != 0)
			atomic_fetch_add(&la_reports_dropped, 1);
		atomic_store(&s->state, LA_REP_FREE);
	}
	return wait_ms;
}

int la_reports_pending(void)
{
	int i, n = atomic_load(&la_reports_hwm), k = 0;

	for (i = 0; i < n; i++)
		k += atomic_load(&la_reports[i].state) != LA_REP_FREE;
	return k;
}

void la_reports_flush_at_exit(void)
{
	double until = la_now_us() + LA_REPORT_EXIT_WAIT_US;
	struct timespec ts = { 0, 5000000 }; /* 5 ms */

	while (la_reports_pending() && la_now_us() < until) {
		la_helper_wake();
		nanosleep(&ts, NULL);
	}
}

void la_reports_close(void)
{
	if (la_report_sock)
		zmq_close(la_report_sock);
	la_report_sock = NULL;
}

void la_reports_atfork_child(void)
{
	int i, n = atomic_load(&la_reports_hwm);

	la_report_sock = NULL; /* the parent's: never touched here */
	for (i = 0; i < n; i++)
		atomic_store(&la_reports[i].state, LA_REP_FREE);
}

uint64_t la_reports_dropped_count(void)
{
	return atomic_load(&la_reports_dropped);
}

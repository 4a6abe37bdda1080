/*
 * la_work.c - preallocated workspaces for creates in flight: the shim's
 * create path allocates nothing (malloc is not async-signal-safe, and a
 * signal handler's create may interrupt its own thread inside malloc).
 * A workspace is claimed with one compare-and-swap; when all are in use
 * the thread sleeps (futex) until one is given back, at most
 * LUSTRE_ALLOC_TIMEOUT_MS, and after that the create passes straight
 * through to libc (Lustre's default layout, not recorded).  A signal
 * handler never waits for its own thread's workspace: while a thread is in
 * the shim, its handlers' opens go straight to libc (la_in_shim).
 */
#include <linux/futex.h>
#include <string.h>

#include "la_internal.h"

#define LA_WORKSPACES 128

static struct la_work la_works[LA_WORKSPACES];
static atomic_int la_work_gen;      /* bumped whenever one is given back */
static atomic_int la_work_waiters;
static atomic_int la_work_hwm;      /* slots ever used: [0, hwm) */

void la_raise_hwm(atomic_int *hwm, int v)
{
	int cur = atomic_load(hwm);

	while (cur < v && !atomic_compare_exchange_weak(hwm, &cur, v))
		;
}

struct la_work *la_work_get(double deadline_us)
{
	for (;;) {
		int gen = atomic_load(&la_work_gen);
		int i;

		for (i = 0; i < LA_WORKSPACES; i++) {
			int zero = 0;

			if (atomic_compare_exchange_strong(&la_works[i].busy,
							   &zero, 1)) {
				la_raise_hwm(&la_work_hwm, i + 1);
				return &la_works[i];
			}
		}
		if (la_now_us() >= deadline_us)
			return NULL;
		atomic_fetch_add(&la_work_waiters, 1);
		la_futex_wait_until(&la_work_gen, gen, deadline_us);
		atomic_fetch_sub(&la_work_waiters, 1);
	}
}

void la_work_put(struct la_work *w)
{
	atomic_store(&w->busy, 0);
	atomic_fetch_add(&la_work_gen, 1);
	if (atomic_load(&la_work_waiters))
		la_futex(&la_work_gen, FUTEX_WAKE, 1, NULL);
}

/* The fork child has one thread, not in the shim: nothing is in use. */
void la_work_atfork_child(void)
{
	int i, n = atomic_load(&la_work_hwm);

	for (i = 0; i < n; i++)
		atomic_store(&la_works[i].busy, 0);
	atomic_store(&la_work_waiters, 0);
}

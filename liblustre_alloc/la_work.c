/*
 * la_work.c - preallocated workspaces for creates in flight: the shim's
 * create path allocates nothing (malloc is not async-signal-safe, and a
 * signal handler's create may interrupt its own thread inside malloc).
 * A workspace is claimed with one compare-and-swap; when all are in use
 * the create passes straight through to libc (Lustre's default layout,
 * not recorded).
 */
#include <string.h>

#include "la_internal.h"

#define LA_WORKSPACES 64

static struct la_work la_works[LA_WORKSPACES];

struct la_work *la_work_get(void)
{
	int i;

	for (i = 0; i < LA_WORKSPACES; i++) {
		int zero = 0;

		if (atomic_compare_exchange_strong(&la_works[i].busy, &zero, 1))
			return &la_works[i];
	}
	return NULL;
}

void la_work_put(struct la_work *w)
{
	atomic_store(&w->busy, 0);
}

/* The fork child has one thread, not in the shim: nothing is in use. */
void la_work_atfork_child(void)
{
	int i;

	for (i = 0; i < LA_WORKSPACES; i++)
		atomic_store(&la_works[i].busy, 0);
}

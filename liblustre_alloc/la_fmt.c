/*
 * la_fmt.c - text building for the create path without printf or malloc
 * (neither is async-signal-safe; a signal handler may create a file while
 * its thread is inside either).  A full buffer cuts the text, never
 * overruns it.
 */
#include <string.h>

#include "la_internal.h"

void la_put_str(struct la_out *o, const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (o->cap == 0)
		return;
	if (n > o->cap - 1 - o->len)
		n = o->cap - 1 - o->len;
	memcpy(o->p + o->len, s, n);
	o->len += n;
	o->p[o->len] = '\0';
}

void la_put_u64(struct la_out *o, uint64_t v)
{
	char tmp[24];
	int i = sizeof(tmp) - 1;

	tmp[i] = '\0';
	do {
		tmp[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	la_put_str(o, tmp + i);
}

void la_put_i64(struct la_out *o, int64_t v)
{
	if (v < 0) {
		la_put_str(o, "-");
		la_put_u64(o, (uint64_t)0 - (uint64_t)v);
	} else {
		la_put_u64(o, (uint64_t)v);
	}
}

void la_put_tenths(struct la_out *o, double v)
{
	uint64_t t;

	if (!(v > 0)) /* also NaN */
		v = 0;
	if (v > 1e15)
		v = 1e15;
	t = (uint64_t)(v * 10.0 + 0.5);
	la_put_u64(o, t / 10);
	la_put_str(o, ".");
	la_put_u64(o, t % 10);
}

void la_reason(char *dst, size_t cap, const char *what, int e)
{
	struct la_out o = { dst, 0, cap };

	if (cap)
		dst[0] = '\0';
	la_put_str(&o, what);
	la_put_str(&o, ":");
	la_put_i64(&o, e);
}

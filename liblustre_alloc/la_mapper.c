/*
 * la_mapper.c - client side of "Allocation protocol: shim -> mapper
 * (version 1)" (docs/protocol.md).
 *
 * Requests are msgpack maps packed into a caller buffer (msgpack-c's packer
 * with our own writer: no allocation), with a request id in every request:
 * a request that timed out leaves its socket usable, and its late reply is
 * recognised by id and dropped.  The exchange itself runs on the helper
 * thread (la_helper.c); la_ask only packs, hands over and waits, so it is
 * async-signal-safe.  A stopped mapper costs at most
 * LUSTRE_ALLOC_TIMEOUT_MS and, for LUSTRE_ALLOC_RETRY_MS after that,
 * nothing at all (process-wide back-off).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <msgpack.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "la_internal.h"
#include "la_msgpack.h"

#define LA_MAX_FRAME 65536 /* protocol: larger bodies are refused */

static _Atomic uint64_t la_next_id = 1;
static _Atomic uint64_t la_backoff_until_us;

/* ---- msgpack encoding into a caller buffer (no allocation) ---- */

int la_buf_write(void *data, const char *buf, size_t len)
{
	struct la_buf *b = data;

	if (b->len + len > b->cap) {
		b->overflow = 1;
		return -1;
	}
	memcpy(b->p + b->len, buf, len);
	b->len += len;
	return 0;
}

void la_pack_cstr(msgpack_packer *pk, const char *s)
{
	size_t n = strlen(s);

	msgpack_pack_str(pk, n);
	msgpack_pack_str_body(pk, s, n);
}

int la_alloc_nfields(const struct la_request *rq)
{
	return 6 + (rq->path ? 1 : 0) + (rq->pool && *rq->pool ? 1 : 0) +
	       (la_cfg.fsname[0] ? 1 : 0) + (rq->projid >= 0 ? 1 : 0);
}

void la_pack_alloc_fields(msgpack_packer *pk, const struct la_request *rq)
{
	la_pack_cstr(pk, "job");
	la_pack_cstr(pk, rq->job);
	la_pack_cstr(pk, "stripe_count");
	msgpack_pack_int(pk, rq->stripe_count);
	la_pack_cstr(pk, "stripe_size");
	msgpack_pack_uint64(pk, rq->stripe_size);
	la_pack_cstr(pk, "expected_bytes");
	msgpack_pack_uint64(pk, rq->expected_bytes);
	la_pack_cstr(pk, "uid");
	msgpack_pack_uint32(pk, rq->uid);
	la_pack_cstr(pk, "gid");
	msgpack_pack_uint32(pk, rq->gid);
	if (rq->projid >= 0) {
		la_pack_cstr(pk, "projid");
		msgpack_pack_uint32(pk, (uint32_t)rq->projid);
	}
	if (rq->path) {
		/* bin: a path is bytes, not necessarily UTF-8 */
		size_t pl = strlen(rq->path);

		la_pack_cstr(pk, "path");
		msgpack_pack_bin(pk, pl);
		msgpack_pack_bin_body(pk, rq->path, pl);
	}
	if (rq->pool && *rq->pool) {
		la_pack_cstr(pk, "pool");
		la_pack_cstr(pk, rq->pool);
	}
	/* a mapper serving several file systems needs to know which one
	 * (docs/protocol.md: fsname) */
	if (la_cfg.fsname[0]) {
		la_pack_cstr(pk, "fsname");
		la_pack_cstr(pk, la_cfg.fsname);
	}
}

size_t la_pack_request(char *buf, size_t cap, uint64_t id,
		       const struct la_request *rq)
{
	struct la_buf b = { buf, 0, cap, 0 };
	msgpack_packer pk;

	msgpack_packer_init(&pk, &b, la_buf_write);
	msgpack_pack_map(&pk, (size_t)(3 + (rq ? la_alloc_nfields(rq) : 0)));
	la_pack_cstr(&pk, "v");
	msgpack_pack_int(&pk, 1);
	la_pack_cstr(&pk, "op");
	la_pack_cstr(&pk, rq ? "alloc" : "ping");
	la_pack_cstr(&pk, "id");
	msgpack_pack_uint64(&pk, id);
	if (rq)
		la_pack_alloc_fields(&pk, rq);
	return b.overflow ? 0 : b.len;
}

size_t la_pack_report(char *buf, size_t cap, uint64_t id, uint64_t token,
		      const uint32_t *osts, int count, uint64_t stripe_size)
{
	struct la_buf b = { buf, 0, cap, 0 };
	msgpack_packer pk;
	int i;

	msgpack_packer_init(&pk, &b, la_buf_write);
	msgpack_pack_map(&pk, 6 + (la_cfg.fsname[0] ? 1 : 0));
	la_pack_cstr(&pk, "v");
	msgpack_pack_int(&pk, 1);
	la_pack_cstr(&pk, "op");
	la_pack_cstr(&pk, "report");
	la_pack_cstr(&pk, "id");
	msgpack_pack_uint64(&pk, id);
	la_pack_cstr(&pk, "shadow");
	msgpack_pack_uint64(&pk, token);
	la_pack_cstr(&pk, "osts");
	msgpack_pack_array(&pk, (size_t)count);
	for (i = 0; i < count; i++)
		msgpack_pack_uint32(&pk, osts[i]);
	la_pack_cstr(&pk, "stripe_size");
	msgpack_pack_uint64(&pk, stripe_size);
	if (la_cfg.fsname[0]) {
		la_pack_cstr(&pk, "fsname");
		la_pack_cstr(&pk, la_cfg.fsname);
	}
	return b.overflow ? 0 : b.len;
}

/* ---- reply decoding ---- */

int la_key_is(const msgpack_object *k, const char *s)
{
	size_t n = strlen(s);

	return k->type == MSGPACK_OBJECT_STR && k->via.str.size == n &&
	       memcmp(k->via.str.ptr, s, n) == 0;
}

int la_obj_u64(const msgpack_object *o, uint64_t *v)
{
	if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return -1;
	*v = o->via.u64;
	return 0;
}

void la_obj_str(const msgpack_object *o, char *dst, size_t cap)
{
	size_t n;

	if (o->type != MSGPACK_OBJECT_STR)
		return;
	n = o->via.str.size < cap - 1 ? o->via.str.size : cap - 1;
	memcpy(dst, o->via.str.ptr, n);
	dst[n] = '\0';
	for (size_t i = 0; i < n; i++) /* the record is line/tab separated */
		if ((unsigned char)dst[i] < 0x20 || dst[i] == 0x7f)
			dst[i] = '?';
}

/* An array of distinct OST indices (< LOV_OFFSET_DEFAULT, "none") into
 * dst; its length (1..max), or -1 with *why naming the fault. */
static int la_read_osts(const msgpack_object *arr, uint32_t *dst, int max,
			const char **why)
{
	uint64_t seen[65536 / 64];
	uint32_t i;

	*why = "osts";
	if (!arr || arr->type != MSGPACK_OBJECT_ARRAY ||
	    arr->via.array.size == 0 || arr->via.array.size > (uint32_t)max)
		return -1;
	memset(seen, 0, sizeof(seen));
	for (i = 0; i < arr->via.array.size; i++) {
		uint64_t x;

		if (la_obj_u64(&arr->via.array.ptr[i], &x) ||
		    x >= LA_LOV_OFFSET_DEFAULT) {
			*why = "osts_index";
			return -1;
		}
		if (seen[x / 64] & (1ull << (x % 64))) {
			*why = "osts_duplicate";
			return -1;
		}
		seen[x / 64] |= 1ull << (x % 64);
		dst[i] = (uint32_t)x;
	}
	return (int)arr->via.array.size;
}

/* A composite reply's layouts (one OST list per component) into d. */
static int la_read_layouts(const msgpack_object *arr, struct la_decision *d)
{
	const char *why;
	uint32_t i;
	int at = 0;

	if (!arr || arr->type != MSGPACK_OBJECT_ARRAY ||
	    arr->via.array.size == 0 || arr->via.array.size > LA_PFL_MAX)
		return -1;
	for (i = 0; i < arr->via.array.size; i++) {
		int n = la_read_osts(&arr->via.array.ptr[i], d->osts + at,
				     LA_MAX_STRIPES - at, &why);

		if (n < 0)
			return -1;
		d->comp_count[i] = n;
		at += n;
	}
	d->ncomp = (int)arr->via.array.size;
	d->count = at;
	return 0;
}

#define LA_GARBAGE(what) \
	do { snprintf(d->reason, sizeof(d->reason), "mapper_garbage:%s", what); \
	     rc = -EPROTO; goto out; } while (0)

/* 0: d->ok layout; 1: reply to another request (stale); -errno: failure
 * (d->reason says why). */
int la_parse_reply(const char *buf, size_t len, uint64_t want_id,
		   int want_count, struct la_decision *d)
{
	msgpack_unpacked u;
	size_t off = 0;
	const msgpack_object *osts = NULL, *ssize = NULL, *layouts = NULL;
	uint64_t v = 0, id = 0, err = 0, shadow = 0;
	int have_v = 0, have_id = 0, ok = -1, rc = 0;
	uint32_t i;

	d->ok = 0;
	d->shadow_token = 0;
	msgpack_unpacked_init(&u);
	if (len > LA_MAX_FRAME)
		LA_GARBAGE("too_large");
	if (msgpack_unpack_next(&u, buf, len, &off) != MSGPACK_UNPACK_SUCCESS)
		LA_GARBAGE("undecodable");
	if (off != len)
		LA_GARBAGE("trailing_bytes");
	if (u.data.type != MSGPACK_OBJECT_MAP)
		LA_GARBAGE("not_a_map");
	for (i = 0; i < u.data.via.map.size; i++) {
		const msgpack_object *k = &u.data.via.map.ptr[i].key;
		const msgpack_object *val = &u.data.via.map.ptr[i].val;

		if (la_key_is(k, "v")) {
			if (la_obj_u64(val, &v))
				LA_GARBAGE("v");
			have_v = 1;
		} else if (la_key_is(k, "id")) {
			if (la_obj_u64(val, &id))
				LA_GARBAGE("id");
			have_id = 1;
		} else if (la_key_is(k, "ok")) {
			if (val->type != MSGPACK_OBJECT_BOOLEAN)
				LA_GARBAGE("ok");
			ok = val->via.boolean ? 1 : 0;
		} else if (la_key_is(k, "osts")) {
			osts = val;
		} else if (la_key_is(k, "layouts")) {
			layouts = val;
		} else if (la_key_is(k, "stripe_size")) {
			ssize = val;
		} else if (la_key_is(k, "policy")) {
			la_obj_str(val, d->policy, sizeof(d->policy));
		} else if (la_key_is(k, "fallback")) {
			la_obj_str(val, d->mapper_fallback,
				   sizeof(d->mapper_fallback));
		} else if (la_key_is(k, "errno")) {
			if (la_obj_u64(val, &err))
				err = EPROTO;
		} else if (la_key_is(k, "shadow")) {
			if (la_obj_u64(val, &shadow))
				shadow = 0;
		}
	}
	/* a composite reply is v2; its errors may be v1 frames */
	if (!have_v || !(v == 1 || (v == 2 && want_count == LA_WANT_COMPOSITE)))
		LA_GARBAGE("version");
	if (!have_id)
		LA_GARBAGE("id");
	if (id != want_id) {
		rc = 1;
		goto out;
	}
	if (ok < 0)
		LA_GARBAGE("ok");
	if (ok && want_count == LA_WANT_PONG) {
		d->reason[0] = '\0';
		goto out;
	}
	if (!ok) {
		if (err == 0 || err > 4095)
			err = EPROTO;
		/* shadow mode: Lustre's allocator, then report its layout */
		d->shadow_token = shadow;
		if (shadow)
			strcpy(d->reason, "mapper_shadow");
		else
			snprintf(d->reason, sizeof(d->reason),
				 "mapper_error:%u", (unsigned)err);
		rc = -(int)err;
		goto out;
	}
	if (want_count == LA_WANT_COMPOSITE) {
		if (la_read_layouts(layouts, d) != 0)
			LA_GARBAGE("layouts");
		d->stripe_size = 0; /* each component keeps its own */
		d->ok = 1;
		d->reason[0] = '\0';
		goto out;
	}
	{
		const char *why;
		int n = la_read_osts(osts, d->osts, LA_MAX_STRIPES, &why);

		if (n < 0)
			LA_GARBAGE(why);
		/* The mapper may clip the count to the usable OSTs of the
		 * pool, as Lustre does (docs/protocol.md), never exceed it. */
		if (want_count > 0 && n > want_count)
			LA_GARBAGE("osts_count");
		d->count = n;
	}
	if (!ssize || la_obj_u64(ssize, &v) || v == 0 ||
	    v % LA_STRIPE_SIZE_UNIT || v > UINT32_MAX)
		LA_GARBAGE("stripe_size");
	d->stripe_size = v;
	d->ok = 1;
	d->reason[0] = '\0';
out:
	msgpack_unpacked_destroy(&u);
	if (rc < 0)
		d->err = rc;
	return rc;
}

/* ---- asking (application thread, async-signal-safe) ---- */

static void la_decision_reset(struct la_decision *d)
{
	d->ok = 0;
	d->count = 0;
	d->stripe_size = 0;
	d->policy[0] = d->mapper_fallback[0] = d->reason[0] = '\0';
	d->mapper_us = 0;
	d->err = 0;
	d->shadow_token = 0;
	d->lease = 0;
	d->ncomp = 0;
	d->pfl = NULL;
}

static int la_fail(struct la_decision *d, const char *reason, int err)
{
	strcpy(d->reason, reason);
	d->err = err;
	return err;
}

int la_mapper_backoff_active(void)
{
	return la_cfg.retry_ms > 0 &&
	       (uint64_t)la_now_us() < atomic_load(&la_backoff_until_us);
}

void la_mapper_backoff_start(void)
{
	if (la_cfg.retry_ms > 0)
		atomic_store(&la_backoff_until_us,
			     (uint64_t)(la_now_us() + la_cfg.retry_ms * 1000.0));
}

static int la_ask(const struct la_request *rq, const struct la_pfl *pfl,
		  int want_count, int timeout_ms, int use_backoff,
		  struct la_decision *d)
{
	uint64_t id = atomic_fetch_add(&la_next_id, 1);
	struct la_call *c;
	double t0 = la_now_us();
	int rc;

	la_decision_reset(d);
	if (!la_cfg.mapper[0])
		return la_fail(d, "no_mapper", -ENOTCONN);
	if (la_cfg.curve_error[0])
		return la_fail(d, la_cfg.curve_error, -EACCES);
	if (use_backoff && la_mapper_backoff_active())
		return la_fail(d, "mapper_backoff", -ETIMEDOUT);
	c = la_helper_claim();
	if (!c)
		return la_fail(d, la_helper_running() ? "mapper_busy"
						      : "mapper_no_helper",
			       -EAGAIN);
	c->reqlen = pfl ? la_pack_composite(c->req, sizeof(c->req), id, rq, pfl)
		    : la_pack_request(c->req, sizeof(c->req), id, rq);
	if (c->reqlen == 0) {
		la_helper_release(c);
		return la_fail(d, "request_too_large", -ENAMETOOLONG);
	}
	c->id = id;
	c->want_count = want_count;
	c->deadline_us = t0 + timeout_ms * 1000.0;
	rc = la_helper_wait(c, d);
	d->mapper_us = la_now_us() - t0;
	if (rc < 0) {
		d->err = rc;
		if (use_backoff)
			la_mapper_backoff_start();
		return rc;
	}
	if (want_count == LA_WANT_PONG)
		return d->reason[0] ? (d->err ? d->err : -EPROTO) : 0;
	return d->ok ? 0 : (d->err ? d->err : -EPROTO);
}

void la_mapper_alloc(const struct la_request *rq, int timeout_ms,
		     struct la_decision *d)
{
	la_ask(rq, NULL, rq->stripe_count, timeout_ms, 1, d);
}

void la_mapper_ask_composite(const struct la_request *rq,
			     const struct la_pfl *pfl, int timeout_ms,
			     struct la_decision *d)
{
	la_ask(rq, pfl, LA_WANT_COMPOSITE, timeout_ms, 1, d);
}

int la_mapper_ping(int timeout_ms)
{
	struct la_decision *d = malloc(sizeof(*d));
	int rc;

	if (!d)
		return -ENOMEM;
	rc = la_ask(NULL, NULL, LA_WANT_PONG, timeout_ms, 0, d);
	free(d);
	return rc;
}

void la_mapper_query(const struct la_request *rq, int timeout_ms,
		     struct la_decision *d)
{
	la_ask(rq, NULL, rq->stripe_count, timeout_ms, 0, d);
}

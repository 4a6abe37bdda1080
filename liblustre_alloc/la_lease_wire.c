/*
 * la_lease_wire.c - protocol v2 frames (docs/protocol.md "Protocol v2:
 * leases"): the lease request and the release the helper thread sends, and
 * the lease reply it reads.  A v1 mapper answers a v2 frame with a v1 error
 * reply (EPROTO, "protocol version 2"): decoded here as a refusal with
 * version 1, which turns leasing off for the process.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "la_internal.h"
#include "la_msgpack.h"

size_t la_pack_lease(char *buf, size_t cap, uint64_t id, int count,
		     const struct la_request *rq)
{
	struct la_buf b = { buf, 0, cap, 0 };
	msgpack_packer pk;

	msgpack_packer_init(&pk, &b, la_buf_write);
	msgpack_pack_map(&pk, (size_t)(4 + la_alloc_nfields(rq)));
	la_pack_cstr(&pk, "v");
	msgpack_pack_int(&pk, 2);
	la_pack_cstr(&pk, "op");
	la_pack_cstr(&pk, "lease");
	la_pack_cstr(&pk, "id");
	msgpack_pack_uint64(&pk, id);
	la_pack_cstr(&pk, "count");
	msgpack_pack_int(&pk, count);
	la_pack_alloc_fields(&pk, rq);
	return b.overflow ? 0 : b.len;
}

size_t la_pack_release(char *buf, size_t cap, uint64_t id,
		       const uint64_t *leases, const int *used, int n,
		       const struct la_file_used *files, int nfiles)
{
	struct la_buf b = { buf, 0, cap, 0 };
	msgpack_packer pk;
	int i;

	msgpack_packer_init(&pk, &b, la_buf_write);
	msgpack_pack_map(&pk, 4 + (la_cfg.fsname[0] ? 1 : 0) + (nfiles ? 1 : 0));
	la_pack_cstr(&pk, "v");
	msgpack_pack_int(&pk, 2);
	la_pack_cstr(&pk, "op");
	la_pack_cstr(&pk, "release");
	la_pack_cstr(&pk, "id");
	msgpack_pack_uint64(&pk, id);
	la_pack_cstr(&pk, "leases");
	msgpack_pack_array(&pk, (size_t)n);
	for (i = 0; i < n; i++) {
		msgpack_pack_array(&pk, 2);
		msgpack_pack_uint64(&pk, leases[i]);
		msgpack_pack_int(&pk, used[i]);
	}
	if (nfiles) {
		la_pack_cstr(&pk, "files");
		msgpack_pack_array(&pk, (size_t)nfiles);
		for (i = 0; i < nfiles; i++) {
			msgpack_pack_array(&pk, 3);
			msgpack_pack_uint64(&pk, files[i].lease);
			msgpack_pack_int(&pk, files[i].index);
			la_pack_cstr(&pk, files[i].name);
		}
	}
	if (la_cfg.fsname[0]) {
		la_pack_cstr(&pk, "fsname");
		la_pack_cstr(&pk, la_cfg.fsname);
	}
	return b.overflow ? 0 : b.len;
}

/* One layout: distinct OST indices below LOV_OFFSET_DEFAULT; 0 or -1. */
static int la_layout(const msgpack_object *o, uint32_t *osts, int *count)
{
	uint32_t i, j;

	if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size == 0 ||
	    o->via.array.size > LA_LEASE_MAX_STRIPES)
		return -1;
	for (i = 0; i < o->via.array.size; i++) {
		uint64_t x;

		if (la_obj_u64(&o->via.array.ptr[i], &x) ||
		    x >= LA_LOV_OFFSET_DEFAULT)
			return -1;
		for (j = 0; j < i; j++) /* at most 64 stripes: quadratic is fine */
			if (osts[j] == (uint32_t)x)
				return -1;
		osts[i] = (uint32_t)x;
	}
	*count = (int)o->via.array.size;
	return 0;
}

static void la_revokes(const msgpack_object *o, struct la_lease_reply *r)
{
	uint32_t i;

	if (o->type != MSGPACK_OBJECT_ARRAY)
		return;
	for (i = 0; i < o->via.array.size && r->nrevoke < LA_LEASE_REVOKE_MAX;
	     i++) {
		uint64_t x;

		if (!la_obj_u64(&o->via.array.ptr[i], &x))
			r->revoke[r->nrevoke++] = x;
	}
}

int la_parse_lease_reply(const char *buf, size_t len,
			 struct la_lease_reply *r)
{
	msgpack_unpacked u;
	size_t off = 0;
	const msgpack_object *layouts = NULL;
	uint64_t v = 0;
	int have_id = 0, rc = -EPROTO, released = 0;
	uint32_t i;

	memset(r, 0, offsetof(struct la_lease_reply, counts));
	r->policy[0] = '\0';
	r->nrevoke = 0;
	r->ok = -1;
	msgpack_unpacked_init(&u);
	if (len > LA_LEASE_REPLY_MAX ||
	    msgpack_unpack_next(&u, buf, len, &off) != MSGPACK_UNPACK_SUCCESS ||
	    off != len || u.data.type != MSGPACK_OBJECT_MAP)
		goto out;
	for (i = 0; i < u.data.via.map.size; i++) {
		const msgpack_object *k = &u.data.via.map.ptr[i].key;
		const msgpack_object *val = &u.data.via.map.ptr[i].val;

		if (la_key_is(k, "v")) {
			if (!la_obj_u64(val, &v))
				r->version = (int)v;
		} else if (la_key_is(k, "id")) {
			have_id = !la_obj_u64(val, &r->id);
		} else if (la_key_is(k, "ok")) {
			if (val->type == MSGPACK_OBJECT_BOOLEAN)
				r->ok = val->via.boolean;
		} else if (la_key_is(k, "errno")) {
			if (!la_obj_u64(val, &v) && v > 0 && v < 4096)
				r->err = (int)v;
		} else if (la_key_is(k, "op")) {
			released = la_key_is(val, "released");
		} else if (la_key_is(k, "lease")) {
			la_obj_u64(val, &r->lease);
		} else if (la_key_is(k, "layouts")) {
			layouts = val;
		} else if (la_key_is(k, "stripe_size")) {
			la_obj_u64(val, &r->stripe_size);
		} else if (la_key_is(k, "lease_ms")) {
			if (!la_obj_u64(val, &v) && v <= 3600000)
				r->lease_ms = (int)v;
		} else if (la_key_is(k, "retry_ms")) {
			if (!la_obj_u64(val, &v) && v <= 3600000)
				r->retry_ms = (int)v;
		} else if (la_key_is(k, "allocator")) {
			r->to_lustre = la_key_is(val, "lustre");
		} else if (la_key_is(k, "per_create")) {
			r->per_create = val->type == MSGPACK_OBJECT_BOOLEAN &&
					val->via.boolean;
		} else if (la_key_is(k, "policy")) {
			la_obj_str(val, r->policy, sizeof(r->policy));
		} else if (la_key_is(k, "revoke")) {
			la_revokes(val, r);
		}
	}
	if (!have_id || (r->version != 1 && r->version != 2) || r->ok < 0)
		goto out;
	if (released) {
		rc = 1;
		goto out;
	}
	if (!r->ok) {
		rc = -(r->err ? r->err : EPROTO);
		goto out;
	}
	/* a grant: every layout valid, or none used */
	if (r->version != 2 || !r->lease || !layouts ||
	    layouts->type != MSGPACK_OBJECT_ARRAY ||
	    layouts->via.array.size == 0 ||
	    layouts->via.array.size > LA_LEASE_ASK_MAX || r->lease_ms <= 0 ||
	    r->stripe_size == 0 || r->stripe_size % LA_STRIPE_SIZE_UNIT ||
	    r->stripe_size > UINT32_MAX)
		goto out;
	for (i = 0; i < layouts->via.array.size; i++)
		if (la_layout(&layouts->via.array.ptr[i], r->osts[i],
			      &r->counts[i]))
			goto out;
	r->nlayouts = (int)layouts->via.array.size;
	rc = 0;
out:
	if (rc == -EPROTO && !r->err)
		r->err = EPROTO;
	msgpack_unpacked_destroy(&u);
	return rc;
}

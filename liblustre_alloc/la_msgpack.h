/*
 * la_msgpack.h - msgpack helpers shared by the protocol v1 (la_mapper.c) and
 * v2 (la_lease_wire.c) frames: a packer writing into a caller buffer (no
 * allocation) and small readers of decoded objects.
 */
#ifndef LA_MSGPACK_H
#define LA_MSGPACK_H

#include <msgpack.h>

#include "la_internal.h"

struct la_buf {
	char *p;
	size_t len, cap;
	int overflow;   /* a write did not fit: the frame is unusable */
};
/* msgpack_packer writer into a struct la_buf. */
LA_HIDDEN int la_buf_write(void *data, const char *buf, size_t len);
LA_HIDDEN void la_pack_cstr(msgpack_packer *pk, const char *s);
/* The fields of an alloc (v1) or a lease (v2) after v/op/id: how many, and
 * packing them (docs/protocol.md "Request map"). */
LA_HIDDEN int la_alloc_nfields(const struct la_request *rq);
LA_HIDDEN void la_pack_alloc_fields(msgpack_packer *pk,
				    const struct la_request *rq);
LA_HIDDEN int la_key_is(const msgpack_object *k, const char *s);
/* 0 and *v for a non-negative integer, else -1. */
LA_HIDDEN int la_obj_u64(const msgpack_object *o, uint64_t *v);
/* A string into dst (cap bytes, NUL-terminated, control characters as
 * '?'); other types leave dst alone. */
LA_HIDDEN void la_obj_str(const msgpack_object *o, char *dst, size_t cap);

#endif

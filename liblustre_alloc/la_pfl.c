/*
 * la_pfl.c - composite (PFL) directory defaults: which components the
 * mapper places, asking for them in one request, and the composite layout
 * the create sets.
 *
 * A directory's composite default (lfs setstripe -E <end> -c <n> ... on the
 * directory) is a template: an lov_comp_md_v1 header, one entry per
 * component, one lov_user_md blob per entry (reference "Composite layouts
 * (PFL)", from lustre_user.h).  A new file gets a composite layout with the
 * same components, where each component with OST objects names the OSTs
 * the mapper chose (a LOV_USER_MAGIC_SPECIFIC blob, as
 * "lfs setstripe -E <end> -c <n> -o <idx,...>" builds); every other
 * component (Data-on-MDT, a self-extending extension, foreign or already
 * naming its OSTs) is copied from the template unchanged.
 *
 * Everything here runs on the application's thread: no allocation, no
 * stdio (la_internal.h, "Signal safety").
 */
#define _GNU_SOURCE
#include <errno.h>
#include <msgpack.h>
#include <string.h>

#include "la_internal.h"
#include "la_msgpack.h"


/* What a template component is, from its flags and blob. */
static int la_pfl_kind(uint32_t flags, const unsigned char *blob, uint32_t len,
		       struct la_pfl_comp *c)
{
	struct la_lov_user_md_v3 lum;
	uint32_t magic;

	if (flags & LA_LCME_FL_EXTENSION)
		return LA_PFL_EXT; /* SEL: never instantiated, no objects */
	if (len < sizeof(magic))
		return LA_PFL_KEEP;
	memcpy(&magic, blob, sizeof(magic));
	if (!(magic == LA_LOV_USER_MAGIC_V1 &&
	      len >= sizeof(struct la_lov_user_md_v1)) &&
	    !(magic == LA_LOV_USER_MAGIC_V3 && len >= sizeof(lum)))
		return LA_PFL_KEEP; /* foreign, SPECIFIC, unknown */
	memset(&lum, 0, sizeof(lum));
	memcpy(&lum, blob, magic == LA_LOV_USER_MAGIC_V3 ? sizeof(lum)
					: sizeof(struct la_lov_user_md_v1));
	if (lum.lmm_pattern & LA_LOV_PATTERN_MDT)
		return LA_PFL_MDT;
	if (lum.lmm_pattern != 0 && lum.lmm_pattern != LA_LOV_PATTERN_RAID0)
		return LA_PFL_KEEP; /* overstriping, ...: Lustre's to place */
	/* stripe count 0 = the file system's default (1), 0xffff = all */
	c->stripe_count = lum.lmm_stripe_count == 0xffff ? -1 :
			  lum.lmm_stripe_count ? lum.lmm_stripe_count : 1;
	/* 0: Lustre's default, which the layout keeps (LOD fills it in);
	 * the mapper prices it at LA_PRICING_STRIPE_SIZE */
	c->layout_stripe_size = lum.lmm_stripe_size;
	c->stripe_size = lum.lmm_stripe_size ? lum.lmm_stripe_size
					     : LA_PRICING_STRIPE_SIZE;
	c->pool[0] = '\0';
	if (magic == LA_LOV_USER_MAGIC_V3) {
		memcpy(c->pool, lum.lmm_pool_name, LA_LOV_MAXPOOLNAME);
		c->pool[LA_LOV_MAXPOOLNAME] = '\0';
	}
	return LA_PFL_OST;
}

int la_parse_comp_default(const void *buf, size_t len, struct la_pfl *pfl)
{
	struct la_lov_comp_md_v1 h;
	size_t table;
	uint64_t prev_end = 0;
	int i, sel = 0;

	if (len < sizeof(h))
		return -1;
	memcpy(&h, buf, sizeof(h));
	table = sizeof(h) + (size_t)h.lcm_entry_count *
				    sizeof(struct la_lov_comp_md_entry_v1);
	if (h.lcm_magic != LA_LOV_USER_MAGIC_COMP_V1 || h.lcm_size > len ||
	    h.lcm_size > LA_PFL_BYTES || h.lcm_entry_count < 1 ||
	    h.lcm_entry_count > LA_PFL_MAX || table > h.lcm_size ||
	    h.lcm_mirror_count != 0)
		return -1; /* FLR mirrors, and what we cannot read: Lustre's */
	memcpy(pfl->raw, buf, h.lcm_size);
	pfl->len = h.lcm_size;
	pfl->n = h.lcm_entry_count;
	pfl->nost = 0;
	for (i = 0; i < pfl->n; i++) {
		struct la_lov_comp_md_entry_v1 e;
		struct la_pfl_comp *c = &pfl->c[i];

		memcpy(&e, pfl->raw + sizeof(h) + (size_t)i * sizeof(e),
		       sizeof(e));
		if (e.lcme_offset < table || e.lcme_size > h.lcm_size ||
		    e.lcme_offset > h.lcm_size - e.lcme_size ||
		    e.lcme_start >= e.lcme_end || e.lcme_start < prev_end)
			return -1;
		prev_end = e.lcme_end;
		memset(c, 0, sizeof(*c));
		c->start = e.lcme_start;
		c->end = e.lcme_end;
		c->flags = e.lcme_flags;
		c->blob_off = e.lcme_offset;
		c->blob_len = e.lcme_size;
		c->kind = la_pfl_kind(e.lcme_flags, pfl->raw + e.lcme_offset,
				      e.lcme_size, c);
		if (c->kind == LA_PFL_EXT)
			sel = 1;
		/* Only the components that start at 0 are instantiated at
		 * create (lod_qos.c lod_qos_prep_create(): size >= e_start);
		 * the others when I/O reaches them, when a list named now may
		 * name an OST drained or full by then, and the write fails.
		 * They are left to Lustre's allocator unless the site opts in
		 * (LUSTRE_ALLOC_PFL_ALL). */
		if (c->kind == LA_PFL_OST && c->start > 0 && !la_cfg.pfl_all)
			c->kind = LA_PFL_KEEP;
		if (c->kind == LA_PFL_OST)
			pfl->nost++;
	}
	/* a self-extending layout is passed to Lustre untouched: it grows
	 * and spills over on the OSTs it chooses (lod_object.c,
	 * lod_sel_handler()) */
	return sel ? -2 : 0;
}

void la_pfl_copy(struct la_pfl *dst, const struct la_pfl *src)
{
	dst->n = src->n;
	dst->nost = src->nost;
	memcpy(dst->c, src->c, (size_t)src->n * sizeof(src->c[0]));
	dst->len = src->len;
	memcpy(dst->raw, src->raw, src->len);
}

size_t la_build_comp(void *buf, size_t cap, const struct la_decision *d,
		     const char *pool)
{
	const struct la_pfl *pfl = d->pfl;
	struct la_lov_comp_md_v1 h;
	unsigned char *out = buf;
	size_t off = sizeof(h) + (size_t)pfl->n *
					 sizeof(struct la_lov_comp_md_entry_v1);
	int i, k = 0, at = 0;

	if (off > cap)
		return 0;
	memset(buf, 0, off);
	for (i = 0; i < pfl->n; i++) {
		const struct la_pfl_comp *c = &pfl->c[i];
		struct la_lov_comp_md_entry_v1 e;
		size_t blob;

		if (c->kind == LA_PFL_OST) {
			int n = d->comp_count[k++];

			blob = la_lum_size(n);
			if (blob > cap - off)
				return 0;
			/* each component keeps its own stripe size and pool
			 * (else the file's) */
			la_build_lum(out + off, c->layout_stripe_size, n,
				     d->osts + at,
				     c->pool[0] ? c->pool
				     : pool && *pool ? pool : NULL);
			at += n;
		} else {
			blob = c->blob_len;
			if (blob > cap - off)
				return 0;
			memcpy(out + off, pfl->raw + c->blob_off, blob);
		}
		memset(&e, 0, sizeof(e));
		/* the MDS numbers components and instantiates them */
		e.lcme_flags = c->flags & ~LA_LCME_FL_INIT;
		e.lcme_start = c->start;
		e.lcme_end = c->end;
		e.lcme_offset = (uint32_t)off;
		e.lcme_size = (uint32_t)blob;
		memcpy(out + sizeof(h) + (size_t)i * sizeof(e), &e, sizeof(e));
		off += blob;
	}
	memset(&h, 0, sizeof(h));
	h.lcm_magic = LA_LOV_USER_MAGIC_COMP_V1;
	h.lcm_size = (uint32_t)off;
	h.lcm_entry_count = (uint16_t)pfl->n;
	memcpy(out, &h, sizeof(h));
	return off;
}

size_t la_pack_composite(char *buf, size_t cap, uint64_t id,
			 const struct la_request *rq, const struct la_pfl *pfl)
{
	struct la_buf b = { buf, 0, cap, 0 };
	msgpack_packer pk;
	int i;

	msgpack_packer_init(&pk, &b, la_buf_write);
	msgpack_pack_map(&pk, (size_t)(4 + la_alloc_nfields(rq)));
	la_pack_cstr(&pk, "v");
	msgpack_pack_int(&pk, 2);
	la_pack_cstr(&pk, "op");
	la_pack_cstr(&pk, "alloc");
	la_pack_cstr(&pk, "id");
	msgpack_pack_uint64(&pk, id);
	/* the file's fields; its stripe_count/stripe_size are ignored */
	la_pack_alloc_fields(&pk, rq);
	la_pack_cstr(&pk, "components");
	msgpack_pack_array(&pk, (size_t)pfl->nost);
	for (i = 0; i < pfl->n; i++) {
		const struct la_pfl_comp *c = &pfl->c[i];

		if (c->kind != LA_PFL_OST)
			continue;
		msgpack_pack_map(&pk, c->pool[0] ? 5 : 4);
		la_pack_cstr(&pk, "start");
		msgpack_pack_uint64(&pk, c->start);
		la_pack_cstr(&pk, "end");
		msgpack_pack_uint64(&pk, c->end);
		la_pack_cstr(&pk, "stripe_count");
		msgpack_pack_int(&pk, c->stripe_count);
		la_pack_cstr(&pk, "stripe_size");
		msgpack_pack_uint64(&pk, c->stripe_size);
		if (c->pool[0]) {
			la_pack_cstr(&pk, "pool");
			la_pack_cstr(&pk, c->pool);
		}
	}
	return b.overflow ? 0 : b.len;
}

void la_mapper_composite(const struct la_request *rq, const struct la_pfl *pfl,
			 int timeout_ms, struct la_decision *d)
{
	int i, k = 0;

	la_mapper_ask_composite(rq, pfl, timeout_ms, d);
	d->pfl = pfl;
	if (!d->ok)
		return;
	/* one list per OST component, none wider than its template asks
	 * (the mapper may clip to the usable OSTs, as for a plain file) */
	if (d->ncomp != pfl->nost)
		goto garbage;
	for (i = 0; i < pfl->n; i++) {
		const struct la_pfl_comp *c = &pfl->c[i];

		if (c->kind != LA_PFL_OST)
			continue;
		if (c->stripe_count > 0 && d->comp_count[k] > c->stripe_count)
			goto garbage;
		k++;
	}
	return;
garbage:
	d->ok = 0;
	d->err = -EPROTO;
	strcpy(d->reason, "mapper_garbage:components");
}

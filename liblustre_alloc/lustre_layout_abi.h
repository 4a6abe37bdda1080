/*
 * lustre_layout_abi.h - the few Lustre client constants and packed structs
 * the shim needs to create a file on chosen OSTs.
 *
 * Defined here from facts, not copied: the uapi header (lustre_user.h) is
 * GPL-2.0 and Lustre is not installed on the build machines.  Every value is
 * restated in ../shared/reference/lustre-client-layout-api.md ("Constants
 * (x86_64)" and "Packed layouts"), gathered from lustre-release:
 * lustre/include/uapi/linux/lustre/lustre_user.h and liblustreapi.
 * The byte layout is checked by tests/test_layout_abi.c.
 */
#ifndef LUSTRE_LAYOUT_ABI_H
#define LUSTRE_LAYOUT_ABI_H

#include <linux/ioctl.h>
#include <stdint.h>

/* statfs(2) f_type of a Lustre client mount (lustre_user.h LL_SUPER_MAGIC). */
#define LA_LL_SUPER_MAGIC 0x0BD00BD0u

/* lov_user_md magics (lustre_user.h LOV_USER_MAGIC_*). */
#define LA_LOV_USER_MAGIC_V1 0x0BD10BD0u
#define LA_LOV_USER_MAGIC_V3 0x0BD30BD0u
/* v3 shape, one lmm_objects[] entry per requested OST ("lfs setstripe -o"). */
#define LA_LOV_USER_MAGIC_SPECIFIC 0x0BD50BD0u
/* PFL composite layout: lov_comp_md_v1 (below). */
#define LA_LOV_USER_MAGIC_COMP_V1 0x0BD60BD0u
/* A self-extending layout, lov_comp_md_v1 shaped (LOV_USER_MAGIC_SEL). */
#define LA_LOV_USER_MAGIC_SEL 0x0BD80BD0u

#define LA_LOV_PATTERN_RAID0 0x1u
/* Data-on-MDT component: no OST objects (lustre_user.h LOV_PATTERN_MDT). */
#define LA_LOV_PATTERN_MDT 0x100u
/* No start OST requested (lustre_user.h LOV_OFFSET_DEFAULT). */
#define LA_LOV_OFFSET_DEFAULT 0xffffu
/* Pool name: 15 characters plus NUL (LOV_MAXPOOLNAME). */
#define LA_LOV_MAXPOOLNAME 15

/* ioctls on the file descriptor (lustre_user.h LL_IOC_LOV_SETSTRIPE,
 * LL_IOC_LOV_GETSTRIPE), built with this architecture's _IOW: 0x4008669A and
 * 0x4008669B on x86_64 and aarch64, 0x8008669A and 0x8008669B on ppc64le
 * (its _IOC_WRITE is 4 and its direction field starts at bit 29). */
#define LA_LL_IOC_LOV_SETSTRIPE ((unsigned long)_IOW('f', 154, long))
#define LA_LL_IOC_LOV_GETSTRIPE ((unsigned long)_IOW('f', 155, long))

/* open(2) flag asking llite not to instantiate objects until SETSTRIPE.
 * O_NOCTTY | FASYNC: the spelling accepted by every Lustre version. */
#define LA_O_LOV_DELAY_CREATE 0x2100

/* Stripe size unit: a multiple of 64 KiB (lov_user_md lmm_stripe_size). */
#define LA_STRIPE_SIZE_UNIT 65536u

/* Largest stripe count a Lustre layout can hold (LOV_MAX_STRIPE_COUNT). */
#define LA_MAX_STRIPES 2000

/* lov_user_ost_data_v1: 24 bytes. */
struct la_lov_user_ost_data_v1 {
	uint64_t l_object_id;  /* @0  ost_id, zero when creating */
	uint64_t l_object_seq; /* @8 */
	uint32_t l_ost_gen;    /* @16 */
	uint32_t l_ost_idx;    /* @20 OST index */
} __attribute__((packed));

/* lov_user_md_v1: 32 bytes + objects. */
struct la_lov_user_md_v1 {
	uint32_t lmm_magic;         /* @0 */
	uint32_t lmm_pattern;       /* @4 */
	uint64_t lmm_object_id;     /* @8  lmm_oi */
	uint64_t lmm_object_seq;    /* @16 */
	uint32_t lmm_stripe_size;   /* @24 bytes */
	uint16_t lmm_stripe_count;  /* @28 */
	uint16_t lmm_stripe_offset; /* @30 */
	struct la_lov_user_ost_data_v1 lmm_objects[]; /* @32 */
} __attribute__((packed));

/* lov_user_md_v3: 48 bytes + objects; the shape of LOV_USER_MAGIC_SPECIFIC. */
struct la_lov_user_md_v3 {
	uint32_t lmm_magic;         /* @0 */
	uint32_t lmm_pattern;       /* @4 */
	uint64_t lmm_object_id;     /* @8 */
	uint64_t lmm_object_seq;    /* @16 */
	uint32_t lmm_stripe_size;   /* @24 */
	uint16_t lmm_stripe_count;  /* @28 */
	uint16_t lmm_stripe_offset; /* @30 */
	char lmm_pool_name[LA_LOV_MAXPOOLNAME + 1]; /* @32 */
	struct la_lov_user_ost_data_v1 lmm_objects[]; /* @48 */
} __attribute__((packed));

/* ---- composite (PFL) layouts: reference "Composite layouts (PFL)" ---- */

/* lov_comp_md_entry_v1 lcme_flags (lustre_user.h LCME_FL_*). */
#define LA_LCME_FL_INIT 0x10u      /* instantiated (never in a template) */
#define LA_LCME_FL_EXTENSION 0x40u /* self-extending (SEL): no objects */
/* End of the last component, "-E -1" (lustre_user.h LUSTRE_EOF). */
#define LA_LUSTRE_EOF 0xFFFFFFFFFFFFFFFFull

/* lov_comp_md_entry_v1: 48 bytes. */
struct la_lov_comp_md_entry_v1 {
	uint32_t lcme_id;          /* @0  0 when creating: the MDS numbers them */
	uint32_t lcme_flags;       /* @4  LCME_FL_* */
	uint64_t lcme_start;       /* @8  lcme_extent.e_start, bytes */
	uint64_t lcme_end;         /* @16 lcme_extent.e_end, bytes or LUSTRE_EOF */
	uint32_t lcme_offset;      /* @24 the blob, from the start of the header */
	uint32_t lcme_size;        /* @28 the blob's bytes */
	uint32_t lcme_layout_gen;  /* @32 */
	uint64_t lcme_timestamp;   /* @36 */
	uint32_t lcme_padding_1;   /* @44 */
} __attribute__((packed));

/* lov_comp_md_v1: 32 bytes + entries + blobs. */
struct la_lov_comp_md_v1 {
	uint32_t lcm_magic;        /* @0  LOV_USER_MAGIC_COMP_V1 */
	uint32_t lcm_size;         /* @4  header + entries + blobs */
	uint32_t lcm_layout_gen;   /* @8 */
	uint16_t lcm_flags;        /* @12 FLR state, 0 for plain PFL */
	uint16_t lcm_entry_count;  /* @14 */
	uint16_t lcm_mirror_count; /* @16 mirrors - 1 */
	uint8_t lcm_padding1[6];   /* @18 */
	uint64_t lcm_padding2;     /* @24 */
	struct la_lov_comp_md_entry_v1 lcm_entries[]; /* @32 */
} __attribute__((packed));

#endif

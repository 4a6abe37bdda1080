/*
 * la_lease.c - layouts leased ahead (protocol v2, docs/protocol.md "Protocol
 * v2: leases"): a create takes the next layout its class holds, with no
 * round trip; the helper thread asks the mapper for more before they run
 * out and returns what was not used.
 *
 * A class is what the mapper decides alike: (directory, pool, stripe count,
 * stripe size, expected bytes, uid, gid, project id).  Each class holds a
 * ring of LA_RING layouts with two monotonic counters: `tail` (layouts the
 * helper installed) and `head` (layouts taken).  A create copies the slot at
 * head and claims it with a compare-and-swap of head; a copy the helper
 * overwrote meanwhile is never used, because the helper refills a slot only
 * once head has passed it, so the CAS fails.  The create path is atomics,
 * copies and at most one futex wait: async-signal-safe, no lock, no malloc.
 *
 * Slot and lease life:
 *   helper installs (READY) -> a create takes it (CREATING, then TAKEN when
 *   the file is created, with the file's name when it got the layout) or
 *   skips it (SKIPPED: revoked, or past its use-by time) -> the helper reaps
 *   it, counting per lease the layouts used and naming each file created
 *   with one (`files [lease, index, name]`: the mapper's decision log and
 *   explain), and when every layout of a lease is reaped sends
 *   `release [lease, used]` (the mapper un-books the rest).
 * A create that finds its class empty asks for a refill and waits for it
 * until its deadline (the first create of a class waits one round trip: an
 * N-rank burst of one file each is when placement matters most, so the first
 * file is not given to Lustre's allocator).
 *
 * Sizing (ours): a refill asks for 100 ms of the class's creates (its rate:
 * one over the mean gap between its creates; before it has one, the rate
 * since the last refill), at least LA_ASK_MIN, but after the first lease no
 * more than its rate uses within a use window (at least 1: a slow class asks
 * for one layout), at most LA_ASK_MAX; twice the last grant when creates
 * used it up and are waiting (a burst outran it; a grant that ran out by
 * expiry is no burst), and is asked once half of the last grant is left.  A
 * layout is used until 80% of its lease_ms has passed since the reply
 * arrived: the mapper's lifetime runs from its grant, and the rest of the
 * margin covers the round trip.
 *
 * Refresh (ours): a class that creates again and again, but more slowly than
 * its layouts live (a writer's file every few seconds), would find its ring
 * expired at every create and wait a round trip for each (on Lustre 2.17.0
 * in the lustre-vm guest: 118 leases for 120 creates, 0.42 s median wait).
 * So while the class's next create is due (it has taken 2 or more, its mean
 * gap between creates is at most LA_REFRESH_GAP_MAX_US, the next create is
 * expected before a fresh layout would expire and it is not 2 gaps late)
 * the helper asks for a fresh lease LA_REFRESH_RTTS round trips before the
 * newest layout's use-by time, sized by the rate as any refill (1 layout
 * for a slow class).  A layout is then decided at most one use window
 * before its create, and the create takes it with no round trip.
 *
 * Fallbacks: a v1 mapper refuses v2 (EPROTO): leasing stops for the process
 * and every create asks per create (v1).  `per_create` (shadow mode) sends
 * the class to v1 for one lease lifetime; other refusals send its creates
 * to Lustre's allocator for `retry_ms` (scope) or LUSTRE_ALLOC_RETRY_MS.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <math.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "la_internal.h"

#define LA_CLASSES 32
#define LA_RING 512                /* layouts held per class (power of 2) */
#define LA_ASK_MIN 16               /* the first lease of a class, at least */
#define LA_ASK_MAX LA_LEASE_ASK_MAX
#define LA_ASK_HORIZON_S 0.1       /* a refill covers this much of the rate */
#define LA_USE_FRACTION 0.8        /* of lease_ms, from the reply */
#define LA_TRACK 16                /* leases a class holds at once */
#define LA_RELEASE_MAX 64          /* leases per release message */
#define LA_RELEASE_FILES 32        /* files named per release message */
#define LA_RELEASE_BODY 16384      /* > 64 leases + 32 names of NAME_MAX */
#define LA_REQ_TIMEOUT_US 2e6      /* a lease request with no reply is given up */
#define LA_IDLE_EVICT_US 10e6      /* an empty class unused this long is freed */
#define LA_CLOSE_WAIT_US 100000.0  /* at exit, for a refill on its way */
#define LA_REFRESH_GAP_MAX_US 5e6  /* refreshed: classes creating this often */
#define LA_REFRESH_RTTS 2.0        /* refresh this many round trips early */
#define LA_REFRESH_LEAD_MIN_US 20000.0 /* and at least this early (wake-ups) */

enum { LA_CLS_FREE, LA_CLS_FILLING, LA_CLS_ACTIVE, LA_CLS_EVICTING };
/* READY -> CREATING (a create took it) -> TAKEN (the create is over; name
 * set when the file got the layout), or READY -> SKIPPED (stale, revoked).
 * The reaper stops at READY and CREATING below the head. */
enum { LA_SLOT_EMPTY, LA_SLOT_READY, LA_SLOT_CREATING, LA_SLOT_TAKEN,
       LA_SLOT_SKIPPED };
/* LUSTRE: a refusal or failure, creates go to Lustre's allocator until the
 * time is up, then ask and wait again; TO_LUSTRE: the mapper left the class to
 * Lustre's allocator (the OSTs look alike), kept past its time while a fresh
 * answer is on its way, so no create waits for it (cleared by a grant). */
enum { LA_NOLEASE_NONE, LA_NOLEASE_V1, LA_NOLEASE_LUSTRE, LA_NOLEASE_TO_LUSTRE };
#define LA_TO_LUSTRE_REASON "lustre_allocator"

struct la_slot {
	atomic_int state;
	int count;
	uint32_t osts[LA_LEASE_MAX_STRIPES];
	uint64_t stripe_size;
	uint64_t lease;
	double use_until_us;
	atomic_int dead;           /* revoked by the mapper */
	char policy[32];
	char name[LA_NAME_MAX + 1]; /* the file created with it ("" none) */
};

struct la_track {
	uint64_t lease;
	uint64_t start, end;       /* ring positions of its first layout, after its last */
	int granted, used;
};

struct la_class {
	atomic_int state;
	atomic_int users;          /* creates looking at this class now */
	/* the key (written while FILLING, read while ACTIVE) */
	char dir[LA_PATH_MAX];
	size_t dirlen;
	char pool[LA_LOV_MAXPOOLNAME + 1];
	int stripe_count;
	uint64_t stripe_size, expected_bytes;
	uint32_t uid, gid;
	int64_t projid;
	/* the ring */
	_Atomic uint64_t head, tail;
	struct la_slot ring[LA_RING];
	atomic_int refill;         /* a create wants more */
	atomic_int lowwater;       /* ask for more when this many are left */
	atomic_int waiters;        /* creates waiting for a refill now */
	atomic_int fill_gen;       /* bumped at every answer: waiters wake */
	_Atomic uint64_t taken;
	_Atomic double last_used_us;
	_Atomic double last_take_us;  /* the last layout taken, 0 none */
	_Atomic double gap_us;        /* mean gap between takes, 0 unknown */
	/* a refusal: until when, and what creates do meanwhile */
	_Atomic double nolease_until_us;
	atomic_int nolease_kind;
	char nolease_reason[48];
	/* helper only */
	_Atomic uint64_t req_id;   /* lease request in flight, 0 none */
	double req_sent_us;
	uint64_t reaped;
	int last_granted;
	int installed;              /* grants installed in this class's life */
	uint64_t taken_at_install;  /* `taken` when the last grant came */
	double newest_until_us;     /* use-by time of the newest layout held */
	double use_us;              /* the last grant's use window, us */
	double rtt_us;              /* a lease request's round trip, mean */
	double rate_per_s, rate_t_us;
	uint64_t rate_taken;
	struct la_track track[LA_TRACK];
	int ntrack;
};

static struct la_class la_classes[LA_CLASSES];
static atomic_int la_classes_hwm;
static atomic_int la_v2_off;       /* the mapper speaks v1 only */
static _Atomic uint64_t la_lease_stats[LA_LS_N];

/* ---- the key ---- */

static int la_key_matches(const struct la_class *k, const struct la_request *rq,
			  size_t dirlen)
{
	return k->dirlen == dirlen && k->stripe_count == rq->stripe_count &&
	       k->stripe_size == rq->stripe_size &&
	       k->expected_bytes == rq->expected_bytes && k->uid == rq->uid &&
	       k->gid == rq->gid && k->projid == rq->projid &&
	       strcmp(k->pool, rq->pool ? rq->pool : "") == 0 &&
	       memcmp(k->dir, rq->path, dirlen) == 0;
}

static void la_key_set(struct la_class *k, const struct la_request *rq,
		       size_t dirlen)
{
	const char *pool = rq->pool ? rq->pool : "";
	size_t pl = strlen(pool);

	memcpy(k->dir, rq->path, dirlen);
	k->dir[dirlen] = '\0';
	k->dirlen = dirlen;
	if (pl > LA_LOV_MAXPOOLNAME)
		pl = LA_LOV_MAXPOOLNAME;
	memcpy(k->pool, pool, pl);
	k->pool[pl] = '\0';
	k->stripe_count = rq->stripe_count;
	k->stripe_size = rq->stripe_size;
	k->expected_bytes = rq->expected_bytes;
	k->uid = rq->uid;
	k->gid = rq->gid;
	k->projid = rq->projid;
}

/* The ACTIVE class of rq with users raised, or a new one; NULL when every
 * class is taken.  The caller lowers users. */
static struct la_class *la_class_for(const struct la_request *rq, size_t dirlen)
{
	int i, n = atomic_load(&la_classes_hwm);

	for (i = 0; i < n; i++) {
		struct la_class *k = &la_classes[i];

		atomic_fetch_add(&k->users, 1);
		if (atomic_load(&k->state) == LA_CLS_ACTIVE &&
		    la_key_matches(k, rq, dirlen))
			return k;
		atomic_fetch_sub(&k->users, 1);
	}
	for (i = 0; i < LA_CLASSES; i++) {
		struct la_class *k = &la_classes[i];
		int want = LA_CLS_FREE;

		if (!atomic_compare_exchange_strong(&k->state, &want,
						    LA_CLS_FILLING))
			continue;
		la_raise_hwm(&la_classes_hwm, i + 1);
		atomic_fetch_add(&k->users, 1);
		la_key_set(k, rq, dirlen);
		atomic_store(&k->nolease_until_us, 0.0);
		atomic_store(&k->nolease_kind, LA_NOLEASE_NONE);
		atomic_store(&k->state, LA_CLS_ACTIVE);
		return k;
	}
	return NULL;
}

/* ---- the create path (async-signal-safe) ---- */

/* The gap between creates that took a layout, a running mean (threads of
 * one process race here; the refresh only needs its order of magnitude). */
static void la_note_take(struct la_class *k)
{
	double now = la_now_us();
	double prev = atomic_exchange(&k->last_take_us, now);
	double gap = atomic_load(&k->gap_us);

	if (prev > 0 && now > prev)
		atomic_store(&k->gap_us, gap > 0 ? 0.5 * (gap + (now - prev))
						 : now - prev);
}

/* 1: a layout from the ring into d; 0: the ring is empty. */
static int la_ring_take(struct la_class *k, struct la_decision *d)
{
	for (;;) {
		uint64_t h = atomic_load(&k->head), t = atomic_load(&k->tail);
		struct la_slot *s = &k->ring[h % LA_RING];
		int dead, count;
		double until;

		if (h >= t)
			return 0;
		atomic_thread_fence(memory_order_acquire);
		count = s->count;
		until = s->use_until_us;
		dead = atomic_load(&s->dead);
		if (count > 0 && count <= LA_LEASE_MAX_STRIPES) {
			memcpy(d->osts, s->osts, (size_t)count * sizeof(s->osts[0]));
			d->stripe_size = s->stripe_size;
			d->lease = s->lease;
			memcpy(d->policy, s->policy, sizeof(d->policy));
		}
		atomic_thread_fence(memory_order_acquire);
		if (!atomic_compare_exchange_strong(&k->head, &h, h + 1))
			continue; /* taken by another create: the copy may be torn */
		if (dead || la_now_us() > until || count <= 0 ||
		    count > LA_LEASE_MAX_STRIPES) {
			atomic_store(&s->state, LA_SLOT_SKIPPED);
			atomic_fetch_add(&la_lease_stats[dead ? LA_LS_REVOKED :
						     LA_LS_EXPIRED], 1);
			continue;
		}
		atomic_store(&s->state, LA_SLOT_CREATING);
		d->lease_slot = s;
		d->count = count;
		d->ok = 1;
		d->reason[0] = '\0';
		d->mapper_fallback[0] = '\0';
		atomic_fetch_add(&k->taken, 1);
		atomic_fetch_add(&la_lease_stats[LA_LS_TAKEN], 1);
		la_note_take(k);
		/* down to half the last grant: the helper asks for more */
		if (t - (h + 1) <= (uint64_t)atomic_load(&k->lowwater) &&
		    !atomic_exchange(&k->refill, 1))
			la_helper_wake();
		return 1;
	}
}

int la_lease_take(const struct la_request *rq, size_t dirlen,
		  double deadline_us, struct la_decision *d)
{
	struct la_class *k;
	int rc = LA_LEASE_PER_CREATE;
	double t0;

	if (!la_cfg.lease || !la_cfg.mapper[0] || la_cfg.curve_error[0] ||
	    atomic_load(&la_v2_off) ||
	    rq->stripe_count < 1 || rq->stripe_count > LA_LEASE_MAX_STRIPES ||
	    dirlen >= LA_PATH_MAX || !la_helper_running())
		return LA_LEASE_PER_CREATE;
	k = la_class_for(rq, dirlen);
	if (!k)
		return LA_LEASE_PER_CREATE; /* every class busy: ask per create */
	t0 = la_now_us();
	atomic_store(&k->last_used_us, la_now_us());
	if (la_mapper_backoff_active()) { /* as a v1 create would */
		strcpy(d->reason, "mapper_backoff");
		rc = LA_LEASE_LUSTRE;
		goto out;
	}
	for (;;) {
		double until = atomic_load(&k->nolease_until_us);
		int gen;

		if (until > la_now_us()) {
			int kind = atomic_load(&k->nolease_kind);

			if (kind == LA_NOLEASE_LUSTRE ||
			    kind == LA_NOLEASE_TO_LUSTRE) {
				memcpy(d->reason, k->nolease_reason,
				       sizeof(k->nolease_reason));
				d->to_lustre = kind == LA_NOLEASE_TO_LUSTRE;
				rc = LA_LEASE_LUSTRE;
			}
			goto out;
		}
		gen = atomic_load(&k->fill_gen);
		if (la_ring_take(k, d)) {
			rc = LA_LEASE_TAKEN;
			goto out;
		}
		if (atomic_load(&la_v2_off))
			goto out;
		if (atomic_load(&k->nolease_kind) == LA_NOLEASE_TO_LUSTRE) {
			/* left to Lustre, and that answer is over: ask again
			 * in the background; Lustre places this one, as the
			 * mapper said a moment ago */
			if (!atomic_exchange(&k->refill, 1))
				la_helper_wake();
			strcpy(d->reason, LA_TO_LUSTRE_REASON);
			d->to_lustre = 1;
			rc = LA_LEASE_LUSTRE;
			goto out;
		}
		if (la_now_us() >= deadline_us)
			break;
		/* empty: ask, and wait for an answer until our deadline (other
		 * creates waiting too may take what it brings: ask again) */
		atomic_store(&k->refill, 1);
		atomic_fetch_add(&k->waiters, 1);
		la_helper_wake();
		atomic_fetch_add(&la_lease_stats[LA_LS_WAITED], 1);
		while (atomic_load(&k->fill_gen) == gen &&
		       la_now_us() < deadline_us)
			la_futex_wait_until(&k->fill_gen, gen, deadline_us);
		atomic_fetch_sub(&k->waiters, 1);
	}
	/* no answer in time: as a v1 timeout, Lustre's allocator, and the
	 * process backs off */
	strcpy(d->reason, atomic_load(&k->req_id) ? "mapper_timeout"
						  : "mapper_unreachable");
	la_mapper_backoff_start();
	rc = LA_LEASE_LUSTRE;
out:
	d->mapper_us = la_now_us() - t0; /* the wait for a refill, if any */
	atomic_fetch_sub(&k->users, 1);
	return rc;
}

void la_lease_created(const struct la_decision *d, const char *name,
		      int applied)
{
	struct la_slot *s = d->lease_slot;
	size_t n = strlen(name);

	if (!s)
		return;
	if (applied && n <= LA_NAME_MAX)
		memcpy(s->name, name, n + 1);
	else
		s->name[0] = '\0';
	atomic_store(&s->state, LA_SLOT_TAKEN);
}

/* ---- the helper side ---- */

static void la_lease_refused(struct la_class *k, int kind, const char *reason,
			     int for_ms);

static void *la_lease_sock;
static _Atomic uint64_t la_lease_next_id = 1;
static uint64_t la_release_ids[LA_RELEASE_MAX];
static int la_release_used[LA_RELEASE_MAX];
static int la_nrelease;
static struct la_file_used la_files[LA_RELEASE_FILES];
static int la_nfiles;

static int la_sock_ok(void)
{
	if (!la_lease_sock) {
		int linger = 200; /* the releases sent at exit get out */

		la_lease_sock = la_helper_socket();
		if (la_lease_sock)
			zmq_setsockopt(la_lease_sock, ZMQ_LINGER, &linger,
				       sizeof(linger));
	}
	return la_lease_sock != NULL;
}

static int la_send_body(const char *body, size_t len)
{
	if (!la_sock_ok())
		return -1;
	if (zmq_send(la_lease_sock, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT) != 0)
		return errno == EAGAIN ? -EAGAIN : -1;
	return zmq_send(la_lease_sock, body, len, ZMQ_DONTWAIT) == (int)len ? 0
									     : -1;
}

static void la_flush_releases(void)
{
	char body[LA_RELEASE_BODY];
	size_t len;

	if (!la_nrelease && !la_nfiles)
		return;
	len = la_pack_release(body, sizeof(body),
			      atomic_fetch_add(&la_lease_next_id, 1),
			      la_release_ids, la_release_used, la_nrelease,
			      la_files, la_nfiles);
	if (len && la_send_body(body, len) == 0)
		atomic_fetch_add(&la_lease_stats[LA_LS_RELEASES], 1);
	/* unsent: the mapper's lifetime returns the leases; the files go
	 * unnamed (the decision log and explain miss them) */
	la_nrelease = 0;
	la_nfiles = 0;
}

/* A file created with layout index of lease: named in the next release
 * (before its lease's own release, or in the same message). */
static void la_queue_file(uint64_t lease, int index, const char *name)
{
	if (la_nfiles == LA_RELEASE_FILES)
		la_flush_releases();
	la_files[la_nfiles].lease = lease;
	la_files[la_nfiles].index = index;
	memcpy(la_files[la_nfiles].name, name, sizeof(la_files[0].name));
	la_nfiles++;
}

static void la_queue_release(uint64_t lease, int used)
{
	if (la_nrelease == LA_RELEASE_MAX)
		la_flush_releases();
	la_release_ids[la_nrelease] = lease;
	la_release_used[la_nrelease++] = used;
}

/* Count what creates took, release the leases every layout of which is
 * through; skip (as the helper) layouts past their use-by time. */
static void la_reap(struct la_class *k, double now)
{
	uint64_t h, t;
	int i;

	for (;;) { /* the head layout is stale: take it out of the way */
		struct la_slot *s;

		h = atomic_load(&k->head);
		t = atomic_load(&k->tail);
		if (h >= t)
			break;
		s = &k->ring[h % LA_RING];
		if (!atomic_load(&s->dead) && s->use_until_us >= now)
			break;
		if (atomic_compare_exchange_strong(&k->head, &h, h + 1))
			atomic_store(&s->state, LA_SLOT_SKIPPED);
	}
	h = atomic_load(&k->head);
	while (k->reaped < h) {
		struct la_slot *s = &k->ring[k->reaped % LA_RING];

		int state = atomic_load(&s->state);

		/* a create between its CAS and its state store, or still
		 * creating the file: next time */
		if (state == LA_SLOT_READY || state == LA_SLOT_CREATING)
			break;
		for (i = 0; i < k->ntrack; i++) {
			if (k->track[i].lease != s->lease)
				continue;
			if (state == LA_SLOT_TAKEN) {
				k->track[i].used++;
				if (s->name[0])
					la_queue_file(s->lease,
						      (int)(k->reaped -
							    k->track[i].start),
						      s->name);
			}
			break;
		}
		atomic_store(&s->state, LA_SLOT_EMPTY);
		k->reaped++;
	}
	for (i = 0; i < k->ntrack;) {
		if (k->track[i].end <= k->reaped) {
			la_queue_release(k->track[i].lease, k->track[i].used);
			k->track[i] = k->track[--k->ntrack];
		} else {
			i++;
		}
	}
}

static int la_ask_size(struct la_class *k, double now)
{
	uint64_t taken = atomic_load(&k->taken);
	double dt = (now - k->rate_t_us) / 1e6;
	double want, floor;
	uint64_t room = LA_RING - (atomic_load(&k->tail) - k->reaped);
	double gap = atomic_load(&k->gap_us);

	if (gap > 0) {
		/* the mean gap between creates: a refill asked just after
		 * another (the low-water mark of a 2-layout lease) saw one
		 * create in a few ms and asked for 37 layouts at 1/1.5 s */
		k->rate_per_s = 1e6 / gap;
	} else if (k->rate_t_us > 0 && dt > 0) {
		double rate = (double)(taken - k->rate_taken) / dt;

		k->rate_per_s = k->rate_per_s > 0 ? 0.5 * (k->rate_per_s + rate)
						   : rate;
	}
	want = ceil(k->rate_per_s * LA_ASK_HORIZON_S);
	/* at least LA_ASK_MIN, but after the first lease never more than the
	 * class's rate uses before they expire (at least 1) */
	floor = LA_ASK_MIN;
	if (k->installed && floor > ceil(k->rate_per_s * k->use_us / 1e6))
		floor = ceil(k->rate_per_s * k->use_us / 1e6);
	if (floor < 1)
		floor = 1;
	if (want < floor)
		want = floor;
	k->rate_t_us = now;
	k->rate_taken = taken;
	if (want < 2.0 * atomic_load(&k->waiters)) /* a burst is waiting */
		want = 2.0 * atomic_load(&k->waiters);
	/* creates used the last grant up and wait: the rate since the last
	 * refill undercounts a burst that was waiting, so at least double it.
	 * Not when it ran out by expiry (a slow class): doubling then grew a
	 * writer's every lease to LA_ASK_MAX, one layout used of each. */
	if (atomic_load(&k->waiters) && want < 2.0 * k->last_granted &&
	    taken - k->taken_at_install >= (uint64_t)k->last_granted)
		want = 2.0 * k->last_granted;
	if (want > LA_ASK_MAX)
		want = LA_ASK_MAX;
	if (want > (double)room)
		want = (double)room;
	if (k->ntrack == LA_TRACK)
		want = 0;
	return (int)want;
}

static void la_send_lease(struct la_class *k, double now)
{
	char body[LA_REQ_MAX];
	struct la_request rq;
	int n = la_ask_size(k, now);
	uint64_t id;
	size_t len;
	int rc;

	if (n <= 0)
		return;
	memset(&rq, 0, sizeof(rq));
	rq.job = la_cfg.job;
	rq.path = k->dir;
	rq.pool = k->pool;
	rq.stripe_count = k->stripe_count;
	rq.stripe_size = k->stripe_size;
	rq.expected_bytes = k->expected_bytes;
	rq.uid = k->uid;
	rq.gid = k->gid;
	rq.projid = k->projid;
	id = atomic_fetch_add(&la_lease_next_id, 1);
	len = la_pack_lease(body, sizeof(body), id, n, &rq);
	rc = len ? la_send_body(body, len) : -1;
	if (rc == -EAGAIN)
		return; /* not connected yet: the next pass tries again */
	if (rc != 0) {
		la_lease_refused(k, LA_NOLEASE_LUSTRE, "lease_send",
				 la_cfg.retry_ms);
		return;
	}
	k->req_id = id;
	k->req_sent_us = now;
	atomic_store(&k->refill, 0);
	atomic_fetch_add(&la_lease_stats[LA_LS_ASKED], 1);
}

static void la_lease_refused(struct la_class *k, int kind, const char *reason,
			     int for_ms)
{
	size_t n = strlen(reason);

	if (n >= sizeof(k->nolease_reason))
		n = sizeof(k->nolease_reason) - 1;
	memcpy(k->nolease_reason, reason, n);
	k->nolease_reason[n] = '\0';
	atomic_store(&k->nolease_kind, kind);
	atomic_store(&k->nolease_until_us, la_now_us() + for_ms * 1000.0);
	k->req_id = 0;
	atomic_store(&k->refill, 0);
	atomic_fetch_add(&k->fill_gen, 1);
	la_futex(&k->fill_gen, FUTEX_WAKE, INT32_MAX, NULL);
}

/* Install a granted lease into its class; layouts that do not fit are
 * never used (the release says so). */
static void la_install(struct la_class *k, const struct la_lease_reply *r,
		       double now)
{
	uint64_t t = atomic_load(&k->tail);
	uint64_t room = LA_RING - (t - k->reaped);
	double until = now + r->lease_ms * 1000.0 * LA_USE_FRACTION;
	int i, n = r->nlayouts < (int)room ? r->nlayouts : (int)room;

	for (i = 0; i < n; i++) {
		struct la_slot *s = &k->ring[(t + i) % LA_RING];

		s->count = r->counts[i];
		memcpy(s->osts, r->osts[i],
		       (size_t)r->counts[i] * sizeof(s->osts[0]));
		s->stripe_size = r->stripe_size;
		s->lease = r->lease;
		s->use_until_us = until;
		memcpy(s->policy, r->policy, sizeof(s->policy));
		atomic_store(&s->dead, 0);
		atomic_store(&s->state, LA_SLOT_READY);
	}
	atomic_thread_fence(memory_order_release);
	atomic_store(&k->tail, t + (uint64_t)n);
	k->track[k->ntrack].lease = r->lease;
	k->track[k->ntrack].start = t;
	k->track[k->ntrack].end = t + (uint64_t)n;
	k->track[k->ntrack].granted = r->nlayouts;
	k->track[k->ntrack].used = 0;
	k->ntrack++;
	k->last_granted = n;
	k->installed++;
	k->taken_at_install = atomic_load(&k->taken);
	if (n > 0) {
		k->newest_until_us = until;
		k->use_us = until - now;
	}
	atomic_store(&k->lowwater, n / 2 > 1 ? n / 2 : 1);
	atomic_store(&k->nolease_kind, LA_NOLEASE_NONE); /* the mapper places again */
	atomic_fetch_add(&la_lease_stats[LA_LS_GRANTED], (uint64_t)n);
}

static void la_revoke(const uint64_t *ids, int n)
{
	int c, hwm = atomic_load(&la_classes_hwm);

	for (c = 0; c < hwm; c++) {
		struct la_class *k = &la_classes[c];
		uint64_t p, t = atomic_load(&k->tail);

		for (p = atomic_load(&k->head); p < t; p++) {
			struct la_slot *s = &k->ring[p % LA_RING];

			for (int i = 0; i < n; i++)
				if (s->lease == ids[i])
					atomic_store(&s->dead, 1);
		}
	}
}

void la_lease_forget(uint64_t lease)
{
	la_revoke(&lease, 1);
}

/* Every layout of the grant at most as wide as its class's stripe count
 * (-1, every OST: any width): Lustre would apply a longer SPECIFIC list
 * as it is, so a file would get more stripes than it asked for. */
static int la_lease_fits(const struct la_class *k,
			 const struct la_lease_reply *r)
{
	int i;

	for (i = 0; k->stripe_count > 0 && i < r->nlayouts; i++)
		if (r->counts[i] > k->stripe_count)
			return 0;
	return 1;
}

static void la_on_lease_reply(const char *buf, size_t len, double now)
{
	static struct la_lease_reply r; /* helper only: large */
	int c, hwm = atomic_load(&la_classes_hwm), rc;
	struct la_class *k = NULL;

	rc = la_parse_lease_reply(buf, len, &r);
	if (rc == 1)
		return; /* a release's answer */
	if (r.version != 2) {
		/* a v1 mapper (EPROTO "protocol version 2"), or a reply no v2
		 * mapper sends: lease no more; every create asks per create
		 * (v1), whose own checks name what is wrong */
		atomic_store(&la_v2_off, 1);
		for (c = 0; c < hwm; c++)
			if (la_classes[c].req_id)
				la_lease_refused(&la_classes[c], LA_NOLEASE_V1,
						 "", 0);
		atomic_fetch_add(&la_lease_stats[LA_LS_REFUSED], 1);
		return;
	}
	for (c = 0; c < hwm; c++)
		if (la_classes[c].req_id && la_classes[c].req_id == r.id)
			k = &la_classes[c];
	if (r.nrevoke)
		la_revoke(r.revoke, r.nrevoke);
	if (rc < 0 && r.ok == 1 && r.lease)
		la_queue_release(r.lease, 0); /* a grant we cannot read */
	if (!k)
		return; /* late: its class gave up on it */
	if (rc < 0) {
		if (r.to_lustre) {
			la_lease_refused(k, LA_NOLEASE_TO_LUSTRE,
					 LA_TO_LUSTRE_REASON, r.retry_ms ?
					 r.retry_ms : la_cfg.retry_ms);
			atomic_fetch_add(&la_lease_stats[LA_LS_TO_LUSTRE], 1);
			return;
		}
		if (r.per_create) {
			la_lease_refused(k, LA_NOLEASE_V1, "", r.retry_ms ?
					 r.retry_ms : 2000);
		} else {
			char reason[48];

			la_reason(reason, sizeof(reason), "lease_refused",
				  r.err ? r.err : EPROTO);
			la_lease_refused(k, LA_NOLEASE_LUSTRE, reason,
					 r.retry_ms ? r.retry_ms
						    : la_cfg.retry_ms);
		}
		atomic_fetch_add(&la_lease_stats[LA_LS_REFUSED], 1);
		return;
	}
	if (!la_lease_fits(k, &r)) {
		/* wider than the class asked: per-create replies are refused
		 * for this (docs/client.md, mapper_garbage:osts_count); the
		 * grant goes back unused and the class asks per create */
		la_queue_release(r.lease, 0);
		la_lease_refused(k, LA_NOLEASE_LUSTRE,
				 "mapper_garbage:osts_count", la_cfg.retry_ms);
		atomic_fetch_add(&la_lease_stats[LA_LS_REFUSED], 1);
		return;
	}
	la_install(k, &r, now);
	if (now > k->req_sent_us)
		k->rtt_us = k->rtt_us > 0 ? 0.5 * (k->rtt_us + (now - k->req_sent_us))
					  : now - k->req_sent_us;
	k->req_id = 0;
	atomic_fetch_add(&k->fill_gen, 1);
	la_futex(&k->fill_gen, FUTEX_WAKE, INT32_MAX, NULL);
}

void *la_leases_socket(void)
{
	return la_lease_sock;
}

void la_leases_on_readable(void)
{
	double now = la_now_us();

	for (;;) {
		static char buf[LA_LEASE_REPLY_MAX]; /* helper only */
		int more = 0, n;
		size_t sz = sizeof(more);

		/* [b"", body] */
		n = zmq_recv(la_lease_sock, buf, sizeof(buf), ZMQ_DONTWAIT);
		if (n < 0)
			return;
		zmq_getsockopt(la_lease_sock, ZMQ_RCVMORE, &more, &sz);
		if (n != 0 || !more) {
			while (more && zmq_recv(la_lease_sock, buf, sizeof(buf),
						ZMQ_DONTWAIT) >= 0)
				zmq_getsockopt(la_lease_sock, ZMQ_RCVMORE,
					       &more, &sz);
			continue;
		}
		n = zmq_recv(la_lease_sock, buf, sizeof(buf), ZMQ_DONTWAIT);
		zmq_getsockopt(la_lease_sock, ZMQ_RCVMORE, &more, &sz);
		while (more && zmq_recv(la_lease_sock, buf, 0, ZMQ_DONTWAIT) >= 0)
			zmq_getsockopt(la_lease_sock, ZMQ_RCVMORE, &more, &sz);
		if (n > 0 && (size_t)n <= sizeof(buf))
			la_on_lease_reply(buf, (size_t)n, now);
	}
}

/* A freed class starts a new life: no pace, no refresh. */
static void la_forget_pace(struct la_class *k)
{
	atomic_store(&k->last_take_us, 0.0);
	atomic_store(&k->gap_us, 0.0);
	k->taken_at_install = 0;
	k->last_granted = k->installed = 0;
	k->newest_until_us = k->use_us = k->rtt_us = 0;
}

static void la_evict_if_idle(struct la_class *k, double now)
{
	int want = LA_CLS_ACTIVE;

	if (k->req_id || k->ntrack || atomic_load(&k->head) != atomic_load(&k->tail) ||
	    now - atomic_load(&k->last_used_us) < LA_IDLE_EVICT_US)
		return;
	if (!atomic_compare_exchange_strong(&k->state, &want, LA_CLS_EVICTING))
		return;
	if (atomic_load(&k->users)) { /* a create is looking: keep it */
		atomic_store(&k->state, LA_CLS_ACTIVE);
		return;
	}
	atomic_store(&k->head, 0);
	atomic_store(&k->tail, 0);
	k->reaped = 0;
	k->rate_per_s = k->rate_t_us = 0;
	k->rate_taken = 0;
	la_forget_pace(k);
	atomic_store(&k->taken, 0);
	atomic_store(&k->state, LA_CLS_FREE);
}

/* When (la_now_us) the helper should refresh k, or 0: not a class whose
 * next create is due (the file's comment, "Refresh"). */
static double la_refresh_at(struct la_class *k, double use_us)
{
	double last = atomic_load(&k->last_take_us);
	double gap = atomic_load(&k->gap_us);
	double lead = LA_REFRESH_RTTS * k->rtt_us;
	double at;

	if (atomic_load(&k->taken) < 2 || gap <= 0 || gap > LA_REFRESH_GAP_MAX_US ||
	    last <= 0 || use_us <= 0)
		return 0;
	if (lead < LA_REFRESH_LEAD_MIN_US)
		lead = LA_REFRESH_LEAD_MIN_US;
	if (lead > 0.5 * use_us)
		lead = 0.5 * use_us;
	/* the newest layout held, or one expired: refresh before it ends */
	at = k->newest_until_us - lead;
	/* not before a fresh layout would outlive the next create's time */
	if (at < last + gap - use_us)
		at = last + gap - use_us;
	if (at >= last + 2.0 * gap) /* the class stopped creating */
		return 0;
	return at > 0 ? at : 1;
}

int la_leases_run(void)
{
	int c, hwm = atomic_load(&la_classes_hwm), wait_ms = -1;
	double now = la_now_us();

	for (c = 0; c < hwm; c++) {
		struct la_class *k = &la_classes[c];

		if (atomic_load(&k->state) != LA_CLS_ACTIVE)
			continue;
		la_reap(k, now);
		if (k->req_id && now - k->req_sent_us > LA_REQ_TIMEOUT_US)
			la_lease_refused(k, LA_NOLEASE_LUSTRE, "lease_timeout",
					 la_cfg.retry_ms);
		if (!k->req_id && !atomic_load(&k->refill) &&
		    !atomic_load(&la_v2_off) &&
		    atomic_load(&k->nolease_until_us) <= now) {
			double at = la_refresh_at(k, k->use_us);

			if (at > 0 && at <= now) {
				atomic_store(&k->refill, 1);
				atomic_fetch_add(&la_lease_stats[LA_LS_REFRESHED], 1);
			} else if (at > 0) {
				int ms = (int)ceil((at - now) / 1000.0);

				if (wait_ms < 0 || ms < wait_ms)
					wait_ms = ms;
			}
		}
		if (!k->req_id && atomic_load(&k->refill) &&
		    !atomic_load(&la_v2_off) &&
		    atomic_load(&k->nolease_until_us) <= now)
			la_send_lease(k, now);
		if (k->req_id || atomic_load(&k->refill))
			wait_ms = 10; /* answers arrive on the socket; this is
				       * for sends not connected yet */
		else if (k->ntrack && (wait_ms < 0 || wait_ms > 100))
			wait_ms = 100; /* use-by times to enforce */
		la_evict_if_idle(k, now);
	}
	la_flush_releases();
	return wait_ms;
}

/* A refill still on its way at exit is granted and booked by the mapper:
 * wait for it a little, so that it is returned like the rest. */
static void la_wait_in_flight(void)
{
	double until = la_now_us() + LA_CLOSE_WAIT_US;
	int c, hwm = atomic_load(&la_classes_hwm);

	while (la_lease_sock && la_now_us() < until) {
		zmq_pollitem_t item = { la_lease_sock, -1, ZMQ_POLLIN, 0 };
		int pending = 0;

		for (c = 0; c < hwm; c++)
			pending |= atomic_load(&la_classes[c].req_id) != 0;
		if (!pending)
			return;
		if (zmq_poll(&item, 1, 10) > 0)
			la_leases_on_readable();
	}
}

void la_leases_close(void)
{
	int c, hwm = atomic_load(&la_classes_hwm);

	la_wait_in_flight();

	/* return everything held: no create takes a layout any more */
	for (c = 0; c < hwm; c++) {
		struct la_class *k = &la_classes[c];
		uint64_t t = atomic_load(&k->tail), h = atomic_load(&k->head);

		while (h < t && !atomic_compare_exchange_strong(&k->head, &h, t))
			;
		for (uint64_t p = h; p < t; p++)
			atomic_store(&k->ring[p % LA_RING].state, LA_SLOT_SKIPPED);
		la_reap(k, la_now_us());
		for (int i = 0; i < k->ntrack; i++) /* reaped partly: as is */
			la_queue_release(k->track[i].lease, k->track[i].used);
		k->ntrack = 0;
	}
	la_flush_releases();
	if (la_lease_sock)
		zmq_close(la_lease_sock);
	la_lease_sock = NULL;
}

void la_leases_atfork_child(void)
{
	int c, hwm = atomic_load(&la_classes_hwm);

	/* the parent's leases stay the parent's: the child starts empty */
	la_lease_sock = NULL;
	la_nrelease = 0;
	la_nfiles = 0;
	for (c = 0; c < hwm; c++) {
		struct la_class *k = &la_classes[c];

		atomic_store(&k->head, 0);
		atomic_store(&k->tail, 0);
		atomic_store(&k->users, 0);
		atomic_store(&k->refill, 0);
		k->reaped = 0;
		k->ntrack = 0;
		k->req_id = 0;
		k->rate_per_s = k->rate_t_us = 0;
		k->rate_taken = 0;
		la_forget_pace(k);
		atomic_store(&k->taken, 0);
		atomic_store(&k->state, LA_CLS_FREE);
	}
}

uint64_t la_lease_stat(int which)
{
	return which >= 0 && which < LA_LS_N ?
		       atomic_load(&la_lease_stats[which]) : 0;
}

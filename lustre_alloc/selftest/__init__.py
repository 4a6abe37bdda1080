"""``lustre-alloc-selftest``: what an admin runs on a real Lustre before the pilot.

On a client, in a directory of the admin's choosing, it creates files under the shim with
lists a stand-in mapper hands out (:mod:`lustre_alloc.selftest.responder`): an explicit list
Lustre accepts, one it must refuse, a leased one, and files under plain, PFL and
self-extending (SEL) directory defaults and with no mapper at all; it reads every layout
back with ``LL_IOC_LOV_GETSTRIPE`` and checks each against Lustre's rules
(docs/reference/lustre-semantics.md) (:mod:`lustre_alloc.selftest.layouts`). On an OSS or MDS
it reads this server's statistics through the collectors' own code and, with
``--steer OST``, sets and restores ``degraded`` or ``max_create_count`` through the steering
agent's (:mod:`lustre_alloc.selftest.servers`). It prints one pass/fail row per check
(:mod:`lustre_alloc.selftest.rows`), touches only the directory it makes, and removes only what
it created.
"""

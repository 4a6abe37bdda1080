"""The simulator's rebalancing events, each running :mod:`lustre_alloc.rebalance`'s own code
on the simulated file table: a reviewed plan applied as real read+write traffic
(:mod:`.plan_event`), and the migration service evacuating steered OSTs within its budget
(:mod:`.service_event`)."""

"""Why a file went where it did: what the cost model says OST lists cost
(:mod:`lustre_alloc.mapper.explain.pricing`) and the last decision per jobid and path
(:mod:`lustre_alloc.mapper.explain.last_decisions`), for the decision log, ``lustre-alloc-ctl explain`` and the
shadow report."""

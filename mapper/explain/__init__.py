"""Why a file went where it did: what the cost model says OST lists cost
(:mod:`mapper.explain.pricing`) and the last decision per jobid and path
(:mod:`mapper.explain.decisions`), for the decision log, ``lustre-alloc-ctl explain`` and the
shadow report."""

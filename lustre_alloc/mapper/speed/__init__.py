"""What the mapper believes of each OST's and OSS's speed, from the collectors' samples
alone: the estimator (:mod:`lustre_alloc.mapper.speed.rates`) and its memory across restarts
(:mod:`lustre_alloc.mapper.speed.rate_memory`). Read by placement (the round view and the rate cost),
by steering (the slow-OST controller) and by explain (prices)."""

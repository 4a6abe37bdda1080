"""``python -m lustre_alloc.mapper.rebalance``: the ``lustre-alloc-rebalance`` command."""
import sys

from lustre_alloc.mapper.rebalance.cli import main

sys.exit(main())

"""``python -m mapper.rebalance``: the ``lustre-alloc-rebalance`` command."""
import sys

from mapper.rebalance.cli import main

sys.exit(main())

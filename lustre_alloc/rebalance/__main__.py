"""``python -m lustre_alloc.rebalance``: the ``lustre-alloc-rebalance`` command (``plan`` and ``run``)."""
import sys

from lustre_alloc.rebalance.cli import main

sys.exit(main())

"""``python -m mapper.migrate``: the ``lustre-alloc-rebalance`` command (``plan`` and ``run``)."""
import sys

from mapper.migrate.cli import main

sys.exit(main())

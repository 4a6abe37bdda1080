"""``python -m lustre_alloc.mapper.migrate``: the ``lustre-alloc-rebalance`` command (``plan`` and ``run``)."""
import sys

from lustre_alloc.mapper.migrate.cli import main

sys.exit(main())

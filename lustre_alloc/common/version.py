"""The version of lustre-alloc: one source, read by setup.cfg (``attr:``) and by every
``--version`` flag, so a checkout and an installed wheel report the same string."""

__version__ = "0.1.0"

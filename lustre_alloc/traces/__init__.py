"""Trace format, generators and importers (Darshan, ``lfs df``) for lustre-alloc."""

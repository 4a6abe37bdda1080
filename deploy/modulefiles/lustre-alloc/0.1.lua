-- Lmod module for the lustre-alloc client library (docs/client.md). Copy it into a
-- directory of your site's MODULEPATH and set the mapper's address.
help([[lustre-alloc: place new Lustre files on the OSTs chosen by the global mapper]])
local root = "/opt/lustre-alloc"
append_path("LD_PRELOAD", pathJoin(root, "lib/liblustre_alloc.so"), " ")
setenv("LUSTRE_ALLOC_MAPPER", "tcp://mds01:5558")
setenv("LUSTRE_ALLOC_TIMEOUT_MS", "50")
prepend_path("CPATH", pathJoin(root, "include"))
prepend_path("LIBRARY_PATH", pathJoin(root, "lib"))
prepend_path("LD_LIBRARY_PATH", pathJoin(root, "lib"))

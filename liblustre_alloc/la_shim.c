/*
 * la_shim.c - the LD_PRELOAD wrappers (liblustre_alloc.so only).
 *
 * Shaped like Darshan's POSIX wrappers: each wrapper reads mode only when
 * the flags need it, makes sure the real symbols were looked up (once, with
 * dlsym(RTLD_NEXT)), and hands creations to la_maybe_create(); everything
 * else goes straight to libc.  la_in_shim is the recursion guard: while a
 * thread is inside the shim (libzmq, dlopen and the record file open files
 * too), its opens go straight through.
 *
 * __open_2, __open64_2 and __openat_2 are the _FORTIFY_SOURCE entry points
 * used when no mode is passed; glibc aborts them if the flags need a mode,
 * so they never create a file and are passed through unchanged.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "la_internal.h"

#define LA_NEEDS_MODE(flags) \
	(((flags) & O_CREAT) || (((flags) & O_TMPFILE) == O_TMPFILE))

#define LA_READ_MODE(flags, mode) \
	do { \
		if (LA_NEEDS_MODE(flags)) { \
			va_list ap; \
			va_start(ap, flags); \
			mode = (mode_t)va_arg(ap, int); \
			va_end(ap); \
		} \
	} while (0)

#define LA_ENTER() do { if (!la_in_shim) la_init(); } while (0)

/* Called before la_init finished (a constructor running earlier than
 * ours, or dlsym itself): the kernel directly. */
static int la_sys_openat(int dirfd, const char *path, int flags, mode_t mode)
{
	return (int)syscall(SYS_openat, dirfd, path, flags, mode);
}

static int la_try(int dirfd, const char *path, int flags, mode_t mode,
		  const char *op, int *fd)
{
	int handled;

	if (!(flags & O_CREAT) || la_in_shim)
		return 0;
	la_in_shim++;
	handled = la_maybe_create(dirfd, path, flags, mode, op, fd, NULL, 0);
	la_in_shim--;
	return handled;
}

LA_EXPORT int open(const char *path, int flags, ...)
{
	mode_t mode = 0;
	int fd;

	LA_READ_MODE(flags, mode);
	LA_ENTER();
	if (la_try(AT_FDCWD, path, flags, mode, "open", &fd))
		return fd;
	if (!la_real.open)
		return la_sys_openat(AT_FDCWD, path, flags, mode);
	return la_real.open(path, flags, mode);
}

LA_EXPORT int open64(const char *path, int flags, ...)
{
	mode_t mode = 0;
	int fd;

	LA_READ_MODE(flags, mode);
	LA_ENTER();
	if (la_try(AT_FDCWD, path, flags | O_LARGEFILE, mode, "open64", &fd))
		return fd;
	if (!la_real.open64)
		return la_sys_openat(AT_FDCWD, path, flags | O_LARGEFILE, mode);
	return la_real.open64(path, flags, mode);
}

LA_EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
	mode_t mode = 0;
	int fd;

	LA_READ_MODE(flags, mode);
	LA_ENTER();
	if (la_try(dirfd, path, flags, mode, "openat", &fd))
		return fd;
	if (!la_real.openat)
		return la_sys_openat(dirfd, path, flags, mode);
	return la_real.openat(dirfd, path, flags, mode);
}

LA_EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
	mode_t mode = 0;
	int fd;

	LA_READ_MODE(flags, mode);
	LA_ENTER();
	if (la_try(dirfd, path, flags | O_LARGEFILE, mode, "openat64", &fd))
		return fd;
	if (!la_real.openat64)
		return la_sys_openat(dirfd, path, flags | O_LARGEFILE, mode);
	return la_real.openat64(dirfd, path, flags, mode);
}

LA_EXPORT int creat(const char *path, mode_t mode)
{
	int flags = O_CREAT | O_WRONLY | O_TRUNC;
	int fd;

	LA_ENTER();
	if (la_try(AT_FDCWD, path, flags, mode, "creat", &fd))
		return fd;
	if (!la_real.creat)
		return la_sys_openat(AT_FDCWD, path, flags, mode);
	return la_real.creat(path, mode);
}

LA_EXPORT int creat64(const char *path, mode_t mode)
{
	int flags = O_CREAT | O_WRONLY | O_TRUNC | O_LARGEFILE;
	int fd;

	LA_ENTER();
	if (la_try(AT_FDCWD, path, flags, mode, "creat64", &fd))
		return fd;
	if (!la_real.creat64)
		return la_sys_openat(AT_FDCWD, path, flags, mode);
	return la_real.creat64(path, mode);
}

LA_EXPORT int __open_2(const char *path, int flags)
{
	LA_ENTER();
	if (!la_real.open_2)
		return la_sys_openat(AT_FDCWD, path, flags, 0);
	return la_real.open_2(path, flags);
}

LA_EXPORT int __open64_2(const char *path, int flags)
{
	LA_ENTER();
	if (!la_real.open64_2)
		return la_sys_openat(AT_FDCWD, path, flags | O_LARGEFILE, 0);
	return la_real.open64_2(path, flags);
}

LA_EXPORT int __openat_2(int dirfd, const char *path, int flags)
{
	LA_ENTER();
	if (!la_real.openat_2)
		return la_sys_openat(dirfd, path, flags, 0);
	return la_real.openat_2(dirfd, path, flags);
}

/* fopen(3) mode string -> open(2) flags, as glibc's fopen does; 0 when the
 * mode does not create or is left to glibc (",ccs=" conversions). */
static int la_fopen_flags(const char *mode, int *flags)
{
	int acc, f;
	const char *p;

	if (!mode)
		return 0;
	switch (mode[0]) {
	case 'w': acc = O_WRONLY; f = O_CREAT | O_TRUNC; break;
	case 'a': acc = O_WRONLY; f = O_CREAT | O_APPEND; break;
	default: return 0;
	}
	for (p = mode + 1; *p; p++) {
		switch (*p) {
		case '+': acc = O_RDWR; break;
		case 'x': f |= O_EXCL; break;
		case 'e': f |= O_CLOEXEC; break;
		case ',': return 0;
		default: break; /* b, t, m, c: no open(2) flag */
		}
	}
	*flags = acc | f;
	return 1;
}

/* 1 when the shim handled the call (*out: the stream, or NULL + errno),
 * 0 when fopen should go straight to glibc. */
static int la_fopen_common(const char *path, const char *mode, int large,
			   const char *op, FILE **out)
{
	int flags, fd;

	if (la_in_shim || !la_fopen_flags(mode, &flags))
		return 0;
	if (large)
		flags |= O_LARGEFILE;
	/* glibc creates fopen()ed files with mode 0666 (before umask) */
	if (!la_try(AT_FDCWD, path, flags, 0666, op, &fd))
		return 0;
	*out = NULL;
	if (fd >= 0) {
		la_in_shim++;
		/* fdopen ignores 'x' and 'e'; the descriptor has them */
		*out = fdopen(fd, mode);
		if (!*out) {
			int e = errno;

			close(fd);
			errno = e;
		}
		la_in_shim--;
	}
	return 1;
}

LA_EXPORT FILE *fopen(const char *path, const char *mode)
{
	FILE *f;

	LA_ENTER();
	if (la_fopen_common(path, mode, 0, "fopen", &f))
		return f;
	return la_real.fopen(path, mode);
}

/* A file the shim created reports its size at close (la_sizes.c). */
LA_EXPORT int close(int fd)
{
	LA_ENTER();
	la_sizes_closing(fd);
	if (!la_real.close)
		return (int)syscall(SYS_close, fd);
	return la_real.close(fd);
}

LA_EXPORT int fclose(FILE *f)
{
	int rc;

	LA_ENTER();
	if (!la_real.fclose) /* before la_init resolved it: a stream is never leaked */
		*(void **)(&la_real.fclose) = dlsym(RTLD_NEXT, "fclose");
	la_sizes_closing_stream(f, la_real.fclose, &rc);
	return rc;
}

LA_EXPORT FILE *fopen64(const char *path, const char *mode)
{
	FILE *f;

	LA_ENTER();
	if (la_fopen_common(path, mode, 1, "fopen64", &f))
		return f;
	return la_real.fopen64(path, mode);
}

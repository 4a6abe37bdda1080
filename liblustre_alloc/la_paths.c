/*
 * la_paths.c - which creations the shim touches.
 *
 * A path is eligible when its directory is on Lustre (statfs f_type ==
 * LL_SUPER_MAGIC, cached per directory) or, when LUSTRE_ALLOC_PATHS is set,
 * when it lies under one of those prefixes (and then only there).  Paths are
 * made absolute and normalised lexically ("." and ".." removed, symbolic
 * links not followed) for the prefix test and the record.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "la_internal.h"

#define LA_DIRCACHE_SLOTS 64

struct la_dirslot {
	char *dir;
	struct la_dirinfo info;
};

static pthread_mutex_t la_dir_mu = PTHREAD_MUTEX_INITIALIZER;
static struct la_dirslot la_dircache[LA_DIRCACHE_SLOTS];

/* Append the components of rel to out (holding an absolute path of length
 * *len), resolving "." and ".." lexically. */
static int la_join(char *out, size_t outsz, size_t *len, const char *rel)
{
	const char *p = rel;

	while (*p) {
		const char *e;
		size_t n;

		while (*p == '/')
			p++;
		if (!*p)
			break;
		e = strchr(p, '/');
		n = e ? (size_t)(e - p) : strlen(p);
		if (n == 1 && p[0] == '.') {
			/* nothing */
		} else if (n == 2 && p[0] == '.' && p[1] == '.') {
			while (*len > 1 && out[*len - 1] != '/')
				(*len)--;
			if (*len > 1)
				(*len)--; /* drop the slash too, keep "/" */
			out[*len] = '\0';
		} else {
			size_t need = *len + (*len > 1 ? 1 : 0) + n + 1;

			if (need > outsz)
				return -1;
			if (*len > 1)
				out[(*len)++] = '/';
			memcpy(out + *len, p, n);
			*len += n;
			out[*len] = '\0';
		}
		p += n;
	}
	return 0;
}

int la_abspath(int dirfd, const char *path, char *out, size_t outsz)
{
	size_t len;

	if (!path || !*path || outsz < 2)
		return -1;
	if (path[0] == '/') {
		strcpy(out, "/");
	} else if (dirfd == AT_FDCWD) {
		if (!getcwd(out, outsz))
			return -1;
	} else {
		char link[64];
		ssize_t n;

		snprintf(link, sizeof(link), "/proc/self/fd/%d", dirfd);
		n = readlink(link, out, outsz - 1);
		if (n <= 0 || out[0] != '/')
			return -1;
		out[n] = '\0';
	}
	len = strlen(out);
	/* getcwd/readlink give a canonical path; normalise it anyway. */
	if (out[0] != '/')
		return -1;
	return la_join(out, outsz, &len, path);
}

int la_under_paths(const char *abs)
{
	int i;

	for (i = 0; i < la_cfg.npaths; i++) {
		size_t n = la_cfg.pathlen[i];

		if (n == 0)
			return 1;
		if (strncmp(abs, la_cfg.paths[i], n) == 0 &&
		    (abs[n] == '/' || abs[n] == '\0'))
			return 1;
	}
	return 0;
}

static unsigned la_hash(const char *s, size_t n)
{
	unsigned h = 2166136261u; /* FNV-1a */
	size_t i;

	for (i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 16777619u;
	return h;
}

int la_dirinfo(const char *abs, struct la_dirinfo *di)
{
	const char *slash = strrchr(abs, '/');
	size_t dlen = slash ? (size_t)(slash - abs) : 0;
	char dir[LA_PATH_MAX];
	struct la_dirslot *slot;
	struct statfs sf;
	char *copy;

	if (dlen == 0)
		dlen = 1; /* "/file": the directory is "/" */
	if (dlen >= sizeof(dir))
		return -1;
	memcpy(dir, abs, dlen);
	dir[dlen] = '\0';
	slot = &la_dircache[la_hash(dir, dlen) % LA_DIRCACHE_SLOTS];

	pthread_mutex_lock(&la_dir_mu);
	if (slot->dir && strcmp(slot->dir, dir) == 0) {
		*di = slot->info;
		pthread_mutex_unlock(&la_dir_mu);
		return 0;
	}
	pthread_mutex_unlock(&la_dir_mu);

	if (statfs(dir, &sf) != 0)
		return -1; /* not cached: the directory may appear later */
	memset(di, 0, sizeof(*di));
	di->is_lustre = ((unsigned long)sf.f_type == LA_LL_SUPER_MAGIC);
	if (di->is_lustre &&
	    la_backend_lustre.dir_default(dir, &di->stripe_count,
					  &di->stripe_size) != 0) {
		di->stripe_count = 0;
		di->stripe_size = 0;
	}

	copy = strdup(dir);
	if (!copy)
		return 0;
	pthread_mutex_lock(&la_dir_mu);
	free(slot->dir);
	slot->dir = copy;
	slot->info = *di;
	pthread_mutex_unlock(&la_dir_mu);
	return 0;
}

void la_paths_atfork_prepare(void)
{
	pthread_mutex_lock(&la_dir_mu);
}

void la_paths_atfork_release(void)
{
	pthread_mutex_unlock(&la_dir_mu);
}

void la_paths_free(void)
{
	int i;

	pthread_mutex_lock(&la_dir_mu);
	for (i = 0; i < LA_DIRCACHE_SLOTS; i++) {
		free(la_dircache[i].dir);
		la_dircache[i].dir = NULL;
	}
	pthread_mutex_unlock(&la_dir_mu);
}

/*
 * la_curve.c - CURVE keys for the connection to the mapper.
 *
 * The key files are the ZeroMQ certificate files ("ZPL" text) that
 * `lustre-alloc-broker --keygen NAME` and common/curve.py write with pyzmq:
 * NAME.key holds `public-key = "<40 Z85 characters>"`, NAME.key_secret
 * holds that and `secret-key = "..."`.
 *
 *   LUSTRE_ALLOC_CURVE_SERVER_KEY  the mapper's public key file (pinned)
 *   LUSTRE_ALLOC_CURVE_SECRET_KEY  this client's .key_secret file
 *
 * Both or neither.  When they are set but unusable (missing, unreadable,
 * no key in them, only one of the two), the shim says so once on stderr
 * and never asks the mapper (record reason "curve_keys"): talking in clear
 * to whoever answers is what CURVE is configured to prevent.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "la_internal.h"

#define LA_Z85_CHARS "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"

/* The Z85 value of `name = "..."` in the text, into key; 0 or -1. */
static int la_zpl_key(const char *text, const char *name, char *key)
{
	const char *p = text;
	size_t n = strlen(name);

	while ((p = strstr(p, name)) != NULL) {
		const char *q = p + n;

		p = q;
		while (*q == ' ' || *q == '\t')
			q++;
		if (*q++ != '=')
			continue;
		while (*q == ' ' || *q == '\t')
			q++;
		if (*q++ != '"')
			continue;
		if (strspn(q, LA_Z85_CHARS) != LA_Z85_KEY - 1 ||
		    q[LA_Z85_KEY - 1] != '"')
			return -1;
		memcpy(key, q, LA_Z85_KEY - 1);
		key[LA_Z85_KEY - 1] = '\0';
		return 0;
	}
	return -1;
}

static int la_read_text(const char *path, char *buf, size_t cap)
{
	int fd = la_real.openat(AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	size_t len = 0;
	ssize_t n;

	if (fd < 0)
		return -1;
	while (len + 1 < cap && (n = read(fd, buf + len, cap - 1 - len)) > 0)
		len += (size_t)n;
	close(fd);
	buf[len] = '\0';
	return 0;
}

static void la_curve_refuse(const char *file, const char *why)
{
	fprintf(stderr, "liblustre_alloc: CURVE key file %s: %s; the mapper "
			"is not asked\n", file, why);
	strcpy(la_cfg.curve_error, "curve_keys");
	la_cfg.curve_server[0] = '\0';
}

void la_curve_load(void)
{
	const char *server = getenv("LUSTRE_ALLOC_CURVE_SERVER_KEY");
	const char *secret = getenv("LUSTRE_ALLOC_CURVE_SECRET_KEY");
	char text[4096];

	if ((!server || !*server) && (!secret || !*secret))
		return;
	if (!server || !*server || !secret || !*secret) {
		la_curve_refuse(server && *server ? server : secret,
				"LUSTRE_ALLOC_CURVE_SERVER_KEY and "
				"LUSTRE_ALLOC_CURVE_SECRET_KEY go together");
		return;
	}
	if (la_read_text(server, text, sizeof(text)) != 0) {
		la_curve_refuse(server, "cannot be read");
		return;
	}
	if (la_zpl_key(text, "public-key", la_cfg.curve_server) != 0) {
		la_curve_refuse(server, "no public-key in it");
		return;
	}
	if (la_read_text(secret, text, sizeof(text)) != 0) {
		la_curve_refuse(secret, "cannot be read");
		return;
	}
	if (la_zpl_key(text, "public-key", la_cfg.curve_public) != 0 ||
	    la_zpl_key(text, "secret-key", la_cfg.curve_secret) != 0) {
		memset(la_cfg.curve_secret, 0, sizeof(la_cfg.curve_secret));
		la_curve_refuse(secret, "no public-key/secret-key pair in it "
					"(use the .key_secret file)");
	}
	explicit_bzero(text, sizeof(text));
}

/* SPDX-License-Identifier: MIT */
/*
 * "@env:NAME" and "@file:/path" secret references (secret.h): resolving
 * them, and masking their values in text sluice shows.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "secret.h"

bool sl_secret_is_ref(const char *v)
{
	return v && (!strncmp(v, "@env:", 5) || !strncmp(v, "@file:", 6));
}

int sl_secret_resolve(const char *ref, char **out, char *err, size_t errlen)
{
	if (!strncmp(ref, "@env:", 5)) {
		const char *v = getenv(ref + 5);
		char *s = v ? strdup(v) : NULL;
		if (!v)
			snprintf(err, errlen, "%s is not set in sluice's environment", ref);
		if (v && !s)
			snprintf(err, errlen, "%s: %s", ref, strerror(ENOMEM));
		if (!s)
			return v ? ENOMEM : ENOENT;
		*out = s;
		return 0;
	}
	FILE *f = fopen(ref + 6, "re");
	char *buf = f ? malloc(SL_SECRET_FILE_MAX + 1) : NULL;
	size_t n = buf ? fread(buf, 1, SL_SECRET_FILE_MAX + 1, f) : 0;
	int rc = !f ? errno : !buf ? ENOMEM : ferror(f) ? EIO : n > SL_SECRET_FILE_MAX ? EFBIG : 0;
	if (f)
		fclose(f);
	if (rc) {
		snprintf(err, errlen, "cannot read %s: %s", ref, strerror(rc));
		free(buf);
		return rc;
	}
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--; /* as a password file's last line ends */
	buf[n] = 0;
	*out = buf;
	return 0;
}

void sl_secret_free(char *v)
{
	if (!v)
		return;
	explicit_bzero(v, strlen(v));
	free(v);
}

void sl_secret_mask(const char *text, const char *const *secrets, size_t n, char *out,
		    size_t cap)
{
	size_t o = 0;

	if (!cap)
		return;
	for (const char *p = text; *p && o + 1 < cap;) {
		size_t hit = 0;
		for (size_t k = 0; k < n && !hit; k++) {
			size_t m = strlen(secrets[k]);
			if (m && !strncmp(p, secrets[k], m))
				hit = m;
		}
		if (hit) {
			for (const char *s = "***"; *s && o + 1 < cap; s++)
				out[o++] = *s;
			p += hit;
		} else {
			out[o++] = *p++;
		}
	}
	out[o] = 0;
}

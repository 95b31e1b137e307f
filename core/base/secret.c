/* SPDX-License-Identifier: MIT */
/*
 * Secret references and masking (secret.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "secret.h"

bool sl_secret_is_ref(const char *s) { return !strncmp(s, "@env:", 5) || !strncmp(s, "@file:", 6); }

int sl_secret_read(const char *ref, char **out, char *why, size_t whylen)
{
	if (!strncmp(ref, "@env:", 5)) {
		const char *v = getenv(ref + 5);
		if (!v) {
			snprintf(why, whylen, "%s is not set in sluice's environment", ref);
			return ENOENT;
		}
		if (!(*out = strdup(v)))
			return ENOMEM;
		return 0;
	}
	if (strncmp(ref, "@file:", 6)) {
		snprintf(why, whylen, "'%s' is not a secret reference", ref);
		return EINVAL;
	}
	FILE *f = fopen(ref + 6, "re");
	char *buf = f ? malloc(SL_SECRET_FILE_MAX + 1) : NULL;
	size_t n = buf ? fread(buf, 1, SL_SECRET_FILE_MAX + 1, f) : 0;
	int err = !f ? errno : !buf ? ENOMEM : ferror(f) ? EIO : n > SL_SECRET_FILE_MAX ? EFBIG : 0;
	if (f)
		fclose(f);
	if (err) {
		snprintf(why, whylen, "cannot read %s: %s", ref, strerror(err));
		if (buf)
			explicit_bzero(buf, n < SL_SECRET_FILE_MAX ? n : SL_SECRET_FILE_MAX);
		free(buf);
		return err;
	}
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	buf[n] = 0;
	*out = buf;
	return 0;
}

void sl_secret_free(char *s)
{
	if (!s)
		return;
	explicit_bzero(s, strlen(s));
	free(s);
}

void sl_secret_mask(char *buf, size_t len, char *const *secrets, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		size_t sl = secrets[i] ? strlen(secrets[i]) : 0;
		char *at = buf;
		if (!sl)
			continue;
		while ((at = strstr(at, secrets[i]))) {
			size_t rest = strlen(at + sl);
			if ((size_t)(at - buf) + 4 > len)
				break;
			if ((size_t)(at - buf) + 3 + rest + 1 > len)
				rest = len - (size_t)(at - buf) - 4;
			memmove(at + 3, at + sl, rest);
			memcpy(at, "***", 3);
			at[3 + rest] = 0;
			at += 3;
		}
	}
}

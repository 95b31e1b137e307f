/* SPDX-License-Identifier: MIT */
/*
 * Secrets in sluice.json (CONNECTORS "Commands and secrets"): a value
 * "@env:NAME" or "@file:/path" stands for the variable's value or the
 * file's text (its last line ending dropped). The process source's options
 * and the kafka sink's kafka.* options resolve them when they start; what
 * they print shows *** in place of a resolved value.
 */
#ifndef SLUICE_CORE_SECRET_H
#define SLUICE_CORE_SECRET_H

#include <stdbool.h>
#include <stddef.h>

#define SL_SECRET_FILE_MAX (64u << 10) /* longest @file: secret, in bytes */

/* Whether v is a secret reference ("@env:..." or "@file:..."). */
bool sl_secret_is_ref(const char *v);

/*
 * The value reference ref names, in *out (new; wipe and free with
 * sl_secret_free()). 0, or ENOENT (an unset variable), an errno of the
 * file, EFBIG (over SL_SECRET_FILE_MAX) or ENOMEM, with err (errlen bytes)
 * saying why in words that start with the reference itself.
 */
int sl_secret_resolve(const char *ref, char **out, char *err, size_t errlen);

/* Wipes and frees a resolved value. NULL ok. */
void sl_secret_free(char *v);

/*
 * Copies text to out (cap bytes, NUL-ended, cut short if need be) with each
 * occurrence of the n non-empty secrets replaced by "***".
 */
void sl_secret_mask(const char *text, const char *const *secrets, size_t n, char *out,
		    size_t cap);

#endif

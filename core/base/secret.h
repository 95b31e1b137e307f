/* SPDX-License-Identifier: MIT */
/*
 * Secrets in options (CONNECTORS "Commands and secrets"): a value written
 * "@env:NAME" or "@file:/path" stands for what it names, and the values
 * read are masked as *** wherever sluice prints text that may hold them.
 * Shared by the process source (its options) and the kafka source
 * (kafka.* passwords). Thread-safe.
 */
#ifndef SLUICE_CORE_SECRET_H
#define SLUICE_CORE_SECRET_H

#include <stdbool.h>
#include <stddef.h>

#define SL_SECRET_FILE_MAX (64u << 10) /* the largest secret file */

/* True when s is a reference: starts with "@env:" or "@file:". */
bool sl_secret_is_ref(const char *s);

/*
 * The value ref names: the environment variable, or the file's bytes
 * without its trailing line breaks (as a password file's last line ends).
 * 0 with *out new (free it with sl_secret_free()); ENOENT for an unset
 * variable, an errno for a file that cannot be read (EFBIG past
 * SL_SECRET_FILE_MAX), ENOMEM; why (whylen bytes) then says it, naming ref.
 */
int sl_secret_read(const char *ref, char **out, char *why, size_t whylen);

/* Zeroes and frees a value from sl_secret_read(). Accepts NULL. */
void sl_secret_free(char *s);

/*
 * Replaces, in the NUL-terminated text buf (len bytes), every occurrence
 * of each of the n secrets (non-empty ones) with "***".
 */
void sl_secret_mask(char *buf, size_t len, char *const *secrets, size_t n);

#endif

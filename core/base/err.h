/* SPDX-License-Identifier: MIT */
/*
 * Error codes. A fallible function returns 0, a positive errno for a system
 * failure, or one of the negative SL_E* codes below for a sluice condition.
 */
#ifndef SLUICE_CORE_ERR_H
#define SLUICE_CORE_ERR_H

enum sl_err {
	SL_NOTFOUND = -30001,  /* key or name absent: an ordinary result */
	SL_ECORRUPT = -30002,  /* catalog or blob content fails a bounds check */
	SL_ENOTSLUICE = -30003, /* folder holds files sluice did not make */
	SL_ELOCKED = -30004,   /* another process holds the data dir lock */
	SL_ECONFIG = -30005,   /* sluice.json is invalid (details were logged) */
	SL_EVERSION = -30006,  /* catalog written by an incompatible version */
	SL_EMAPFULL = -30007,  /* LMDB map full: grow and retry (internal) */
	SL_EMALFORMED = -30008, /* a source record or value cannot be decoded */
	SL_ECOMMAND = -30009,  /* a command a sink or source ran failed (retried) */
	SL_EDATALOSS = -30010, /* records a batch needs left the source (kafka failOnDataLoss) */
};

/* Describes rc (either kind). The string is static. */
const char *sl_strerror(int rc);

/* The symbolic name of a positive errno ("EPERM"), or NULL if unknown. */
const char *sl_errno_name(int err);

#endif

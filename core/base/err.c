/* SPDX-License-Identifier: MIT */
/* Error descriptions for sl_strerror() and errno names for counters. */
#include <errno.h>
#include <string.h>

#include "err.h"

const char *sl_strerror(int rc)
{
	switch (rc) {
	case 0: return "success";
	case SL_NOTFOUND: return "not found";
	case SL_ECORRUPT: return "catalog is corrupt";
	case SL_ENOTSLUICE: return "not a sluice data dir";
	case SL_ELOCKED: return "data dir is in use by another sluice process";
	case SL_ECONFIG: return "invalid configuration";
	case SL_EVERSION: return "catalog version is not supported";
	case SL_EMAPFULL: return "catalog map is full";
	case SL_EMALFORMED: return "malformed record";
	case SL_ECOMMAND: return "the command failed";
	case SL_EDATALOSS: return "data lost at the source";
	}
	if (rc > 0)
		return strerror(rc);
	return "unknown error";
}

const char *sl_errno_name(int err)
{
	switch (err) {
	case EPERM: return "EPERM";
	case ENOENT: return "ENOENT";
	case EIO: return "EIO";
	case EBUSY: return "EBUSY";
	case EEXIST: return "EEXIST";
	case EXDEV: return "EXDEV";
	case ENOTDIR: return "ENOTDIR";
	case EISDIR: return "EISDIR";
	case EINVAL: return "EINVAL";
	case ENOSPC: return "ENOSPC";
	case EROFS: return "EROFS";
	case ENOTEMPTY: return "ENOTEMPTY";
	case EDQUOT: return "EDQUOT";
	case ENAMETOOLONG: return "ENAMETOOLONG";
	case EFBIG: return "EFBIG";
	case ENOMEM: return "ENOMEM";
	case EACCES: return "EACCES";
	}
	return NULL;
}

/* SPDX-License-Identifier: MIT */
/* librdkafka loaded at its first use (rdk.h). */
#define SL_RDK_SELF
#include "rdk.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "err.h"

#define SONAME "librdkafka.so.1"

struct sl_rdk sl_rdk;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char why[400]; /* empty: loaded */

static void load(void)
{
	/* RTLD_NODELETE: the table stays valid for the life of the process */
	void *h = dlopen(SONAME, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	if (!h) {
		const char *e = dlerror();
		snprintf(why, sizeof(why), "cannot load librdkafka (%s): %s", SONAME,
			 e ? e : "unknown error");
		return;
	}
	struct sl_rdk t;
#define SL_RDK_SYM(f)                                                                   \
	if (!(*(void **)&t.f = dlsym(h, #f))) {                                          \
		snprintf(why, sizeof(why), "cannot load librdkafka (%s): it has no %s", SONAME, \
			 #f);                                                            \
		return;                                                                  \
	}
	SL_RDK_FUNCS(SL_RDK_SYM)
#undef SL_RDK_SYM
	sl_rdk = t;
}

int sl_rdk_load(char *err, size_t errlen)
{
	pthread_once(&once, load);
	if (!why[0])
		return 0;
	snprintf(err, errlen, "%s", why);
	return SL_ECONFIG;
}

/* SPDX-License-Identifier: MIT */
/* The process source's canonical JSON: what offsets/N logs and what tells "no new data". */
#include <errno.h>
#include <string.h>

#include "check.h"
#include "err.h"
#include "source.h"
#include "source_process.h"

static const char *canon(const char *in)
{
	static char out[SL_SOURCE_OFFSET_MAX];
	int rc = sl_process_canonical(in, strlen(in), out, sizeof(out));
	return rc ? "(error)" : out;
}

static void test_canonical(void)
{
	/* keys sorted at every depth, no spaces, array order kept */
	CHECK(!strcmp(canon("{ \"seq\" : 5 , \"a\": {\"z\": [3, 1], \"b\": null}}"),
		      "{\"a\":{\"b\":null,\"z\":[3,1]},\"seq\":5}"));
	/* the same offset in two spellings compares equal */
	CHECK(!strcmp(canon("{\"v\":\"a b\",\"seq\":1}"), canon("{\"seq\": 1, \"v\": \"a b\"}")));
	/* integers exactly, never through a double */
	CHECK(!strcmp(canon("{\"seq\":9007199254740993}"), "{\"seq\":9007199254740993}"));
	CHECK(!strcmp(canon("-9223372036854775808"), "-9223372036854775808"));
	/* scalars are offsets too; strings keep their bytes, escapes normalised */
	CHECK(!strcmp(canon("42"), "42"));
	CHECK(!strcmp(canon("\"\\u00e9\\n\""), "\"\xc3\xa9\\n\""));
	CHECK(!strcmp(canon("true"), "true"));
}

static void test_refusals(void)
{
	char small[8];
	CHECK(sl_process_canonical("{\"seq\":", 7, small, sizeof(small)) == SL_EMALFORMED);
	CHECK(sl_process_canonical("1 2", 3, small, sizeof(small)) == SL_EMALFORMED);
	CHECK(sl_process_canonical("{\"seq\":12345}", 13, small, sizeof(small)) == ENAMETOOLONG);
	CHECK(sl_process_canonical("[1]", 3, small, sizeof(small)) == 0 && !strcmp(small, "[1]"));
}

int main(void)
{
	test(test_canonical);
	test(test_refusals);
	return test_exit();
}

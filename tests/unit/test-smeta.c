/* SPDX-License-Identifier: MIT */
/* out/<q>/_spark_metadata: the URI encoder and the serializer against Spark's vectors. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "smeta.h"
#include "strbuf.h"

static int encoded_is(const char *path, const char *want)
{
	struct sl_strbuf b = {0};
	sl_smeta_uri_encode(&b, path);
	sl_strbuf_addc(&b, 0);
	int ok = !b.oom && !strcmp(b.p, want);
	if (!ok)
		fprintf(stderr, "encode '%s': got '%s', want '%s'\n", path, b.p ? b.p : "", want);
	sl_strbuf_release(&b);
	return ok;
}

static void test_uri_encode(void)
{
	/* SPARK-NOTES §2.6, the 2.4.0 fixture: a folder named "output %@#output" */
	CHECK(encoded_is("TEMPDIR/output %@#output/part-00000-97f675a2-bb82-4201-8245-"
			 "05f3dae4c372-c000.snappy.parquet",
			 "TEMPDIR/output%20%25@%23output/part-00000-97f675a2-bb82-4201-8245-"
			 "05f3dae4c372-c000.snappy.parquet"));
	/* a Hive-escaped partition folder: its '%' is encoded again */
	CHECK(encoded_is("/mnt/out/q/ts=2026-10-04 12%3A00%3A00/part-00003-00001.parquet",
			 "/mnt/out/q/ts=2026-10-04%2012%253A00%253A00/part-00003-00001.parquet"));
	/* unreserved, punct, '/' and '@' stay */
	CHECK(encoded_is("AZaz09_-!.~'()*,;:$&+=/@", "AZaz09_-!.~'()*,;:$&+=/@"));
	/* everything else is %XX, upper-case hex */
	CHECK(encoded_is("\"#%<>?[\\]^`{|} \x01\x7f", "%22%23%25%3C%3E%3F%5B%5C%5D%5E%60%7B%7C%7D%20"
						       "%01%7F"));
	/* non-ASCII stays as UTF-8 bytes */
	CHECK(encoded_is("/k=\xc3\xa9t\xc3\xa9/x", "/k=\xc3\xa9t\xc3\xa9/x"));
	CHECK(encoded_is("", ""));
}

static int serialized_is(const struct sl_smeta_status *v, size_t n, const char *want)
{
	struct sl_strbuf b = {0};
	sl_smeta_serialize(&b, v, n);
	int ok = !b.oom && b.len == strlen(want) && !memcmp(b.p, want, b.len);
	if (!ok)
		fprintf(stderr, "serialize: got '%.*s', want '%s'\n", (int)b.len, b.p ? b.p : "",
			want);
	sl_strbuf_release(&b);
	return ok;
}

static void test_serialize(void)
{
	/* FileStreamSinkLogSuite "serialize" */
	struct sl_smeta_status v[] = {
		{.path = "/a/b/x", .size = 100, .mtime_ms = 1000, .replication = 1,
		 .block_size = 10000},
		{.path = "/a/b/z", .size = 300, .mtime_ms = 3000, .replication = 3,
		 .block_size = 30000},
	};
	CHECK(serialized_is(v, 2,
			    "v1\n"
			    "{\"path\":\"/a/b/x\",\"size\":100,\"isDir\":false,\"modificationTime\":1000,"
			    "\"blockReplication\":1,\"blockSize\":10000,\"action\":\"add\"}\n"
			    "{\"path\":\"/a/b/z\",\"size\":300,\"isDir\":false,\"modificationTime\":3000,"
			    "\"blockReplication\":3,\"blockSize\":30000,\"action\":\"add\"}"));
	/* an empty batch is exactly v1 */
	CHECK(serialized_is(NULL, 0, "v1"));

	/* the 2.4.0 fixture's entry */
	struct sl_smeta_status f = {
		.path = "file://TEMPDIR/output%20%25@%23output/part-00000-97f675a2-bb82-4201-"
			"8245-05f3dae4c372-c000.snappy.parquet",
		.size = 404, .mtime_ms = 1549649385000, .replication = 1, .block_size = 33554432};
	CHECK(serialized_is(&f, 1,
			    "v1\n{\"path\":\"file://TEMPDIR/output%20%25@%23output/part-00000-"
			    "97f675a2-bb82-4201-8245-05f3dae4c372-c000.snappy.parquet\",\"size\":404,"
			    "\"isDir\":false,\"modificationTime\":1549649385000,"
			    "\"blockReplication\":1,\"blockSize\":33554432,\"action\":\"add\"}"));

	/* a root given as is: JSON-escaped all the same */
	struct sl_smeta_status q = {.path = "x\"\\\n\x01", .replication = 1, .block_size = 1};
	CHECK(serialized_is(&q, 1,
			    "v1\n{\"path\":\"x\\\"\\\\\\n\\u0001\",\"size\":0,\"isDir\":false,"
			    "\"modificationTime\":0,\"blockReplication\":1,\"blockSize\":1,"
			    "\"action\":\"add\"}"));
}

int main(void)
{
	test(test_uri_encode);
	test(test_serialize);
	return test_exit();
}

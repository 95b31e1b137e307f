/* SPDX-License-Identifier: MIT */
/*
 * Query configuration: the typed form of DATA_DIR/sluice.json, and the pure
 * parsers behind it (durations, sizes, Spark DDL schemas, query names, path
 * patterns and their overlap, option value coercion). No jansson here:
 * config/load.c walks the JSON tree (jansson) and builds a config with these
 * helpers. A struct sl_config is new from sl_config_load()/parse() and freed
 * with sl_config_free(); every pointer into it is borrowed until then.
 *
 * Exception to the opaque-type rule (STYLE §2): the structs below are public
 * because the engine (planning, decoding, operators, sink, triggers) reads
 * them directly. A loaded config is immutable and may be read from any thread.
 */
#ifndef SLUICE_CORE_CONFIG_H
#define SLUICE_CORE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SL_CONFIG_NAME_MAX 64	    /* longest query name, in bytes */
#define SL_CONFIG_PATH_MAX 4096	    /* longest source path, in bytes */
#define SL_CONFIG_COMPONENT_MAX 255 /* longest path component, in bytes */

/* Column types. SL_TYPE_WINDOW (struct {start, end} of TIMESTAMPs) only appears in output rows. */
enum sl_type {
	SL_TYPE_STRING,
	SL_TYPE_BIGINT, /* also spelt LONG; int64 */
	SL_TYPE_INT,	/* int32 */
	SL_TYPE_DOUBLE,
	SL_TYPE_BOOLEAN,
	SL_TYPE_TIMESTAMP, /* microseconds since the epoch, UTC */
	SL_TYPE_DATE,	   /* days since the epoch */
	SL_TYPE_WINDOW,
};

struct sl_kafka_config;

struct sl_column {
	char *name;	   /* unquoted, non-empty; unique in its schema ignoring ASCII case */
	enum sl_type type; /* never SL_TYPE_WINDOW in a source schema */
	bool not_null;	   /* declared NOT NULL (nulls are kept and counted, not refused) */
};

struct sl_schema {
	struct sl_column *cols; /* in declaration order */
	size_t n;		/* number of columns; >= 1 once parsed */
};

/* A source path relative to in/, split into components. */
struct sl_path {
	char *text;   /* the components joined with '/' */
	char **comps; /* each non-empty, not '.'-prefixed, at most SL_CONFIG_COMPONENT_MAX bytes */
	size_t n;     /* number of components, >= 1 */
};

enum sl_source_format {
	SL_SOURCE_JSON,
	SL_SOURCE_CSV,
	SL_SOURCE_TEXT,
	SL_SOURCE_RATE,		   /* rate: rowsPerSecond since the query was created */
	SL_SOURCE_RATE_MICRO_BATCH, /* rate-micro-batch: rowsPerBatch per batch */
	SL_SOURCE_QUERY,	    /* query: another query's committed output */
	SL_SOURCE_PROCESS,	    /* process: a command speaking CONNECTORS §5's protocol */
	SL_SOURCE_SOCKET,	    /* socket: lines read from a TCP connection, spooled */
	SL_SOURCE_KAFKA,	    /* kafka: records of Kafka topics (kafka_conf.h) */
};

/* Whether a source format reads landed files (json, csv, text). */
#define SL_SOURCE_IS_FILE(f) ((f) <= SL_SOURCE_TEXT)
enum sl_parse_mode { SL_MODE_PERMISSIVE, SL_MODE_DROPMALFORMED, SL_MODE_FAILFAST };
enum sl_clean_source { SL_CLEAN_OFF, SL_CLEAN_ARCHIVE, SL_CLEAN_DELETE };
enum sl_file_age_by { SL_AGE_LANDED, SL_AGE_MTIME };

struct sl_source_config {
	enum sl_source_format format; /* format */
	struct sl_path path;	      /* path, matched with fnmatch(3) per component */
	struct sl_schema schema;      /* schema; `value STRING` for text */
	int64_t max_files;	      /* maxFilesPerTrigger, 1..INT32_MAX; 0 when unset */
	int64_t max_bytes;	 /* maxBytesPerTrigger in bytes, > 0; 0 when unset (never both) */
	bool latest_first;	 /* latestFirst */
	int64_t max_file_age_us; /* maxFileAge in microseconds, >= 0; default 7 days */
	int64_t file_history_us; /* fileHistory: settled files' records kept, >= 0; 30 days */
	enum sl_file_age_by file_age_by; /* fileAgeBy; default landed */
	bool file_name_only;		 /* fileNameOnly: seen set keyed by the last component */
	enum sl_parse_mode mode;	 /* mode; default PERMISSIVE */
	enum sl_clean_source clean;	 /* cleanSource; default off */
	bool header;			 /* csv: header line present; default false */
	char sep;			 /* csv: field separator, one ASCII byte; default ',' */
	/* rate and rate-micro-batch (SPARK-NOTES §5): schema `timestamp TIMESTAMP,
	 * value BIGINT`, path empty (no landed file matches) */
	int64_t rows_per_second;  /* rate: rowsPerSecond, > 0; default 1 */
	int64_t ramp_up_s;	  /* rate: rampUpTime in whole seconds, >= 0 */
	int64_t num_partitions;	  /* numPartitions, > 0; 0 when unset (1 partition) */
	int64_t rows_per_batch;	  /* rate-micro-batch: rowsPerBatch, > 0 (required) */
	int64_t start_ts_ms;	  /* rate-micro-batch: startTimestamp, >= 0 */
	int64_t advance_ms;	  /* rate-micro-batch: advanceMillisPerBatch, >= 0; default 1000 */
	int64_t poll_interval_us; /* pollInterval: how often a mount asks for new rows; 100 ms */
	/* query (CONNECTORS §6): schema = the upstream's output columns, path empty */
	char *upstream; /* query: the upstream query's name */
	/* process (CONNECTORS §5): path empty, schema required */
	char **argv;		/* command, NULL-terminated, each non-empty; NULL otherwise */
	size_t argc;		/* its words, >= 1 for process */
	char *options_json;	/* options: the object as compact JSON text; NULL otherwise */
	int64_t max_rows;	/* maxRowsPerTrigger, 1..INT64_MAX; 0 when unset */
	int64_t timeout_us;	/* timeout of each request, > 0; default 60 s */
	/* socket (CONNECTORS §4): schema `value STRING[, timestamp TIMESTAMP]`, path empty */
	char *host;		  /* socket: host, non-empty (required) */
	int64_t port;		  /* socket: port, 1..65535 (required) */
	bool include_timestamp;	  /* socket: includeTimestamp; default false */
	uint64_t max_spool_bytes; /* socket: maxSpoolBytes, > 0; default 1 GiB */
	struct sl_kafka_config *kafka; /* kafka (CONNECTORS §7): its options; NULL otherwise */
};

enum sl_agg_fn {
	SL_AGG_COUNT_STAR, /* count(*): rows */
	SL_AGG_COUNT,	   /* count(col): non-null values */
	SL_AGG_SUM,	   /* sum(col): numeric col; null when no non-null value */
	SL_AGG_MIN,
	SL_AGG_MAX,
	SL_AGG_AVG, /* avg(col): numeric col, DOUBLE */
};

struct sl_aggregate {
	char *name;	   /* output column name (the key in "aggregate") */
	enum sl_agg_fn fn; /* function */
	size_t col;	   /* argument's index into source.schema.cols; unused for count(*) */
	enum sl_type type; /* result type: BIGINT for count, sum of integers; DOUBLE for avg */
};

enum sl_output_mode { SL_OUTPUT_APPEND, SL_OUTPUT_UPDATE, SL_OUTPUT_COMPLETE };
enum sl_sink_format {
	SL_SINK_JSON,
	SL_SINK_CSV,
	SL_SINK_PARQUET,
	SL_SINK_CONSOLE,
	SL_SINK_EXEC,
	SL_SINK_KAFKA, /* kafka: records to a topic (CONNECTORS §7) */
};
enum sl_compression { SL_COMPRESSION_NONE, SL_COMPRESSION_ZSTD };

/* No trigger means event-driven: run while there is backlog, else wait for a landing. */
enum sl_trigger_kind {
	SL_TRIGGER_NONE,
	SL_TRIGGER_PROCESSING_TIME,
	SL_TRIGGER_AVAILABLE_NOW,
	SL_TRIGGER_ONCE, /* deprecated; the engine warns when it runs one */
};

struct sl_query_config {
	char *name; /* matches [A-Za-z0-9_-]{1,64} */
	struct sl_source_config source;

	/* Column references below are indexes into source.schema.cols. */
	bool has_watermark;  /* a watermark is defined */
	size_t wm_col;	     /* watermark.column: a TIMESTAMP column */
	int64_t wm_delay_us; /* watermark.delay in microseconds, >= 0 */

	size_t *dedup;	      /* dropDuplicates or dropDuplicatesWithinWatermark keys, distinct */
	size_t ndedup;	      /* number of keys; 0 when no deduplication */
	bool dedup_within_wm; /* the keys are dropDuplicatesWithinWatermark's */

	bool has_groupby;	   /* groupBy present (then naggs > 0) */
	bool has_window;	   /* groupBy.window present */
	size_t win_col;		   /* groupBy.window.column: a TIMESTAMP column */
	int64_t win_duration_us;   /* groupBy.window.duration, > 0 */
	int64_t win_slide_us;	   /* groupBy.window.slide: 0 < slide <= duration, its default */
	size_t *group;		   /* groupBy.columns, in order, distinct */
	size_t ngroup;		   /* number of group columns */
	struct sl_aggregate *aggs; /* aggregate, in file order */
	size_t naggs;		   /* number of aggregates; 0 means no aggregation */

	enum sl_output_mode output_mode; /* outputMode; default append */

	struct sl_schema out; /* output row columns: the source schema, or window, groups, aggs */
	enum sl_sink_format sink_format; /* sink.format; default json */
	int64_t console_rows;		 /* console: numRows, >= 0; default 20 */
	bool console_truncate;		 /* console: truncate; default true */
	char **exec_argv;		 /* exec: command, NULL-terminated, each non-empty */
	size_t exec_argc;		 /* exec: its words, >= 1 */
	bool exec_csv;			 /* exec: input csv (with a header) rather than json */
	int64_t exec_timeout_us;	 /* exec: timeout, > 0; default 5 minutes */
	/* kafka (CONNECTORS §7; sinks/sink_kafka.h) */
	char **kafka_conf;	  /* kafka.* options: name (without "kafka."), value, ... */
	size_t nkafka_conf;	  /* pairs in kafka_conf */
	char *kafka_topic;	  /* topic, trimmed, non-empty; NULL: each row's topic column */
	long kafka_key_col;	  /* keyColumn as an index into out.cols; -1 when unset */
	bool kafka_transactional; /* transactional: one Kafka transaction per batch */
	enum sl_compression compression; /* sink.compression; default none (zstd for parquet) */
	uint64_t row_group_bytes;	 /* sink.rowGroupSize (parquet); 0: the default, 64 MiB */
	size_t *partition_by;		 /* sink.partitionBy as indexes into out.cols, in order */
	size_t npartition_by;		 /* number of partition columns, < out.n */
	/*
	 * sink.retention (file sinks, append or update): the parts of a batch
	 * leave out/ once either limit expires them. 0: that limit unset.
	 */
	int64_t retention_batches; /* retention.batches: keep the last N batches, >= 1 */
	int64_t retention_age_us;  /* retention.age: keep parts committed this recently, > 0 */
	char **downstreams;	   /* queries whose query source reads this one (their names,
				      borrowed from the config); hold parts they have not read */
	size_t ndownstreams;

	enum sl_trigger_kind trigger; /* trigger kind */
	int64_t trigger_interval_us;  /* processingTime in microseconds, >= 0; 0 otherwise */
};

struct sl_config {
	struct sl_query_config *queries; /* in file order */
	size_t n;			 /* number of queries */
	size_t *order;			 /* indexes into queries, every upstream before its
					    downstreams (file order otherwise) */
};

/* Frees a config and everything in it. Accepts NULL. */
void sl_config_free(struct sl_config *c);

/* Number of queries, and query i (borrowed until sl_config_free), or NULL past the end. */
size_t sl_config_nqueries(const struct sl_config *c);
const struct sl_query_config *sl_config_query(const struct sl_config *c, size_t i);
/*
 * Query i in dependency order: a `query` source's upstream comes before it,
 * otherwise file order (`sluice run --available-now` runs them so). NULL
 * past the end.
 */
const struct sl_query_config *sl_config_query_ordered(const struct sl_config *c, size_t i);
/* The name of query i (borrowed until sl_config_free), or NULL past the end. */
const char *sl_config_query_name(const struct sl_config *c, size_t i);
/* The query called name (borrowed until sl_config_free), or NULL. */
const struct sl_query_config *sl_config_find(const struct sl_config *c, const char *name);

/* True when the query aggregates (an aggregate, with or without groupBy). */
bool sl_config_has_aggregation(const struct sl_query_config *q);
/* True when the query keeps state across batches (deduplication or aggregation). */
bool sl_config_is_stateful(const struct sl_query_config *q);
/*
 * Which source columns q reads after decoding (projection pushdown): used
 * gets source.schema.n flags, 1 for a column that the operators or the
 * output need. A query without aggregation outputs whole rows, so every
 * column is used; an aggregating one uses the watermark, dedup, window,
 * group and aggregate argument columns. NOT NULL columns always count as
 * used (their nulls are counted per batch).
 */
void sl_config_used_columns(const struct sl_query_config *q, uint8_t *used);
/* Source column i of q (borrowed until sl_config_free). i must be < schema.n. */
const struct sl_column *sl_config_column(const struct sl_query_config *q, size_t i);
/* Index of the column called name in s (exact match), or -1. */
long sl_config_schema_find(const struct sl_schema *s, const char *name);
/* A source format's name in sluice.json ("json", "rate", "query"); static. */
const char *sl_config_source_name(enum sl_source_format f);
/* A sink format's name in sluice.json ("json", "parquet", "exec"); static. */
const char *sl_config_sink_name(enum sl_sink_format f);
/* "STRING", "BIGINT", ..., "STRUCT<start: TIMESTAMP, end: TIMESTAMP>"; static. */
const char *sl_config_type_name(enum sl_type t);

/*
 * Writes the printf-style message to err (errlen bytes; err may be NULL)
 * and returns SL_ECONFIG: the config layer's one way to refuse.
 */
__attribute__((format(printf, 3, 4))) int sl_config_fail(char *err, size_t errlen,
							 const char *fmt, ...);

/*
 * Parsers. Each returns 0, SL_ECONFIG when the text is invalid (err then
 * holds one line without a field path, e.g. "unknown unit 'x'"; err may be
 * NULL), or ENOMEM. Outputs are untouched on failure. Thread-safe.
 */

/*
 * A duration: `<int>[ ]<unit>`, units us, ms, s/sec/second(s), m/min/minute(s),
 * h/hour(s), d/day(s), week(s) (also millisecond(s), microsecond(s)), in any
 * case; a bare integer is milliseconds. *us gets microseconds, refusing
 * overflow of int64.
 */
int sl_config_duration_parse(const char *s, int64_t *us, char *err, size_t errlen);

/* A size: `<int>[k|m|g|t][b]` in binary units, any case; a bare integer is bytes. */
int sl_config_size_parse(const char *s, uint64_t *bytes, char *err, size_t errlen);

/*
 * A Spark DDL schema: `name TYPE [NOT NULL]` separated by commas; names may
 * be backquoted (`` `my col` ``, a doubled backquote for one), types are
 * STRING, BIGINT/LONG, INT/INTEGER, DOUBLE, BOOLEAN, TIMESTAMP, DATE in any
 * case. Duplicate names (ignoring case) are refused; `_corrupt_record` must
 * be a nullable STRING. On success *out is new: release it with
 * sl_config_schema_release().
 */
int sl_config_schema_parse(const char *ddl, struct sl_schema *out, char *err, size_t errlen);
void sl_config_schema_release(struct sl_schema *s);

/* True when name matches [A-Za-z0-9_-]{1,64}. */
bool sl_config_name_valid(const char *name);

/*
 * A source path relative to in/: components split on '/', none empty (so no
 * leading, trailing or doubled '/'), none starting with '.' (no '.', '..'
 * or hidden folder: such paths never hold landed files), no '**'. On
 * success *out is new: release it with sl_config_path_release().
 */
int sl_config_path_parse(const char *s, struct sl_path *out, char *err, size_t errlen);
void sl_config_path_release(struct sl_path *p);

/*
 * True when some file could be matched by both paths: over the shorter
 * length, each component pair can match a common name (a component holding
 * `*`, `?` or `[` matches anything; literals must be equal). A prefix
 * overlaps because key=value subfolders of any depth are read under a path.
 */
bool sl_config_path_overlap(const struct sl_path *a, const struct sl_path *b);

/*
 * Option values, as core/json.c hands them over: JSON scalars or the
 * strings a Spark user writes ("true", "500").
 */
enum sl_config_vkind {
	SL_CONFIG_V_STRING,    /* str is the string */
	SL_CONFIG_V_INT,       /* i is the integer; str its text */
	SL_CONFIG_V_BOOL,      /* b is the value; str "true" or "false" */
	SL_CONFIG_V_OTHER,     /* null or a real: str is its JSON text */
	SL_CONFIG_V_COMPOSITE, /* an object or an array: str is "an object" or "an array" */
};

struct sl_config_value {
	enum sl_config_vkind kind; /* which JSON type the value had */
	const char *str;	   /* as above; borrowed, never NULL */
	int64_t i;		   /* for SL_CONFIG_V_INT */
	bool b;			   /* for SL_CONFIG_V_BOOL */
};

/*
 * Coercions: same return contract as the parsers; err reads e.g.
 * "expected a positive integer, got '0'".
 */
int sl_config_value_bool(const struct sl_config_value *v, bool *out, char *err, size_t errlen);
/* An integer in 1..max. */
int sl_config_value_posint(const struct sl_config_value *v, int64_t max, int64_t *out, char *err,
			   size_t errlen);
/* A duration; a JSON integer or digit string is milliseconds. */
int sl_config_value_duration(const struct sl_config_value *v, int64_t *us, char *err,
			     size_t errlen);
/* A positive size; a JSON integer or digit string is bytes. */
int sl_config_value_size(const struct sl_config_value *v, uint64_t *bytes, char *err,
			 size_t errlen);
/*
 * A string equal, ignoring ASCII case, to one of the NULL-terminated names;
 * *out gets its index.
 */
int sl_config_value_enum(const struct sl_config_value *v, const char *const *names, int *out,
			 char *err, size_t errlen);
/* A plain string (no coercion); *out is borrowed from v. */
int sl_config_value_string(const struct sl_config_value *v, const char **out, char *err,
			   size_t errlen);

/*
 * Parses an aggregate expression ("count(*)", "sum(amount)", any case,
 * backquoted column allowed) against schema into *out (name not set).
 */
int sl_config_aggregate_parse(const char *expr, const struct sl_schema *schema,
			      struct sl_aggregate *out, char *err, size_t errlen);

/*
 * Resolves a column reference: *idx gets the index of the column of s called
 * name. want is the type it must have, or -1 for any.
 */
int sl_config_column_ref(const struct sl_schema *s, const char *name, int want, size_t *idx,
			 char *err, size_t errlen);

/*
 * Builders for core/json.c, called in this order for each query:
 * - sl_config_add_query() appends a query named name (copied) with the
 *   defaults set, and returns it in *out (borrowed until sl_config_free);
 *   json.c fills source, watermark, deduplication, groupBy, aggregate and
 *   outputMode;
 * - sl_config_query_outputs() checks those together (deduplication needs,
 *   output modes) and fills q->out;
 * - json.c fills sink and trigger, resolving partitionBy through
 *   sl_config_partition_add();
 * - sl_config_query_finish() checks the sink against the output rows.
 * Finally sl_config_finish() checks what spans queries (cleanSource
 * overlap). The query-level checks write one line starting with the field
 * path; sl_config_partition_add() writes one without it.
 */
int sl_config_new(struct sl_config **out);
int sl_config_add_query(struct sl_config *c, const char *name, struct sl_query_config **out);
int sl_config_query_outputs(struct sl_query_config *q, char *err, size_t errlen);
int sl_config_partition_add(struct sl_query_config *q, const char *name, char *err, size_t errlen);
int sl_config_query_finish(struct sl_query_config *q, char *err, size_t errlen);
int sl_config_finish(const struct sl_config *c, char *err, size_t errlen);

/* ---- loading sluice.json (load.c) ---- */

/*
 * Loads and validates DATA_DIR/sluice.json; a missing file is an empty
 * config. Returns 0 with *out new (free it with sl_config_free), SL_ECONFIG
 * with one line in err starting with the field path (e.g.
 * "queries.dev.source.schema: unknown type 'NOTATYPE'"; a syntax error reads
 * "PATH:LINE:COLUMN: message"), or ENOMEM. Nothing is logged. Thread-safe.
 */
int sl_config_load(const char *datadir, struct sl_config **out, char *err, size_t errlen);

/*
 * The same from the text of a sluice.json in memory (len bytes, no NUL
 * needed); origin names the document in syntax errors. For fuzzers, and for
 * re-reading the config a checkpoint was written with.
 */
int sl_config_parse(const char *text, size_t len, const char *origin, struct sl_config **out,
		    char *err, size_t errlen);

#endif

// SPDX-License-Identifier: MIT
// duckdb-b3.cjs: B3's DuckDB side (contrib/bench/run). The same job as B3's
// sluice query, as one whole process: read the JSON Lines events with the
// 4-column schema (other keys ignored), keep one row per event_id (re-sends
// are byte-identical, so whichever row DuckDB keeps is the first), count and
// sum amount_cents per 10-minute window start and user_id, and write the
// groups as JSON Lines shaped like sluice's output.
//
// usage: node duckdb-b3.cjs NODE_MODULES INPUT OUTPUT THREADS [FORMAT [COLUMNS]]
//   NODE_MODULES  the folder holding @duckdb/node-api
//   INPUT         events (.json, or .json.zst: decompressed by DuckDB)
//   OUTPUT        the groups, one JSON object a line
//   FORMAT        json (default), or parquet: the groups as one Parquet file
//                 (zstd), the window a struct of two timestamps as sluice's
//                 parquet sink writes it (B10); or sum: B17's decode-only
//                 job, count(*) and sum(amount_cents) over all rows, one
//                 JSON line {"n":N,"total":N}
//   COLUMNS       read_json's columns struct (default: the four B3 reads);
//                 B16 and B17 name gen2.c's 25 fields, as sluice's schema does
'use strict';
const path = require('path');

const DEFAULT_COLUMNS = `{event_id: 'VARCHAR', user_id: 'VARCHAR',
	amount_cents: 'BIGINT', event_time: 'TIMESTAMP'}`;

async function main() {
	const [mods, input, output, threads, format = 'json', columns = DEFAULT_COLUMNS] =
		process.argv.slice(2);
	if (!threads) {
		console.error('usage: node duckdb-b3.cjs NODE_MODULES INPUT OUTPUT THREADS');
		process.exit(2);
	}
	const { DuckDBInstance } = require(path.join(mods, '@duckdb', 'node-api'));
	const db = await DuckDBInstance.create(':memory:', { threads: String(threads) });
	const conn = await db.connect();
	const q = (s) => "'" + s.replace(/'/g, "''") + "'";
	const compression = input.endsWith('.zst') ? 'zstd' : 'uncompressed';
	const pq = format === 'parquet';
	const src = `read_json(${q(input)}, format = 'newline_delimited',
		compression = '${compression}', columns = ${columns})`;
	if (format === 'sum') {
		await conn.run(`COPY (SELECT count(*) AS n, sum(amount_cents) AS total FROM ${src})
			TO ${q(output)} (FORMAT json)`);
		conn.closeSync();
		return;
	}
	const win = pq
		? `{'start': time_bucket(INTERVAL '10 minutes', event_time)::TIMESTAMPTZ,
		    'end': (time_bucket(INTERVAL '10 minutes', event_time) + INTERVAL '10 minutes')::TIMESTAMPTZ}`
		: `{'start': strftime(time_bucket(INTERVAL '10 minutes', event_time), '%Y-%m-%dT%H:%M:%S.000Z')}`;
	await conn.run(`
		COPY (
			SELECT ${win} AS window,
			       user_id,
			       count(*) AS n,
			       sum(amount_cents) AS total
			FROM (
				SELECT DISTINCT ON (event_id) event_id, user_id, amount_cents, event_time
				FROM ${src}
			)
			GROUP BY ALL
		) TO ${q(output)} (${pq ? 'FORMAT parquet, COMPRESSION zstd' : 'FORMAT json'})`);
	conn.closeSync();
}

main().catch((e) => {
	console.error('duckdb-b3: ' + (e && e.message ? e.message : e));
	process.exit(1);
});

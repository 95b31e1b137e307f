// SPDX-License-Identifier: MIT
// duckdb-b3.cjs: B3's DuckDB side (contrib/bench/run). The same job as B3's
// sluice query, as one whole process: read the JSON Lines events with the
// 4-column schema (other keys ignored), keep one row per event_id (re-sends
// are byte-identical, so whichever row DuckDB keeps is the first), count and
// sum amount_cents per 10-minute window start and user_id, and write the
// groups as JSON Lines shaped like sluice's output.
//
// usage: node duckdb-b3.cjs NODE_MODULES INPUT OUTPUT THREADS
//   NODE_MODULES  the folder holding @duckdb/node-api
//   INPUT         events (.json, or .json.zst: decompressed by DuckDB)
//   OUTPUT        the groups, one JSON object a line
'use strict';
const path = require('path');

async function main() {
	const [mods, input, output, threads] = process.argv.slice(2);
	if (!threads) {
		console.error('usage: node duckdb-b3.cjs NODE_MODULES INPUT OUTPUT THREADS');
		process.exit(2);
	}
	const { DuckDBInstance } = require(path.join(mods, '@duckdb', 'node-api'));
	const db = await DuckDBInstance.create(':memory:', { threads: String(threads) });
	const conn = await db.connect();
	const q = (s) => "'" + s.replace(/'/g, "''") + "'";
	const compression = input.endsWith('.zst') ? 'zstd' : 'uncompressed';
	await conn.run(`
		COPY (
			SELECT {'start': strftime(time_bucket(INTERVAL '10 minutes', event_time), '%Y-%m-%dT%H:%M:%S.000Z')} AS window,
			       user_id,
			       count(*) AS n,
			       sum(amount_cents) AS total
			FROM (
				SELECT DISTINCT ON (event_id) event_id, user_id, amount_cents, event_time
				FROM read_json(${q(input)}, format = 'newline_delimited',
					compression = '${compression}',
					columns = {event_id: 'VARCHAR', user_id: 'VARCHAR',
						   amount_cents: 'BIGINT', event_time: 'TIMESTAMP'})
			)
			GROUP BY ALL
		) TO ${q(output)} (FORMAT json)`);
	conn.closeSync();
}

main().catch((e) => {
	console.error('duckdb-b3: ' + (e && e.message ? e.message : e));
	process.exit(1);
});

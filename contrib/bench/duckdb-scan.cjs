// SPDX-License-Identifier: MIT
// duckdb-scan.cjs: B10's reader side. DuckDB scans a query's committed
// output through the mount, as Parquet or as JSON Lines, and aggregates
// every row (count, distinct users, sum of amounts), printing one line.
//
// usage: node duckdb-scan.cjs NODE_MODULES GLOB parquet|json THREADS
'use strict';
const path = require('path');

async function main() {
	const [mods, glob, format, threads] = process.argv.slice(2);
	if (!threads || (format !== 'parquet' && format !== 'json')) {
		console.error('usage: node duckdb-scan.cjs NODE_MODULES GLOB parquet|json THREADS');
		process.exit(2);
	}
	const { DuckDBInstance } = require(path.join(mods, '@duckdb', 'node-api'));
	const db = await DuckDBInstance.create(':memory:', { threads: String(threads) });
	const conn = await db.connect();
	const q = (s) => "'" + s.replace(/'/g, "''") + "'";
	const from = format === 'parquet'
		? `read_parquet(${q(glob)})`
		: `read_json(${q(glob)}, format = 'newline_delimited',
			columns = {event_id: 'VARCHAR', user_id: 'VARCHAR',
				   amount_cents: 'BIGINT', event_time: 'TIMESTAMP'})`;
	const r = await conn.runAndReadAll(`SELECT count(*) AS n, count(DISTINCT user_id) AS users,
		sum(amount_cents) AS total FROM ${from}`);
	console.log(JSON.stringify(r.getRowObjectsJson()[0]));
	conn.closeSync();
}

main().catch((e) => {
	console.error('duckdb-scan: ' + (e && e.message ? e.message : e));
	process.exit(1);
});

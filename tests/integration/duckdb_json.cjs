// SPDX-License-Identifier: MIT
// duckdb_json.cjs: runs SQL statements in an in-memory DuckDB and prints
// each result as one JSON array of row objects (getRowObjectsJson: BIGINT
// as strings, NaN and infinities as strings, timestamps as text).
//
// usage: node duckdb_json.cjs NODE_MODULES SQL...
'use strict';
const path = require('path');

async function main() {
	const [mods, ...sql] = process.argv.slice(2);
	if (!mods) {
		console.error('usage: node duckdb_json.cjs NODE_MODULES SQL...');
		process.exit(2);
	}
	const { DuckDBInstance } = require(path.join(mods, '@duckdb', 'node-api'));
	const db = await DuckDBInstance.create(':memory:');
	const conn = await db.connect();
	for (const s of sql) {
		const r = await conn.runAndReadAll(s);
		process.stdout.write(JSON.stringify(r.getRowObjectsJson()) + '\n');
	}
}

main().catch((e) => {
	console.error(String(e && e.stack ? e.stack : e));
	process.exit(1);
});

// SPDX-License-Identifier: MIT
// parquet_read_duckdb.cjs: reads a Parquet file with DuckDB (@duckdb/node-api)
// for test_parquet_readers.py and prints one JSON object: the rows (values
// made exact: BIGINTs and timestamps as strings of integer microseconds,
// dates as integer days, NaN/±Infinity as strings, structs as objects) and
// what parquet_schema(), parquet_metadata() and parquet_file_metadata() say.
//
// usage: node parquet_read_duckdb.cjs NODE_MODULES FILE [QUERIES]
//   QUERIES  a JSON list of SQL texts where {f} stands for the file; each
//            result's first column of the first row comes back as text
'use strict';
const path = require('path');

function canon(v) {
	if (v === null || v === undefined)
		return null;
	if (typeof v === 'bigint')
		return v.toString();
	if (typeof v === 'number') {
		if (Number.isNaN(v))
			return 'NaN';
		if (v === Infinity)
			return 'Infinity';
		if (v === -Infinity)
			return '-Infinity';
		return v;
	}
	if (typeof v === 'string' || typeof v === 'boolean')
		return v;
	if (typeof v.micros === 'bigint')
		return v.micros.toString();
	if (typeof v.days === 'number')
		return v.days;
	if (v.entries && typeof v.entries === 'object') {
		const o = {};
		for (const [k, x] of Object.entries(v.entries))
			o[k] = canon(x);
		return o;
	}
	throw new Error('unexpected DuckDB value ' + String(v) + ' ' + v.constructor.name);
}

async function main() {
	const [mods, file, queries = '[]'] = process.argv.slice(2);
	const { DuckDBInstance } = require(path.join(mods, '@duckdb', 'node-api'));
	const db = await DuckDBInstance.create(':memory:');
	const conn = await db.connect();
	const f = "'" + file.replace(/'/g, "''") + "'";
	const out = {};
	const rows = await conn.runAndReadAll(`SELECT * FROM read_parquet(${f})`);
	out.columns = rows.columnNames();
	out.types = rows.columnTypes().map((t) => t.toString());
	out.rows = rows.getRowObjects().map((r) => {
		const o = {};
		for (const [k, v] of Object.entries(r))
			o[k] = canon(v);
		return o;
	});
	const json = async (q) => (await conn.runAndReadAll(q)).getRowObjectsJson();
	out.schema = await json(`SELECT * FROM parquet_schema(${f})`);
	out.metadata = await json(`SELECT * FROM parquet_metadata(${f})`);
	out.file = await json(`SELECT * FROM parquet_file_metadata(${f})`);
	out.count = await json(`SELECT count(*)::VARCHAR AS n FROM read_parquet(${f})`);
	out.queries = [];
	for (const sql of JSON.parse(queries)) {
		const r = await conn.runAndReadAll(sql.split('{f}').join(f));
		out.queries.push(String(r.getRows()[0][0]));
	}
	process.stdout.write(JSON.stringify(out) + '\n');
}

main().catch((e) => {
	console.error(e && e.stack ? e.stack : String(e));
	process.exit(1);
});

// SPDX-License-Identifier: MIT
// parquet_read_hyparquet.mjs: reads a Parquet file with hyparquet (and
// hyparquet-compressors for ZSTD) for test_parquet_readers.py and prints one
// JSON object: the rows, values made exact as parquet_read_duckdb.cjs does
// (timestamps and INT64 as strings of integers, dates as integer days), and
// the footer's metadata as hyparquet parses it.
//
// usage: node parquet_read_hyparquet.mjs NODE_MODULES FILE
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [mods, file] = process.argv.slice(2);
const load = (p) => import(pathToFileURL(path.join(mods, p)).href);
const hy = await load('hyparquet/src/node.js');
const { compressors } = await load('hyparquet-compressors/src/index.js');

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
	if (typeof v === 'object' && !Array.isArray(v)) {
		const o = {};
		for (const [k, x] of Object.entries(v))
			o[k] = canon(x);
		return o;
	}
	throw new Error('unexpected hyparquet value ' + String(v));
}

const buf = await hy.asyncBufferFromFile(file);
const metadata = await hy.parquetMetadataAsync(buf);
const rows = await hy.parquetReadObjects({
	file: buf,
	compressors,
	parsers: {
		timestampFromMicroseconds: (us) => us, // exact, not a Date
		dateFromDays: (d) => d,
	},
});
const out = {
	rows: rows.map((r) => {
		const o = {};
		for (const [k, v] of Object.entries(r))
			o[k] = canon(v);
		return o;
	}),
	num_rows: metadata.num_rows.toString(),
	row_groups: metadata.row_groups.length,
	created_by: metadata.created_by,
	schema: metadata.schema.map((e) => ({ name: e.name, type: e.type ?? null, num_children: e.num_children ?? null })),
};
process.stdout.write(JSON.stringify(out, (k, v) => (typeof v === 'bigint' ? v.toString() : v)) + '\n');

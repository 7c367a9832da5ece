// `npm run schema`: writes docs/sources.schema.json from the Worker's own source-table schema
// (src/sources/source-schema.ts), so the file an editor checks wrangler.toml against is the one the Worker parses
// with. test/sources/config-schema.test.ts fails when the checked-in file differs from what this writes.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { importWorkerCode } from "./cli/worker-code.mjs";

const target = join(import.meta.dirname, "..", "docs", "sources.schema.json");
const { sourcesJsonSchema } = await importWorkerCode('export * from "./src/sources/json-schema.ts";');
writeFileSync(target, `${JSON.stringify(sourcesJsonSchema(), null, 2)}\n`);
console.log(`wrote ${target}`);

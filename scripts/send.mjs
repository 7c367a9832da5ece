#!/usr/bin/env node
// `npm run send -- <source> [sample-or-file] [webhook-id]`: the older spelling of `npm run cli -- send`, kept so
// existing instructions keep working. Signs with the source's own provider scheme (see docs/cli.md).
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const [source = "demo", sampleOrFile, eventId] = process.argv.slice(2);
const cli = fileURLToPath(new URL("./cli/index.mjs", import.meta.url));
const result = spawnSync(
  process.execPath,
  [cli, "send", source, ...(sampleOrFile ? [sampleOrFile] : []), ...(eventId ? ["--id", eventId] : [])],
  { stdio: "inherit" },
);
process.exit(result.status ?? 1);

// A source of the config as the deployed Worker would run it: `route test` runs its routes on a sample, and
// `route test --last --config draft.toml` on the stored events. Its own module, so neither command imports the other.
import { CliError } from "./errors.mjs";
import { readWranglerConfig } from "./project.mjs";
import { d1BindingStandIns, importWorkerCode } from "./worker-code.mjs";

const WORKER_ENTRY = `
export { lookupSource } from "./src/sources/registry.ts";
export { adapterFor } from "./src/providers/registry.ts";
export { pickHeaders } from "./src/claims/claim-event.ts";
export { explainRoute } from "./src/routing/route.ts";
`;

/**
 * A source of the config as the deployed Worker would read it, or its problems printed and a failure (as `check`).
 * @param {import("./project.mjs").ProjectOptions} options
 * @param {string} sourceName
 */
export async function validSource(options, sourceName) {
  const config = await readWranglerConfig(options);
  const sources = /** @type {Record<string, Record<string, unknown>>} */ (config.vars?.SOURCES ?? {});
  const table = sources[sourceName];
  if (!table)
    throw new CliError(
      `no source ${sourceName} in the config: sources are ${Object.keys(sources).join(", ") || "(none)"}`,
    );
  const worker = await importWorkerCode(WORKER_ENTRY);
  const bindings = (config.d1_databases ?? []).map((/** @type {{ binding: string }} */ entry) => entry.binding);
  const lookup = worker.lookupSource({ SOURCES: sources, ...d1BindingStandIns(bindings) }, sourceName);
  if (lookup.kind !== "valid") {
    const problems = lookup.kind === "invalid" ? lookup.problems : [`no source ${sourceName}`];
    for (const problem of problems) console.log(`FAIL  ${problem}`);
    throw new CliError(
      `source ${sourceName} is out of service: fix the problems above (npm run cli -- check says the same)`,
    );
  }
  return { table, source: lookup.source, worker };
}

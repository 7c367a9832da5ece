// What `check --env E` finds in a deployed environment's config alone, before anything that needs a Cloudflare
// login: a database id still the shipped placeholder, and a binding the local config has that the environment
// lacks (wrangler environments do not inherit bindings, so a Worker deployed without one fails on its first use).
import { readFileSync } from "node:fs";
import { configPath } from "./project.mjs";

/** The id the shipped config holds until `wrangler d1 create` prints the real one. */
const PLACEHOLDER_DATABASE_ID = /^0{8}-0{4}-0{4}-0{4}-0{12}$/;

/**
 * A deployed environment whose D1 database still has the placeholder id: wrangler would fail on it mid-deploy (or
 * bind nothing). Names the file, the line of that database_id and what to paste there.
 * @param {{ d1_databases?: { binding: string, database_name?: string, database_id?: string }[] }} config
 * @param {import("./project.mjs").ProjectOptions} options
 */
export function placeholderDatabaseIds(config, options) {
  const path = configPath(options);
  const lines = readFileSync(path, "utf8").split(/\r?\n/);
  return (config.d1_databases ?? [])
    .filter((database) => PLACEHOLDER_DATABASE_ID.test(database.database_id ?? ""))
    .map((database) => {
      const table = `[[env.${options.env}.d1_databases]]`;
      const line = placeholderLine(lines, table, database.binding);
      const name = database.database_name ?? "<name>";
      return `${path}${line ? `:${line}` : ""}: ${table} ${database.binding} still has the placeholder database_id ${database.database_id}: paste the id npx wrangler d1 create ${name} printed (or npx wrangler d1 list shows) there`;
    });
}

/** The 1-based line of the placeholder database_id in the `table` block that binds `binding`, or 0. */
function placeholderLine(/** @type {string[]} */ lines, /** @type {string} */ table, /** @type {string} */ binding) {
  let inTable = false;
  let bindsIt = false;
  let idLine = 0;
  for (let index = 0; index <= lines.length; index++) {
    const line = (lines[index] ?? "[end]").trim();
    if (line.startsWith("[")) {
      if (inTable && bindsIt && idLine) return idLine;
      inTable = line === table;
      bindsIt = false;
      idLine = 0;
    } else if (inTable && new RegExp(`^binding\\s*=\\s*"${binding}"`).test(line)) bindsIt = true;
    else if (inTable && /^database_id\s*=\s*"0{8}-0{4}-0{4}-0{4}-0{12}"/.test(line)) idLine = index + 1;
  }
  return 0;
}

/**
 * Each kind of binding wrangler keeps per environment: where it sits in the read config, the table it is written
 * in, and the key that names one. Analytics Engine is optional (the metrics read nothing without it).
 * @type {{ table: string, list: (config: any) => any[] | undefined, key: string, optional?: boolean }[]}
 */
const BINDING_KINDS = [
  { table: "d1_databases", list: (config) => config.d1_databases, key: "binding" },
  { table: "durable_objects.bindings", list: (config) => config.durable_objects?.bindings, key: "name" },
  { table: "r2_buckets", list: (config) => config.r2_buckets, key: "binding" },
  { table: "kv_namespaces", list: (config) => config.kv_namespaces, key: "binding" },
  { table: "queues.producers", list: (config) => config.queues?.producers, key: "binding" },
  { table: "queues.consumers", list: (config) => config.queues?.consumers, key: "queue" },
  { table: "services", list: (config) => config.services, key: "binding" },
  {
    table: "analytics_engine_datasets",
    list: (config) => config.analytics_engine_datasets,
    key: "binding",
    optional: true,
  },
];

/**
 * The bindings the top-level (local) config declares that the environment does not: a missing one is a problem,
 * a missing optional one (Analytics Engine) a warning.
 * @param {any} environmentConfig the config read with `--env`
 * @param {any} localConfig the same file read without it
 * @param {string} environment
 */
export function missingBindings(environmentConfig, localConfig, environment) {
  /** @type {{ problems: string[], warnings: string[] }} */
  const verdict = { problems: [], warnings: [] };
  for (const kind of BINDING_KINDS) {
    const present = new Set((kind.list(environmentConfig) ?? []).map((entry) => entry?.[kind.key]));
    for (const entry of kind.list(localConfig) ?? []) {
      const name = entry?.[kind.key];
      if (typeof name !== "string" || present.has(name)) continue;
      const message = `[env.${environment}] has no ${kind.table} entry ${name} (the top-level config has one; environments do not inherit bindings): add a [[env.${environment}.${kind.table}]] table with ${kind.key} = "${name}"`;
      (kind.optional ? verdict.warnings : verdict.problems).push(message);
    }
  }
  return verdict;
}

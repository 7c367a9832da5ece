#!/usr/bin/env node
// `npm run db:migrate:local` / `db:migrate:remote`: apply migrations/ to every D1 database the config binds, not
// only DB. A source may keep its receipts in another database (`database = "DB_EU"` in its table), and each
// database holds the same tables.
//   node scripts/migrate.mjs --local [--config wrangler.toml] [--env E] [--persist-to DIR]
//   node scripts/migrate.mjs --remote --env production
//   --quiet   one summary line per database instead of wrangler's tables (npm start); a failure prints it all
import { spawnSync } from "node:child_process";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { unstable_readConfig } from "wrangler";

/** wrangler is this project's dependency: run it from here, whatever directory the command was started in. */
const PROJECT_ROOT = fileURLToPath(new URL("../", import.meta.url));

const args = process.argv.slice(2);
/**
 * `--name value` or `--name=value`, or undefined.
 * @param {...string} names
 */
function option(...names) {
  for (const name of names) {
    const at = args.findIndex((arg) => arg === name || arg.startsWith(`${name}=`));
    if (at >= 0) return args[at].includes("=") ? args[at].slice(name.length + 1) : args[at + 1];
  }
  return undefined;
}
const where = args.includes("--remote") ? "--remote" : "--local";
const configOption = option("--config", "-c");
const config = configOption === undefined ? undefined : resolve(configOption);
const environment = option("--env", "-e");
const persistToOption = option("--persist-to");
const persistTo = persistToOption === undefined ? undefined : resolve(persistToOption);
const quiet = args.includes("--quiet");

const bindings = (unstable_readConfig({ config, env: environment }).d1_databases ?? []).map(
  (/** @type {{ binding: string }} */ entry) => entry.binding,
);
if (bindings.length === 0) {
  console.error(
    `no [[d1_databases]] in ${config ?? "wrangler.toml"}${environment ? ` for env ${environment}` : ""}: nothing to migrate`,
  );
  process.exit(1);
}
for (const binding of bindings) {
  const wranglerArgs = [
    "wrangler",
    "d1",
    "migrations",
    "apply",
    binding,
    where,
    ...(config ? ["--config", config] : []),
    ...(environment ? ["--env", environment] : []),
    ...(persistTo ? ["--persist-to", persistTo] : []),
  ];
  const result = spawnSync("npx", wranglerArgs, {
    cwd: PROJECT_ROOT,
    stdio: quiet ? ["inherit", "pipe", "pipe"] : "inherit",
    encoding: "utf8",
    env: { ...process.env, WRANGLER_SEND_METRICS: "false" },
  });
  if (quiet && result.status === 0) {
    // wrangler lists every migration it applies in a table; a first run's would be ~150 lines.
    const applied =
      /About to apply (\d+) migration/.exec(result.stdout ?? "")?.[1] ??
      (/No migrations to apply/.test(result.stdout ?? "") ? "0" : undefined);
    console.log(`migrations: ${binding} up to date${applied === undefined ? "" : ` (${applied} applied)`}`);
  } else if (quiet) {
    process.stdout.write(result.stdout ?? "");
    process.stderr.write(result.stderr ?? "");
  }
  if (result.status !== 0) {
    console.error(
      `migrations failed for ${binding}; the databases before it are migrated, run this again once it is fixed`,
    );
    process.exit(result.status ?? 1);
  }
}

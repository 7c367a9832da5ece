import { randomBytes } from "node:crypto";
import { cpSync, existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { unstable_readConfig } from "wrangler";
import { applyMigrations, Runtime } from "./runtime.ts";

/**
 * Everything one bench runtime needs on disk: a snapshot of the receiver's sources (so another engineer's edit
 * cannot hot-reload the Worker mid-measurement), freshly generated secrets in an env file, and a persist
 * directory with the D1 migrations applied.
 */

export const repoRoot = resolve(import.meta.dirname, "..", "..");

export interface ReceiverDeployment {
  configPath: string;
  envFile: string;
  demoSecret: string;
  adminToken: string;
}

export function snapshotReceiver(stateDir: string): ReceiverDeployment {
  const snapshot = join(stateDir, "receiver");
  mkdirSync(snapshot, { recursive: true });
  for (const entry of ["src", "migrations", "wrangler.toml", "tsconfig.json", "package.json"]) {
    if (existsSync(join(repoRoot, entry))) cpSync(join(repoRoot, entry), join(snapshot, entry), { recursive: true });
  }
  // Bundling resolves packages from the snapshot upwards; the link makes that work for a state dir outside the repo.
  if (!existsSync(join(snapshot, "node_modules")))
    symlinkSync(join(repoRoot, "node_modules"), join(snapshot, "node_modules"));
  const configPath = join(snapshot, "wrangler.toml");

  // A random secret for every secret any configured source names: nothing from .dev.vars is reused.
  const sources = (unstable_readConfig({ config: configPath }).vars.SOURCES ?? {}) as Record<
    string,
    { secrets?: unknown[] }
  >;
  const secretNames = new Set(["DEMO_WEBHOOK_SECRET", "GATEWAY_SIGNING_SECRET", "ADMIN_TOKEN"]);
  for (const source of Object.values(sources)) {
    for (const entry of source.secrets ?? []) {
      const name = typeof entry === "string" ? entry : (entry as { name?: unknown }).name;
      if (typeof name === "string") secretNames.add(name);
    }
  }
  const secrets = new Map([...secretNames].map((name) => [name, `whsec_${randomBytes(24).toString("base64")}`]));
  const envFile = join(stateDir, "bench.env");
  writeFileSync(envFile, `${[...secrets].map(([name, value]) => `${name}=${value}`).join("\n")}\n`, { mode: 0o600 });
  return {
    configPath,
    envFile,
    demoSecret: secrets.get("DEMO_WEBHOOK_SECRET")!,
    adminToken: secrets.get("ADMIN_TOKEN")!,
  };
}

/**
 * The same deployment with the relay held back (RELAY_DELAY_MS of an hour, RELAY_HELD_BACK so that a full batch
 * of 50 waits too, and LOCAL_DEVELOPMENT, without which both are refused (src/claims/relay-settings.ts), set in an
 * env file of its own, which wrangler dev lets override a var): claims pile up in the
 * shards and no consumer runs, so a measurement of it is the acknowledgement path alone.
 */
export function heldBackDeployment(deployment: ReceiverDeployment, stateDir: string): ReceiverDeployment {
  const envFile = join(stateDir, "bench-held-back.env");
  writeFileSync(
    envFile,
    `${readFileSync(deployment.envFile, "utf8")}RELAY_DELAY_MS=3600000\nRELAY_HELD_BACK=1\nLOCAL_DEVELOPMENT=true\n`,
    { mode: 0o600 },
  );
  return { ...deployment, envFile };
}

/** A value of a source table as the bench writes it: TOML scalars, string arrays and inline tables of them. */
export type TomlValue = string | number | boolean | string[] | { [key: string]: TomlValue };

type TomlTable = { [key: string]: TomlValue };

/** A source table's settings; `routes` become `[[vars.SOURCES.<name>.routes]]` entries (docs/routing.md). */
export type SourceSettings = { [key: string]: TomlValue | TomlTable[] };

function tomlKey(key: string): string {
  return /^[A-Za-z0-9_-]+$/.test(key) ? key : JSON.stringify(key);
}

function tomlValue(value: TomlValue): string {
  if (typeof value === "string" || typeof value === "number" || typeof value === "boolean" || Array.isArray(value))
    return JSON.stringify(value);
  return `{ ${Object.entries(value)
    .map(([key, inner]) => `${tomlKey(key)} = ${tomlValue(inner)}`)
    .join(", ")} }`;
}

/**
 * The deployment with one more source table in a copy of its config (placed before the first environment, where
 * top-level vars end), for a phase that needs a source of its own.
 */
export function deploymentWithSource(
  deployment: ReceiverDeployment,
  label: string,
  sourceName: string,
  settings: SourceSettings,
): ReceiverDeployment {
  const original = readFileSync(deployment.configPath, "utf8");
  const { routes = [], ...own } = settings as TomlTable & { routes?: TomlTable[] };
  const lines = (table: TomlTable) =>
    Object.entries(table).map(([key, value]) => `${tomlKey(key)} = ${tomlValue(value)}`);
  const table = [
    `[vars.SOURCES.${sourceName}]`,
    ...lines(own),
    "",
    ...routes.flatMap((route) => [`[[vars.SOURCES.${sourceName}.routes]]`, ...lines(route), ""]),
    "",
  ].join("\n");
  const at = original.search(/^\[env\./m);
  const config = at < 0 ? `${original}\n${table}` : `${original.slice(0, at)}${table}${original.slice(at)}`;
  const configPath = deployment.configPath.replace(/wrangler\.toml$/, `wrangler-${label}.toml`);
  writeFileSync(configPath, config);
  return { ...deployment, configPath };
}

/**
 * The deployment with a ring of local D1 databases bound for `database = "partitions"` sources
 * (`[vars.RECEIPT_PARTITIONS]`, src/sources/partitions.ts): `bindings` named in order, one `period` each.
 */
export function withReceiptRing(
  deployment: ReceiverDeployment,
  ring: { bindings: readonly string[]; period: string },
): ReceiverDeployment {
  const config = readFileSync(deployment.configPath, "utf8");
  const table = [
    "[vars.RECEIPT_PARTITIONS]",
    `databases = ${JSON.stringify(ring.bindings)}`,
    `period = "${ring.period}"`,
    "",
    ...ring.bindings.flatMap((binding, index) => [
      "[[d1_databases]]",
      `binding = "${binding}"`,
      `database_name = "webhook-receipts-p${index}"`,
      `database_id = "00000000-0000-0000-0000-0000000000${String(index + 10)}"`,
      'migrations_dir = "migrations"',
      "",
    ]),
  ].join("\n");
  const at = config.search(/^\[env\./m);
  writeFileSync(
    deployment.configPath,
    at < 0 ? `${config}\n${table}\n` : `${config.slice(0, at)}${table}\n${config.slice(at)}`,
  );
  return deployment;
}

export function receiverRuntime(
  deployment: ReceiverDeployment,
  stateDir: string,
  label: string,
  port: number,
  inspectorPort: number,
): Runtime {
  const persistDir = join(stateDir, `${label}-persist`);
  const logFile = join(stateDir, `${label}.log`);
  applyMigrations(deployment.configPath, persistDir, logFile);
  return new Runtime({
    label,
    configPath: deployment.configPath,
    persistDir,
    port,
    inspectorPort,
    envFile: deployment.envFile,
    logFile,
    readyPath: "/health",
  });
}

/** The bare Worker's paths for the floor of one Durable Object call (bench/bare-worker/index.ts). */
export const FLOOR_RPC_PATH = "/floor/rpc";
export const FLOOR_WRITE_PATH = "/floor/write";

export function bareRuntime(stateDir: string, port: number, inspectorPort: number): Runtime {
  return new Runtime({
    label: "bare",
    configPath: join(repoRoot, "bench", "bare-worker", "wrangler.toml"),
    persistDir: join(stateDir, "bare-persist"),
    port,
    inspectorPort,
    envFile: null,
    logFile: join(stateDir, "bare.log"),
    readyPath: "/",
  });
}

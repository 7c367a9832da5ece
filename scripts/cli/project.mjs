// Where the CLI finds the project's settings: the wrangler config (sources, schedule), the local secrets in
// .dev.vars, and the running receiver's URL. Every lookup that can fail says what to do about it.
import { existsSync, readFileSync } from "node:fs";
import { cachedConfigRead } from "./config-cache.mjs";
import { CliError, EXIT } from "./errors.mjs";

export const DEFAULT_RECEIVER_URL = "http://127.0.0.1:8787";

/**
 * The options every command shares, from the command line or the environment.
 * @typedef {{ config?: string, env?: string, devVars?: string, url?: string }} ProjectOptions
 */

/**
 * The receiver's base URL without a trailing slash, so `http://host:8787/` and `http://host:8787` both work.
 * @param {ProjectOptions} options
 */
export function receiverUrl(options = {}) {
  const raw = options.url ?? process.env.RECEIVER_URL ?? DEFAULT_RECEIVER_URL;
  let parsed;
  try {
    parsed = new URL(raw);
  } catch {
    throw new CliError(
      `RECEIVER_URL ${JSON.stringify(raw)} is not a URL: use something like ${DEFAULT_RECEIVER_URL}`,
      EXIT.setup,
    );
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    throw new CliError(`RECEIVER_URL must be http:// or https://, not ${parsed.protocol}`, EXIT.setup);
  }
  return `${parsed.origin}${parsed.pathname.replace(/\/+$/, "")}`;
}

/** @param {ProjectOptions} options */
export function configPath(options = {}) {
  return options.config ?? process.env.RECEIVER_CONFIG ?? "wrangler.toml";
}

/** @param {ProjectOptions} options */
export function devVarsPath(options = {}) {
  return options.devVars ?? process.env.RECEIVER_DEV_VARS ?? ".dev.vars";
}

/**
 * The parts of the wrangler config the CLI reads.
 * @typedef {{ vars: Record<string, unknown>, triggers: { crons?: string[] }, name?: string, d1_databases?: { binding: string, database_name?: string, database_id?: string }[] }} WranglerConfig
 */

/**
 * The wrangler config as wrangler itself reads it (the same call vitest.config.ts uses), so `[env.*]` sections
 * and TOML details resolve exactly as they will on deploy; remembered per file text (./config-cache.mjs).
 * @param {ProjectOptions} options
 * @returns {Promise<WranglerConfig>}
 */
export async function readWranglerConfig(options = {}) {
  const path = configPath(options);
  if (!existsSync(path))
    throw new CliError(`no ${path} here: run the CLI from the project's root directory (or pass --config)`, EXIT.setup);
  try {
    return await cachedConfigRead(
      { path, env: options.env },
      async () => (await import("wrangler")).unstable_readConfig,
    );
  } catch (error) {
    throw new CliError(`${path} cannot be read: ${wranglerProblem(error)}`, EXIT.setup);
  }
}

/**
 * The source tables under [vars.SOURCES] (of the chosen environment).
 * @param {ProjectOptions} options
 * @returns {Promise<Record<string, Record<string, unknown>>>}
 */
export async function readSources(options = {}) {
  const config = await readWranglerConfig(options);
  const sources = config.vars?.SOURCES;
  if (!sources || typeof sources !== "object" || Array.isArray(sources)) {
    throw new CliError(
      `${configPath(options)} declares no [vars.SOURCES.<name>] tables${options.env ? ` for env ${options.env}` : ""}: add one (see docs/providers.md)`,
      EXIT.setup,
    );
  }
  return /** @type {Record<string, Record<string, unknown>>} */ (sources);
}

/**
 * The local secrets, parsed the way wrangler reads .dev.vars (KEY=value, optional quotes, # comments).
 * @param {ProjectOptions} options
 * @returns {Record<string, string>}
 */
export function readDevVars(options = {}) {
  const path = devVarsPath(options);
  if (!existsSync(path))
    throw new CliError(`no ${path} yet: run npm start once (it creates it from .dev.vars.example)`, EXIT.setup);
  /** @type {Record<string, string>} */
  const vars = {};
  for (const line of readFileSync(path, "utf8").split(/\r?\n/)) {
    const match = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$/.exec(line);
    if (!match) continue;
    let value = match[2];
    const quoted = /^(["'])(.*)\1$/.exec(value);
    if (quoted) value = quoted[1] === '"' ? quoted[2].replace(/\\n/g, "\n") : quoted[2];
    else value = value.replace(/\s+#.*$/, "");
    vars[match[1]] = value;
  }
  return vars;
}

/**
 * The admin token: ADMIN_TOKEN from the environment (for a deployed Worker), else from .dev.vars.
 * @param {ProjectOptions} options
 */
export function adminToken(options = {}) {
  const fromEnv = process.env.ADMIN_TOKEN;
  if (fromEnv) return fromEnv;
  const token = readDevVars(options).ADMIN_TOKEN;
  if (!token)
    throw new CliError(
      `no ADMIN_TOKEN in ${devVarsPath(options)} or the environment: add ADMIN_TOKEN="<at least 16 characters>" and restart npm start`,
      EXIT.setup,
    );
  return token;
}

/**
 * Wrangler's config errors open with "Processing <file> configuration:" and list each problem as "- …". A TOML
 * parse error carries its location instead, which the message alone does not name.
 */
function wranglerProblem(/** @type {unknown} */ error) {
  const location = /** @type {{ location?: { line?: number, lineText?: string, fileText?: string } }} */ (error)
    .location;
  if (typeof location?.line === "number")
    return (
      sourcesRedefined(location) ?? `${firstLine(error)} at line ${location.line}: ${location.lineText ?? ""}`.trim()
    );
  const text = error instanceof Error ? error.message : String(error);
  const problem = text.split("\n").find((line) => /^\s*- /.test(line));
  return problem ? problem.replace(/^\s*- /, "").trim() : firstLine(error);
}

/**
 * The commonest TOML error in this project: a `[…vars.SOURCES.<name>]` table added while the same vars still say
 * `SOURCES = {}` (the shipped production config does, until a first source). Names both lines and the fix.
 * @param {{ line?: number, lineText?: string, fileText?: string }} location
 */
function sourcesRedefined(location) {
  const table = /^\s*\[(.*\bvars)\.SOURCES\.[^\]]+\]\s*$/.exec(location.lineText ?? "");
  if (!table || !location.fileText || !location.line) return undefined;
  const lines = location.fileText.split(/\r?\n/);
  // The `SOURCES = …` assignment inside the same [<env.>vars] table, before the line that failed.
  let section = "";
  for (let index = 0; index < location.line - 1; index++) {
    const header = /^\s*\[([^[\]]+)\]\s*$/.exec(lines[index]);
    if (header) section = header[1].trim();
    else if (section === table[1] && /^\s*SOURCES\s*=/.test(lines[index])) {
      return `line ${location.line} (${lines[location.line - 1].trim()}) defines a source, but line ${index + 1} already set ${lines[index].trim()}: delete line ${index + 1}, the [${table[1]}.SOURCES.<name>] tables take its place`;
    }
  }
  return undefined;
}

/** @param {unknown} error */
export function firstLine(error) {
  const text = error instanceof Error ? error.message : String(error);
  return text.split("\n").find((line) => line.trim()) ?? text;
}

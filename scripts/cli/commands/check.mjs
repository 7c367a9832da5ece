// `check [--remote] [--env E]`: the config parses exactly as the Worker parses it, and every secret it names is
// set — in .dev.vars locally, or among the deployed Worker's secrets with --remote.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { missingBindings, placeholderDatabaseIds } from "../environment-checks.mjs";
import { CliError, EXIT } from "../errors.mjs";
import { configPath, devVarsPath, firstLine, readDevVars, readWranglerConfig } from "../project.mjs";
import { rotationVerdicts } from "../verification-health.mjs";
import { d1BindingStandIns, importWorkerCode } from "../worker-code.mjs";

/**
 * Why the admin token cannot be used, as the Worker's own check (src/admin/guards/token-strength.ts) decides it,
 * or null when it can.
 * @param {string} token
 * @returns {Promise<string | null>}
 */
async function adminTokenProblem(token) {
  const strength = await importWorkerCode('export * from "./src/admin/guards/token-strength.ts";');
  const make = "the admin API stays shut (npm run -s cli -- secret token makes one)";
  switch (strength.tokenStrength(token)) {
    case "too-short":
      return `is shorter than ${strength.MIN_ADMIN_TOKEN_LENGTH} characters: ${make}`;
    case "low-entropy":
      return `repeats too few characters to be hard to guess (under ${strength.MIN_ADMIN_TOKEN_ENTROPY_BITS} bits of Shannon entropy): ${make}`;
    default:
      return null;
  }
}

/**
 * The Worker's own source checks (src/sources/registry.ts), bundled on the fly, so check can never disagree with
 * what a deployed Worker would answer 503 for.
 * @param {Record<string, unknown>} sources
 * @param {string[]} d1Bindings the config's [[d1_databases]] bindings: a source's `database` must name one
 * @param {Record<string, unknown>} vars the other vars the registry reads: RECEIPT_PARTITIONS, for `database = "partitions"`
 * @returns {Promise<{ valid: string[], problems: string[] }>}
 */
async function workerVerdict(sources, d1Bindings, vars) {
  const registry = await importWorkerCode('export * from "./src/sources/registry.ts";');
  const env = { SOURCES: sources, RECEIPT_PARTITIONS: vars.RECEIPT_PARTITIONS, ...d1BindingStandIns(d1Bindings) };
  try {
    const valid = [...registry.loadSources(env).keys()];
    // Per-source problems, where the registry keeps a broken table out of service instead of failing them all.
    /** @type {Map<string, string[]>} */
    const perSource = registry.sourceProblems?.(env) ?? new Map();
    const problems = [...perSource].flatMap(([name, list]) =>
      list.map((problem) => (problem.startsWith("SOURCES.") ? problem : `SOURCES.${name}: ${problem}`)),
    );
    return { valid, problems };
  } catch (error) {
    const listed = /** @type {{ problems?: string[] }} */ (error).problems;
    if (!listed) throw new CliError(`could not run the Worker's config checks: ${firstLine(error)}`);
    return { valid: [], problems: listed };
  }
}

/**
 * The capacity model's warnings for the sources that set `expected_rate` (src/capacity/source-capacity.ts), from the
 * bench's per-event figures. Bundled only when a source sets one, so a config without any checks as fast as before.
 * @param {Record<string, any>} sources
 * @param {Record<string, unknown>} vars
 * @param {string[]} d1Bindings
 * @returns {Promise<string[]>}
 */
async function capacityWarningsOf(sources, vars, d1Bindings) {
  if (!Object.values(sources).some((source) => source?.expected_rate !== undefined)) return [];
  const { capacityCode, FIGURES_PATH, readFigures } = await import("./capacity.mjs");
  const code = await capacityCode([
    'export { loadSources } from "./src/sources/registry.ts";',
    'export { shardCount } from "./src/claims/routing.ts";',
    'export { receiptPartitionsOf } from "./src/sources/partitions.ts";',
  ]);
  let figures;
  try {
    figures = readFigures(code, FIGURES_PATH);
  } catch (error) {
    return [`expected_rate is not checked: ${/** @type {Error} */ (error).message}`];
  }
  const env = {
    SOURCES: sources,
    CLAIM_SHARD_COUNT: vars.CLAIM_SHARD_COUNT,
    RECEIPT_PARTITIONS: vars.RECEIPT_PARTITIONS,
    ...d1BindingStandIns(d1Bindings),
  };
  const ring = code.receiptPartitionsOf(env);
  return code.capacityWarnings(
    code.loadSources(env).values(),
    { shardCount: code.shardCount(env), partitions: ring.ok ? ring.partitions : null },
    figures,
  );
}

/**
 * Every secret the config depends on, with who needs it.
 * @param {Record<string, any>} sources
 * @param {Record<string, unknown>} vars
 */
function requiredSecrets(sources, vars) {
  /** @type {{ name: string, usedBy: string, required: boolean }[]} */
  const needed = [{ name: "ADMIN_TOKEN", usedBy: "the admin API and dashboard", required: true }];
  const forwardsTo = (/** @type {unknown} */ destination) =>
    typeof destination === "string" && /^https?:\/\//.test(destination);
  // A source's own destination, or its route's (docs/routing.md).
  const forwards = Object.entries(sources)
    .filter(
      ([, source]) =>
        forwardsTo(source.destination) ||
        (Array.isArray(source.routes) &&
          source.routes.some((/** @type {any} */ route) => forwardsTo(route?.destination))),
    )
    .map(([name]) => name);
  const gateway =
    typeof vars.GATEWAY_SIGNING_SECRET_NAME === "string" ? vars.GATEWAY_SIGNING_SECRET_NAME : "GATEWAY_SIGNING_SECRET";
  const gatewayUsers = [
    ...forwards.map((name) => `source ${name} (forwards)`),
    ...(vars.ALERT_WEBHOOK_URL ? ["alert notices"] : []),
  ];
  needed.push({
    name: gateway,
    usedBy: gatewayUsers.join(", ") || "forwards and alert notices (none configured yet)",
    required: gatewayUsers.length > 0,
  });
  for (const [name, source] of Object.entries(sources)) {
    for (const ref of Array.isArray(source.secrets) ? source.secrets : []) {
      const secretName = typeof ref === "string" ? ref : ref?.name;
      const expires = typeof ref === "object" && ref?.expires ? Date.parse(ref.expires) : NaN;
      // An expired secret is refused anyway; leaving it unset is the end of a rotation, not a mistake.
      if (typeof secretName === "string")
        needed.push({ name: secretName, usedBy: `source ${name}`, required: !(expires <= Date.now()) });
    }
    const apiKey = source.catch_up?.api_key_secret;
    if (typeof apiKey === "string") needed.push({ name: apiKey, usedBy: `source ${name} (catch_up)`, required: true });
  }
  return needed;
}

/** The deployed Worker's secret names, through wrangler (it needs `npx wrangler login` or an API token). */
async function remoteSecretNames(/** @type {import("../project.mjs").ProjectOptions} */ options) {
  const args = [
    "wrangler",
    "secret",
    "list",
    "--format",
    "json",
    "--config",
    configPath(options),
    ...(options.env ? ["--env", options.env] : []),
  ];
  try {
    const { stdout } = await promisify(execFile)("npx", args, {
      env: { ...process.env, WRANGLER_SEND_METRICS: "false" },
      maxBuffer: 10 * 1024 * 1024,
    });
    const list = JSON.parse(stdout.slice(stdout.indexOf("[")));
    return new Set(list.map((/** @type {{ name: string }} */ entry) => entry.name));
  } catch (error) {
    const stderr = /** @type {{ stderr?: string }} */ (error).stderr;
    throw new CliError(
      `could not list the Worker's secrets (${firstLine(stderr?.trim() || error)}): run npx wrangler login, or deploy once first`,
      EXIT.setup,
    );
  }
}

/**
 * @param {{ remote?: boolean, configOnly?: boolean } & import("../project.mjs").ProjectOptions} options
 */
export async function check(options) {
  const config = await readWranglerConfig(options);
  const where = `${configPath(options)}${options.env ? ` [env.${options.env}]` : ""}`;
  const vars = config.vars ?? {};
  const sources = /** @type {Record<string, any>} */ (vars.SOURCES ?? {});
  /** @type {string[]} */
  const problems = [];
  /** @type {string[]} */
  const warnings = [];
  /** @type {string[]} */
  let valid = [];

  if (options.env) {
    problems.push(...placeholderDatabaseIds(config, options));
    const bindings = missingBindings(config, await readWranglerConfig({ ...options, env: undefined }), options.env);
    problems.push(...bindings.problems);
    warnings.push(...bindings.warnings);
  }
  // A fresh production config has no source yet: it deploys and serves the admin API, and accepts nothing.
  if (Object.keys(sources).length === 0)
    warnings.push(
      `${where} declares no source yet: every /webhooks/<name> answers 404 until you add a [${options.env ? `env.${options.env}.` : ""}vars.SOURCES.<name>] table`,
    );
  else {
    const d1Bindings = (config.d1_databases ?? []).map((/** @type {{ binding: string }} */ entry) => entry.binding);
    const verdict = await workerVerdict(sources, d1Bindings, vars);
    if (verdict.valid.length > 0)
      console.log(
        `ok    ${where}: ${verdict.valid.length} valid source${verdict.valid.length === 1 ? "" : "s"} (${verdict.valid.join(", ")})`,
      );
    problems.push(...verdict.problems);
    if (verdict.valid.length > 0) warnings.push(...(await capacityWarningsOf(sources, vars, d1Bindings)));
    valid = verdict.valid;
  }

  await shardEpochVerdict(vars, problems, warnings);

  if (options.configOnly) return report(problems, warnings, "config only, secrets not looked at");
  // Listing the deployed Worker's secrets needs a login: a config that cannot deploy anyway is reported whole first.
  if (options.remote && problems.length > 0)
    return report(problems, warnings, "", "the deployed Worker's secrets were not looked at until these are fixed");
  const present = options.remote
    ? await remoteSecretNames(options)
    : new Set(
        Object.entries(readDevVars(options))
          .filter(([, value]) => value)
          .map(([name]) => name),
      );
  const store = options.remote ? "the deployed Worker's secrets" : devVarsPath(options);
  const localValues = options.remote ? {} : readDevVars(options);
  const seen = new Set();
  for (const secret of requiredSecrets(sources, vars)) {
    if (seen.has(secret.name)) continue;
    seen.add(secret.name);
    if (!present.has(secret.name)) {
      const hint = options.remote
        ? `npx wrangler secret put ${secret.name}${options.env ? ` --env ${options.env}` : ""}`
        : `add ${secret.name}="…" to ${store}`;
      (secret.required ? problems : warnings).push(`${secret.name} (${secret.usedBy}) is not in ${store}: ${hint}`);
      continue;
    }
    const tokenProblem =
      secret.name === "ADMIN_TOKEN" && !options.remote ? await adminTokenProblem(localValues.ADMIN_TOKEN) : null;
    if (tokenProblem) {
      problems.push(`ADMIN_TOKEN in ${store} ${tokenProblem}`);
    } else {
      console.log(`ok    ${secret.name} (${secret.usedBy})`);
    }
  }
  // A rotation under way: what the receiver has seen of each secret's use (../verification-health.mjs).
  const rotations = await rotationVerdicts(sources, valid, options);
  for (const line of rotations.ok) console.log(`ok    ${line}`);
  warnings.push(...rotations.warnings);
  return report(problems, warnings, options.remote ? "remote secrets" : "");
}

/**
 * CLAIM_SHARD_PREVIOUS (a shard epoch, src/claims/epoch-config.ts), read by the Worker's own parser: a value it
 * does not understand is a problem; a declared epoch is a reminder of when it can go, which only the deployed
 * Worker knows (the cron's handover).
 * @param {Record<string, unknown>} vars
 * @param {string[]} problems
 * @param {string[]} warnings
 */
async function shardEpochVerdict(vars, problems, warnings) {
  if (vars.CLAIM_SHARD_PREVIOUS === undefined) return;
  const epochs = await importWorkerCode('export * from "./src/claims/epoch-config.ts";');
  const setting = epochs.shardEpoch({
    CLAIM_SHARD_PREVIOUS: vars.CLAIM_SHARD_PREVIOUS,
    CLAIM_SHARD_COUNT: vars.CLAIM_SHARD_COUNT,
  });
  problems.push(...setting.problems);
  if (setting.epoch)
    warnings.push(
      `CLAIM_SHARD_PREVIOUS declares a shard epoch since ${new Date(setting.epoch.since).toISOString()} (${setting.epoch.previousShards} shards before): remove it once GET /admin/api/health answers shardEpoch.removable: true (docs/operating.md, "Changing the shard count or a source's placement")`,
    );
}

/** Prints the verdict; answers the exit code. */
function report(
  /** @type {string[]} */ problems,
  /** @type {string[]} */ warnings,
  /** @type {string} */ scope,
  /** @type {string} */ unchecked = "",
) {
  for (const warning of warnings) console.log(`warn  ${warning}`);
  for (const problem of problems) console.log(`FAIL  ${problem}`);
  if (problems.length > 0) {
    console.error(
      `check failed: ${problems.length} problem${problems.length === 1 ? "" : "s"} above${unchecked ? ` (${unchecked})` : ""}`,
    );
    return 1;
  }
  console.log(`check passed${scope ? ` (${scope})` : ""}`);
  return 0;
}

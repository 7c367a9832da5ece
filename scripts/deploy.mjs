#!/usr/bin/env node
// `npm run deploy`: deploy the [env.production] Worker, but only after the two checks that catch a broken first
// deploy before Cloudflare does: the config, then its secrets (`check --remote`, which reports every config problem
// before it lists the secrets, the one step that needs a login), then a local build
// (`wrangler deploy --dry-run`). Extra arguments go to the final `wrangler deploy`.
//   npm run deploy -- --env staging     another environment
//   npm run deploy -- --skip-secrets    skip the remote secret lookup (e.g. a CI token without that permission)
//   npm run deploy -- --config path     another wrangler config (every step reads the same one)
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const args = process.argv.slice(2);
const envAt = args.findIndex((arg) => arg === "--env" || arg === "-e");
const environment = envAt >= 0 ? args.splice(envAt, 2)[1] : "production";
const skipAt = args.indexOf("--skip-secrets");
const skipSecrets = skipAt >= 0 && args.splice(skipAt, 1).length > 0;
const configAt = args.findIndex((arg) => arg === "--config" || arg === "-c");
const configArgs = configAt >= 0 ? ["--config", args.splice(configAt, 2)[1]] : [];
const env = { ...process.env, WRANGLER_SEND_METRICS: "false" };

/**
 * @param {string} title
 * @param {string} command
 * @param {string[]} commandArgs
 */
function step(title, command, commandArgs) {
  console.log(`\n── ${title}`);
  const result = spawnSync(command, commandArgs, { stdio: "inherit", env });
  if (result.status !== 0) {
    console.error(
      `\nnpm run deploy stopped: ${title} failed (nothing was deployed). Fix what it says above and run it again.`,
    );
    process.exit(result.status ?? 1);
  }
}

step(
  `check the config and ${skipSecrets ? "its local shape" : "the Worker's secrets"} (env ${environment})`,
  process.execPath,
  ["scripts/cli/index.mjs", "check", "--env", environment, skipSecrets ? "--config-only" : "--remote", ...configArgs],
);
const outdir = mkdtempSync(join(tmpdir(), "receiver-dry-run-"));
try {
  step("build it without deploying (wrangler deploy --dry-run)", "npx", [
    "wrangler",
    "deploy",
    "--dry-run",
    "--env",
    environment,
    "--outdir",
    outdir,
    ...configArgs,
  ]);
} finally {
  rmSync(outdir, { recursive: true, force: true });
}
step(`deploy (env ${environment})`, "npx", ["wrangler", "deploy", "--env", environment, ...configArgs, ...args]);

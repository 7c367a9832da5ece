#!/usr/bin/env node
// `npm start`: create .dev.vars from the committed example on first run, apply local D1 migrations, run wrangler dev.
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync } from "node:fs";

const [major, minor] = process.versions.node.split(".").map(Number);
if (major < 22 || (major === 22 && minor < 12)) {
  console.error(`Node ${process.versions.node} is too old: wrangler needs Node >= 22.12.`);
  process.exit(1);
}
if (!existsSync(".dev.vars")) {
  copyFileSync(".dev.vars.example", ".dev.vars");
  console.log("Created .dev.vars from .dev.vars.example (local secrets for the demo source).");
}
const env = { ...process.env, WRANGLER_SEND_METRICS: "false" };
const run = (args) => {
  const result = spawnSync("npx", ["wrangler", ...args], { stdio: "inherit", env });
  if (result.status !== 0) process.exit(result.status ?? 1);
};
const devArgs = process.argv.slice(2);
// The migrations must land in the same local state directory wrangler dev will read.
const persistAt = devArgs.findIndex((arg) => arg === "--persist-to" || arg.startsWith("--persist-to="));
const persistArgs = persistAt < 0 ? [] : devArgs[persistAt].includes("=") ? [devArgs[persistAt]] : devArgs.slice(persistAt, persistAt + 2);
run(["d1", "migrations", "apply", "DB", "--local", ...persistArgs]);
run(["dev", "--port", process.env.PORT ?? "8787", ...devArgs]);

// `npm run test:quick`: the inner loop. Lints the files changed against main (committed, staged, unstaged and new),
// then runs the vitest files that import them (`vitest related`: a changed test file runs itself, a changed module
// runs every test file whose import graph reaches it) and any changed `node --test` file (test/cli, test/http,
// test/browser) on its own. `npm test` stays the gate before landing: this skips the typecheck, the other runners
// and every test the change does not reach.
//
//   npm run test:quick                  # against main
//   npm run test:quick -- --base HEAD~3 # against another commit
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { resolve } from "node:path";

const ROOT = resolve(import.meta.dirname, "..");
const baseFlag = process.argv.indexOf("--base");
const baseRef = baseFlag === -1 ? "main" : process.argv[baseFlag + 1];
if (!baseRef) fail("--base needs a commit or branch");

function git(/** @type {string[]} */ args) {
  const result = spawnSync("git", args, { cwd: ROOT, encoding: "utf8" });
  if (result.status !== 0) fail(`git ${args.join(" ")}: ${result.stderr.trim()}`);
  return result.stdout.split("\n").filter(Boolean);
}

function fail(/** @type {string} */ message) {
  console.error(`test:quick: ${message}`);
  process.exit(2);
}

function run(/** @type {string} */ label, /** @type {string} */ command, /** @type {string[]} */ args) {
  console.log(`\n== ${label}: ${command} ${args.join(" ")}`);
  const result = spawnSync(command, args, { cwd: ROOT, stdio: "inherit" });
  if (result.status !== 0) {
    console.error(`test:quick: ${label} failed`);
    process.exit(result.status ?? 1);
  }
}

const [mergeBase] = git(["merge-base", "HEAD", baseRef]);
const changed = [
  ...new Set([...git(["diff", "--name-only", mergeBase]), ...git(["ls-files", "--others", "--exclude-standard"])]),
]
  .filter((path) => existsSync(resolve(ROOT, path)))
  .sort();

if (changed.length === 0) {
  console.log(`test:quick: nothing changed against ${baseRef}`);
  process.exit(0);
}
console.log(`test:quick: ${changed.length} file(s) changed against ${baseRef} (${mergeBase.slice(0, 8)})`);

// What every test reads without importing it: vitest cannot trace it, so say so rather than pass in silence.
const untraced = changed.filter((path) =>
  /^(wrangler\.toml|vitest\.config\.ts|migrations\/|test\/fixtures\/|test\/setup\/|package\.json)/.test(path),
);
if (untraced.length > 0)
  console.log(
    `\ntest:quick: ${untraced.join(", ")} reach every test and no import shows it: run npm test (or npx vitest run <area>)`,
  );
// The CLI's tests run it as a child process, so no import leads from a CLI module to them either.
const cliModules = changed.filter((path) => path.startsWith("scripts/cli/"));
if (cliModules.length > 0)
  console.log(`\ntest:quick: ${cliModules.join(", ")}: the CLI's tests run it as a user does: run npm run test:cli`);

const npx = process.platform === "win32" ? "npx.cmd" : "npx";
const linted = changed.filter((path) => /\.(ts|mts|js|mjs|json)$/.test(path));
if (linted.length > 0) run("lint", npx, ["biome", "check", "--no-errors-on-unmatched", ...linted]);

// Test runners outside vitest: a changed file of theirs runs on its own (their suites start wrangler dev).
const nodeTests = [
  { pattern: /^test\/cli\/.*\.test\.mjs$/, args: ["--test"] },
  { pattern: /^test\/http\/.*\.http\.ts$/, args: ["--experimental-strip-types", "--test"] },
  { pattern: /^test\/browser\/.*\.browser\.ts$/, args: ["--experimental-strip-types", "--test"] },
];
for (const { pattern, args } of nodeTests) {
  const files = changed.filter((path) => pattern.test(path));
  if (files.length > 0) run("node --test", process.execPath, [...args, ...files]);
}

// Everything vitest can trace an import to; `--passWithNoTests`: a change only to docs or the CLI reaches none.
// The untraced files are left out: vitest takes a changed config for "everything", which is npm test's job.
const sources = changed.filter(
  (path) => /\.(ts|mts|js|mjs)$/.test(path) && !/^test\/(cli|http|browser)\//.test(path) && !untraced.includes(path),
);
if (sources.length > 0) run("vitest related", npx, ["vitest", "related", "--run", "--passWithNoTests", ...sources]);
else console.log("\ntest:quick: no changed module vitest can trace");

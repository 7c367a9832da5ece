#!/usr/bin/env node
// `node scripts/mutate.mjs [--only id,id] [--tests file,file] [--shard 1/2] [--skip-baseline] [--out file]`: the
// mutation pass (docs/testing.md, "Mutation pass").
// Applies each hand-written mutant of scripts/mutation/mutants.mjs to its source file, one at a time, runs the few
// test files named for it, and records whether a test failed (killed) or none did (survived). Opt-in and slow:
// never part of `npm test`.
//
// One Vitest instance serves the whole pass, so the workerd pool and the transformed modules are reused: each
// mutant costs one run of its test files, not a fresh Vitest start. The mutated file is invalidated in the module
// graph before its run and again once it is restored.
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { relative, resolve } from "node:path";
import { parseArgs } from "node:util";
import { createVitest } from "vitest/node";
import { MUTANTS } from "./mutation/mutants.mjs";

const { values: args } = parseArgs({
  options: {
    only: { type: "string" },
    out: { type: "string", default: "scripts/mutation/results.json" },
    "timeout-seconds": { type: "string", default: "300" },
    // Only when the same test files were just seen passing (a re-run of some mutants): the baseline is the slow part.
    "skip-baseline": { type: "boolean", default: false },
    // "1/2": every second mutant from the first, to split one pass over two copies of the repository.
    shard: { type: "string", default: "1/1" },
    // Only these of each mutant's test files: re-checking survivors against new tests alone (the others already
    // let them through).
    tests: { type: "string" },
  },
});
const timeoutMs = Number(args["timeout-seconds"]) * 1000;
const only = args.only ? new Set(args.only.split(",")) : null;
const [shardNumber = 1, shardCount = 1] = args.shard.split("/").map(Number);
const onlyTests = args.tests ? new Set(args.tests.split(",")) : null;
const mutants = MUTANTS.filter((mutant) => !only || only.has(mutant.id))
  .filter((_, index) => index % shardCount === shardNumber - 1)
  .map((mutant) => (onlyTests ? { ...mutant, tests: mutant.tests.filter((file) => onlyTests.has(file)) } : mutant))
  .filter((mutant) => mutant.tests.length > 0);
for (const id of only ?? []) if (!MUTANTS.some((mutant) => mutant.id === id)) fail(`no mutant is called ${id}`);

const files = [...new Set(mutants.map((mutant) => mutant.file))];
// A file with uncommitted changes would be restored to the mutated run's copy of them: refuse instead.
try {
  execFileSync("git", ["diff", "--quiet", "--", ...files]);
} catch {
  fail(`uncommitted changes in ${files.join(" ")}: commit them first`);
}
/** @type {Map<string, string>} */
const originals = new Map(files.map((file) => [file, readFileSync(file, "utf8")]));
/** @param {string} file */
const originalOf = (file) => /** @type {string} */ (originals.get(file));
for (const mutant of mutants) {
  const occurrences = originalOf(mutant.file).split(mutant.from).length - 1;
  if (occurrences !== 1) fail(`${mutant.id}: the original snippet occurs ${occurrences} times in ${mutant.file}`);
  if (mutant.from === mutant.to) fail(`${mutant.id}: the mutant changes nothing`);
}

/** Puts every file back as committed; safe to call at any moment, more than once. */
function restoreAll() {
  for (const [file, text] of originals) if (readFileSync(file, "utf8") !== text) writeFileSync(file, text);
}
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"])
  process.on(signal, () => {
    restoreAll();
    process.exit(130);
  });
process.on("exit", restoreAll);

const vitest = await createVitest("test", { watch: false, reporters: [{}], bail: 1, passWithNoTests: false });

/** What failed in the latest run: "<file> > <test>: <first line of its error>", so a kill can be checked. */
/** @type {string[]} */
let lastFailures = [];

/** @param {unknown} error */
function messageOf(error) {
  const text = error && typeof error === "object" && "message" in error ? String(error.message) : String(error);
  return (text.split("\n")[0] ?? "").slice(0, 200);
}

/** @param {readonly import("vitest/node").TestModule[]} testModules */
function failedTests(testModules) {
  /** @type {string[]} */
  const failures = [];
  for (const module of testModules) {
    const file = relative(process.cwd(), module.moduleId);
    for (const test of module.children.allTests("failed"))
      failures.push(`${file} > ${test.fullName}: ${messageOf(test.result().errors?.[0])}`);
    for (const error of module.errors()) failures.push(`${file}: ${messageOf(error)}`);
  }
  return failures;
}

/**
 * Runs these test files against whatever the source files hold now: "passed", "failed" or "timeout".
 * @param {readonly string[]} testFiles
 * @param {string | null} changedFile
 * @returns {Promise<string>}
 */
async function runTests(testFiles, changedFile, limitMs = timeoutMs) {
  if (changedFile) {
    vitest.invalidateFile(resolve(changedFile));
    vitest.watcher.invalidates.add(resolve(changedFile));
  }
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;
  /** @type {Promise<string>} */
  const timedOut = new Promise((done) => {
    timer = setTimeout(() => done("timeout"), limitMs);
  });
  lastFailures = [];
  // The run's answer lists every test module Vitest has seen, earlier runs' included: a module that failed under an
  // earlier mutant would read as a kill of this one. Stale state is dropped, and only this run's files are judged.
  vitest.state.filesMap.clear();
  const requested = new Set(testFiles.map((file) => resolve(file)));
  const run = vitest.runTestFiles([...requested]).then(({ testModules, unhandledErrors }) => {
    const ran = testModules.filter((module) => requested.has(module.moduleId));
    lastFailures = [...failedTests(ran), ...unhandledErrors.map((error) => `unhandled: ${messageOf(error)}`)];
    if (ran.length !== requested.size) lastFailures.push(`ran ${ran.length} of ${requested.size} test files`);
    return lastFailures.length > 0 || ran.some((module) => !module.ok()) ? "failed" : "passed";
  });
  const outcome = await Promise.race([run, timedOut]);
  clearTimeout(timer);
  if (outcome === "timeout") {
    await vitest.cancelCurrentRun("keyboard-input");
    await run.catch(() => undefined);
  }
  return outcome;
}

/** @param {string} message @returns {never} */
function fail(message) {
  console.error(`mutate: ${message}`);
  process.exit(2);
}

// Without the mutants, every named test file must pass, or a "kill" would mean nothing.
const allTestFiles = [...new Set(mutants.flatMap((mutant) => mutant.tests))];
const baseline = args["skip-baseline"] ? "passed" : await runTests(allTestFiles, null, timeoutMs * allTestFiles.length);
if (baseline !== "passed") {
  await vitest.close();
  fail(`without any mutant the tests fail (${baseline}):\n  ${lastFailures.join("\n  ") || allTestFiles.join(" ")}`);
}

/** @type {{ id: string; class: string; file: string; status: string; seconds: number; killedBy?: string[] }[]} */
const results = [];
for (const mutant of mutants) {
  const startedAt = Date.now();
  let outcome;
  try {
    writeFileSync(
      mutant.file,
      originalOf(mutant.file).replace(mutant.from, () => mutant.to),
    );
    outcome = await runTests(mutant.tests, mutant.file);
  } catch (error) {
    outcome = `error: ${error instanceof Error ? error.message : String(error)}`;
  } finally {
    restoreAll();
    vitest.invalidateFile(resolve(mutant.file));
    vitest.watcher.invalidates.add(resolve(mutant.file));
  }
  const status = outcome === "failed" ? "killed" : outcome === "passed" ? "survived" : outcome;
  const seconds = Math.round((Date.now() - startedAt) / 1000);
  const killedBy = status === "killed" ? lastFailures.slice(0, 3) : undefined;
  results.push({ id: mutant.id, class: mutant.class, file: mutant.file, status, seconds, killedBy });
  console.log(`${status.padEnd(9)} ${mutant.id.padEnd(28)} ${mutant.class} (${seconds} s)`);
  for (const failure of killedBy ?? []) console.log(`            ${failure}`);
}
await vitest.close();
restoreAll();

const killed = results.filter((result) => result.status === "killed").length;
const summary = { killed, total: results.length, at: new Date().toISOString(), results };
writeFileSync(args.out, `${JSON.stringify(summary, null, 2)}\n`);
console.log(`\nscore: ${killed}/${results.length} killed; survivors:`);
for (const result of results.filter((r) => r.status !== "killed")) console.log(`  ${result.id} (${result.status})`);
try {
  execFileSync("git", ["diff", "--quiet", "--", ...files]);
} catch {
  fail("a source file still differs from its commit after the pass");
}
process.exit(0);

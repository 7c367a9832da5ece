/**
 * The CLI remembers wrangler's reading of a config (scripts/cli/config-cache.mjs): a command reads the same config
 * as wrangler does every time, however often it runs. A changed file is read anew, and what wrangler prints about a
 * config (its warnings) is printed by every command, not only the first.
 */
import assert from "node:assert/strict";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { after, test } from "node:test";
import { cli, makeWorkDir, ROOT, writeFile } from "./receiver.mjs";

const workDir = makeWorkDir();
after(() => rmSync(workDir, { recursive: true, force: true }));

/** The project's config, run from elsewhere: its paths made absolute, and `extra` first (top-level keys). */
function config(/** @type {string} */ extra = "") {
  const text = readFileSync(join(ROOT, "wrangler.toml"), "utf8")
    .replace(/^main\s*=\s*"([^"]+)"/m, (_, path) => `main = ${JSON.stringify(join(ROOT, path))}`)
    .replace(
      /^(\s*)migrations_dir\s*=\s*"([^"]+)"/gm,
      (_, indent, path) => `${indent}migrations_dir = ${JSON.stringify(join(ROOT, path))}`,
    );
  return `${extra}${text}`;
}

const source = (/** @type {string} */ name) =>
  `\n[vars.SOURCES.${name}]\nprovider = "github"\nsecrets = ["X"]\ndestination = "none"\n`;

test("the same path rewritten is read anew: check names the sources of the file as it is now", async () => {
  const path = writeFile(workDir, "changing.toml", config() + source("cli-before"));
  const before = await cli(["check", "--config-only", "--config", path]);
  assert.equal(before.code, 0, before.stdout + before.stderr);
  assert.match(before.stdout, /valid sources \(demo, cli-before\)/);
  writeFile(workDir, "changing.toml", config() + source("cli-after"));
  const now = await cli(["check", "--config-only", "--config", path]);
  assert.equal(now.code, 0, now.stdout + now.stderr);
  assert.match(now.stdout, /valid sources \(demo, cli-after\)/);
});

test("wrangler's warning about a config is printed by every command that reads it, not only the first", async () => {
  const path = writeFile(workDir, "warned.toml", config('surprise_field = "kept out of the cache"\n'));
  for (const run of [1, 2]) {
    const result = await cli(["check", "--config-only", "--config", path]);
    assert.equal(result.code, 0, result.stdout + result.stderr);
    assert.match(
      result.stdout + result.stderr,
      /Unexpected fields found in top-level field: "surprise_field"/,
      `run ${run} did not print wrangler's warning`,
    );
  }
});

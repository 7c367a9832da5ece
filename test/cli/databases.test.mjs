/**
 * Several receipt databases, as a user sets them up: `check` refuses a source whose `database` the config does not
 * bind, and `npm run db:migrate:local` (scripts/migrate.mjs) migrates every bound database, not only DB.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { cli, makeWorkDir, ROOT, testConfig, testDevVars, writeFile } from "./receiver.mjs";

const workDir = makeWorkDir();
after(() => rmSync(workDir, { recursive: true, force: true }));

const SECOND_DATABASE = [
  "[[d1_databases]]",
  'binding = "DB_EU"',
  'database_name = "webhook-receipts-eu"',
  'database_id = "00000000-0000-0000-0000-0000000000e1"',
  `migrations_dir = ${JSON.stringify(join(ROOT, "migrations"))}`,
  "",
].join("\n");
const EU_SOURCE = [
  "[vars.SOURCES.cli-eu]",
  'provider = "standard-webhooks"',
  'secrets = ["DEMO_WEBHOOK_SECRET"]',
  'database = "DB_EU"',
  "",
].join("\n");

describe("a source on another database", () => {
  test("check fails naming the missing binding, and passes once the config binds it", async () => {
    const devVars = writeFile(workDir, ".dev.vars", testDevVars());
    const unbound = writeFile(workDir, "unbound.toml", `${testConfig(9)}\n${EU_SOURCE}`);
    const refused = await cli(["check", "--config", unbound, "--dev-vars", devVars]);
    assert.equal(refused.code, 1, refused.stdout + refused.stderr);
    assert.match(
      refused.stdout,
      /^FAIL\s+SOURCES\.cli-eu: database "DB_EU" is not a D1 binding of this Worker \(add a \[\[d1_databases\]\] entry with binding = "DB_EU"\)$/m,
    );

    const bound = writeFile(workDir, "bound.toml", `${testConfig(9)}\n${EU_SOURCE}\n${SECOND_DATABASE}`);
    const accepted = await cli(["check", "--config", bound, "--dev-vars", devVars]);
    assert.equal(accepted.code, 0, accepted.stdout + accepted.stderr);
    assert.match(accepted.stdout, /^ok\s+.*valid sources \(.*cli-eu.*\)$/m);
  });

  test("db:migrate:local applies the migrations to every bound database", () => {
    const config = writeFile(workDir, "two.toml", `${testConfig(9)}\n${SECOND_DATABASE}`);
    const state = join(workDir, "state");
    const migrate = spawnSync(
      process.execPath,
      [join(ROOT, "scripts/migrate.mjs"), "--local", "--config", config, "--persist-to", state],
      { cwd: workDir, encoding: "utf8" },
    );
    assert.equal(migrate.status, 0, migrate.stdout + migrate.stderr);
    for (const binding of ["DB", "DB_EU"]) {
      const tables = spawnSync(
        "npx",
        [
          "wrangler",
          "d1",
          "execute",
          binding,
          "--local",
          "--config",
          config,
          "--persist-to",
          state,
          "--json",
          "--command",
          "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('receipts', 'accounts') ORDER BY name",
        ],
        { cwd: ROOT, encoding: "utf8", env: { ...process.env, WRANGLER_SEND_METRICS: "false" } },
      );
      assert.equal(tables.status, 0, tables.stdout + tables.stderr);
      const [{ results }] = JSON.parse(tables.stdout.slice(tables.stdout.indexOf("[")));
      assert.deepEqual(
        results.map((/** @type {{ name: string }} */ row) => row.name),
        ["accounts", "receipts"],
        `${binding} is not migrated`,
      );
    }
  });
});

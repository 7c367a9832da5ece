/**
 * `cli sql` against a real receiver whose receipts are spread over two D1 databases (DB and DB_SECOND): every recipe
 * of docs/audit.md, taken from the document as it is printed, and a few queries that only merge right when the
 * rows are merged before the query runs (GROUP BY, ORDER BY … LIMIT, joins across the databases), must give the rows
 * the same query gives on ONE database holding all the fixture rows (a SQLite built here from the migrations).
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { after, before, describe, test } from "node:test";
import { copyMigratedState } from "./migrated-state.mjs";
import { cli, makeWorkDir, ROOT, startReceiver, testConfig, testDevVars, writeFile } from "./receiver.mjs";
import { FIXTURE_ROWS, insertStatements } from "./sql-fixture.mjs";

const workDir = makeWorkDir();
/** @type {Awaited<ReturnType<typeof startReceiver>>} */
let receiver;
let project = /** @type {string[]} */ ([]);
let env = /** @type {Record<string, string>} */ ({});

const SECOND_DATABASE = [
  "[[d1_databases]]",
  'binding = "DB_SECOND"',
  'database_name = "webhook-receipts-second"',
  'database_id = "00000000-0000-0000-0000-0000000000e2"',
  `migrations_dir = ${JSON.stringify(join(ROOT, "migrations"))}`,
  "",
].join("\n");

/** The recipes of docs/audit.md by name, as the document prints them. */
function recipes() {
  const markdown = readFileSync(join(ROOT, "docs", "audit.md"), "utf8");
  return new Map(
    [...markdown.matchAll(/<!-- recipe: ([a-z0-9-]+) -->\s*```sql\n([\s\S]*?)```/g)].map((match) => [
      match[1],
      match[2].trim(),
    ]),
  );
}

/** One database holding every fixture row: the project's migrations, then the rows. */
function referenceDatabase() {
  const reference = new DatabaseSync(":memory:");
  const migrations = join(ROOT, "migrations");
  for (const file of readdirSync(migrations)
    .filter((name) => name.endsWith(".sql"))
    .sort())
    reference.exec(readFileSync(join(migrations, file), "utf8"));
  reference.exec(insertStatements(FIXTURE_ROWS));
  return reference;
}

/** The rows as `cli sql --json` prints them: a blob as base64. */
function asPrinted(/** @type {Record<string, unknown>[]} */ rows) {
  return rows.map((row) =>
    Object.fromEntries(
      Object.entries(row).map(([name, value]) => [
        name,
        value instanceof Uint8Array ? Buffer.from(value).toString("base64") : value,
      ]),
    ),
  );
}

async function sqlJson(/** @type {string} */ query, /** @type {string[]} */ extra = []) {
  const run = await cli(["sql", query, "--json", ...extra, ...project], env);
  assert.equal(run.code, 0, `${query}\n${run.stdout}${run.stderr}`);
  return JSON.parse(run.stdout);
}

before(async () => {
  const configPath = writeFile(workDir, "wrangler.toml", `${testConfig(9)}\n${SECOND_DATABASE}`);
  const envFile = writeFile(workDir, ".dev.vars", testDevVars());
  const state = join(workDir, "state");
  const wrangler = (/** @type {string[]} */ args) =>
    execFileSync(
      join(ROOT, "node_modules", ".bin", "wrangler"),
      [...args, "--config", configPath, "--persist-to", state],
      {
        cwd: ROOT,
        env: { ...process.env, CI: "true", WRANGLER_SEND_METRICS: "false" },
        stdio: "pipe",
      },
    );
  // DB as every receiver starts it (migrated once per set of migrations), DB_SECOND migrated here.
  copyMigratedState(ROOT, state, process.env);
  for (const database of /** @type {const} */ (["DB", "DB_SECOND"])) {
    if (database === "DB_SECOND") wrangler(["d1", "migrations", "apply", database, "--local"]);
    const seed = writeFile(
      workDir,
      `${database}.sql`,
      insertStatements(FIXTURE_ROWS.filter((entry) => entry.database === database)),
    );
    wrangler(["d1", "execute", database, "--local", "--file", seed, "--yes"]);
  }
  receiver = await startReceiver({ configPath, envFile, workDir });
  project = ["--config", configPath, "--dev-vars", envFile];
  env = { RECEIVER_URL: receiver.url };
});

after(async () => {
  await receiver?.stop();
  rmSync(workDir, { recursive: true, force: true });
});

describe("cli sql over two receipt databases", () => {
  test("every docs/audit.md recipe gives the rows one database holding them all gives", async () => {
    const reference = referenceDatabase();
    const found = recipes();
    assert.deepEqual([...found.keys()].sort(), [
      "dead-since",
      "life-of-one-event",
      "oldest-pending",
      "per-source-per-hour",
      "reconciled",
    ]);
    for (const [name, recipe] of found) {
      const before = asPrinted(reference.prepare(recipe).all());
      assert.ok(before.length > 0, `${name}: the fixture gives it rows to compare`);
      const printed = await sqlJson(recipe);
      // oldest-pending counts minutes up to now: the one-database answer from just before or just after the run.
      const afterwards = asPrinted(reference.prepare(recipe).all());
      assert.ok(
        JSON.stringify(printed) === JSON.stringify(before) || JSON.stringify(printed) === JSON.stringify(afterwards),
        `${name}:\ncli sql:  ${JSON.stringify(printed)}\none database: ${JSON.stringify(before)}`,
      );
    }
  });

  test("aggregates, ORDER BY … LIMIT, joins and bodies see the rows of both databases as one", async () => {
    const reference = referenceDatabase();
    for (const query of [
      "SELECT source, status, COUNT(*) AS receipts FROM receipts GROUP BY source, status ORDER BY source, status",
      "SELECT id, source, event_key FROM receipts ORDER BY received_at DESC LIMIT 4",
      "SELECT r.event_key, COUNT(a.attempt_number) AS attempt_rows, MAX(a.finished_at) AS last_finished FROM receipts r LEFT JOIN attempts a ON a.receipt_id = r.id GROUP BY r.id ORDER BY r.id",
      "SELECT r.event_key, q.reason, q.copies FROM quarantine q JOIN receipts r ON r.source = q.source AND r.event_key = q.event_key",
      "SELECT d.route, d.status, r.event_key FROM deliveries d JOIN receipts r ON r.id = d.receipt_id",
      "SELECT event_key, body FROM receipts WHERE body IS NOT NULL ORDER BY event_key",
      "SELECT source, SUM(length(body)) AS bytes FROM quarantine GROUP BY source",
    ]) {
      assert.deepEqual(await sqlJson(query), asPrinted(reference.prepare(query).all()), query);
    }
  });

  test("--source, --since and --until copy only the rows of that source and range", async () => {
    const reference = referenceDatabase();
    const query = "SELECT source, event_key FROM receipts ORDER BY id";
    assert.deepEqual(
      await sqlJson(query, ["--source", "shipping", "--since", "2026-11-01T10:45:00Z", "--until", "2026-11-05"]),
      asPrinted(
        reference
          .prepare(
            `${query.replace(" ORDER", " WHERE source = 'shipping' AND received_at >= unixepoch('2026-11-01T10:45:00Z') * 1000 AND received_at < unixepoch('2026-11-05') * 1000 ORDER")}`,
          )
          .all(),
      ),
    );
    // A receipt's attempts go with it: those of billing's receipts, in both databases.
    assert.deepEqual(
      await sqlJson("SELECT receipt_id, attempt_number FROM attempts ORDER BY 1, 2", ["--source", "billing"]),
      asPrinted(
        reference
          .prepare(
            "SELECT receipt_id, attempt_number FROM attempts WHERE receipt_id IN (SELECT id FROM receipts WHERE source = 'billing') ORDER BY 1, 2",
          )
          .all(),
      ),
    );
    // The fixture is a month old: nothing arrived in the last day.
    assert.deepEqual(await sqlJson("SELECT COUNT(*) AS receipts FROM receipts", ["--since", "24h"]), [{ receipts: 0 }]);
  });

  test("prints a table by default", async () => {
    const run = await cli(
      ["sql", "SELECT source, COUNT(*) AS receipts FROM receipts GROUP BY source ORDER BY source", ...project],
      env,
    );
    assert.equal(run.code, 0, run.stdout + run.stderr);
    assert.equal(
      run.stdout,
      [
        "source              receipts",
        "------------------  --------",
        "billing                    8",
        "billing-before-log         1",
        "shipping                   3",
        "(3 rows)",
        "",
      ].join("\n"),
    );
  });

  test("refuses what is not one read-only statement over the receipt tables, and a copy past --max-rows", async () => {
    for (const [query, code, message] of [
      ["DELETE FROM receipts", 2, /read-only statements .* would write, and is refused/],
      ["SELECT 1; DELETE FROM receipts", 2, /one statement at a time/],
      ["SELECT * FROM alerts", 2, /reads the receipt tables .*, not alerts: query that table in DB with/],
      ["SELEC 1", 2, /does not compile: near "SELEC": syntax error/],
      ["   ", 2, /the query is empty/],
    ]) {
      const run = await cli(["sql", String(query), ...project], env);
      assert.equal(run.code, code, `${query}\n${run.stdout}${run.stderr}`);
      assert.match(run.stderr, /** @type {RegExp} */ (message), String(query));
    }
    const capped = await cli(["sql", "SELECT COUNT(*) FROM receipts", "--max-rows", "5", ...project], env);
    assert.equal(capped.code, 1, capped.stdout + capped.stderr);
    assert.match(capped.stderr, /reads more than 5 rows .*: narrow it with --since\/--until or --source/);
    // Nothing was written: every receipt is still there.
    assert.deepEqual(await sqlJson("SELECT COUNT(*) AS receipts FROM receipts"), [{ receipts: 12 }]);
  });
});

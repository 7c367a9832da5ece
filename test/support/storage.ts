import { listDurableObjectIds, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, beforeEach, expect } from "vitest";
import { CLAIM_COLUMNS, partitionTable } from "../../src/claims/partitions";
import { shardCount, shardFor, shardIndex } from "../../src/claims/routing";
import type { ClaimShard } from "../../src/claims/shard";

/**
 * Looking straight into the real storage the pipeline writes: the claim shards' SQLite and D1. Tests use these
 * to prove "nothing was written" and "exactly once" from the stored state itself, never from the HTTP answer.
 */

export interface ShardClaimRow {
  receiptId: string;
  payloadSha256: string;
  relayed: boolean;
  /** False once relayed: the shard keeps only the key and hash, the dedupe tombstone. */
  hasBody: boolean;
}

/**
 * Every claim a shard holds, whichever time partition keeps it (src/claims/partitions.ts), as a subquery to select
 * from in place of one table.
 */
export function everyClaim(sql: SqlStorage): string {
  const tables = sql
    .exec<{ generation: number }>("SELECT generation FROM claim_partitions")
    .toArray()
    .map(({ generation }) => `SELECT ${CLAIM_COLUMNS} FROM ${partitionTable(generation)}`);
  return `(${tables.join(" UNION ALL ")})`;
}

/** A shard's unrelayed claims, read without the shard's meters so that polling does not count as a drain's work. */
export function unrelayedClaims(stub: DurableObjectStub<ClaimShard>): Promise<number> {
  return runInDurableObject(
    stub,
    (_instance, state) =>
      state.storage.sql
        .exec<{ n: number }>(`SELECT COUNT(*) AS n FROM ${everyClaim(state.storage.sql)} WHERE relay_pending = 1`)
        .one().n,
  );
}

/** The claim row for a key in the shard that owns it (under the given env's shard count), or null. */
export async function shardClaim(source: string, eventKey: string, shardEnv: Env = env): Promise<ShardClaimRow | null> {
  return runInDurableObject(shardFor(shardEnv, source, eventKey), (_instance: ClaimShard, state) => {
    const row = state.storage.sql
      .exec<{ receiptId: string; payloadSha256: string; relayPending: number; hasBody: number }>(
        `SELECT receipt_id AS receiptId, payload_sha256 AS payloadSha256, relay_pending AS relayPending, body IS NOT NULL AS hasBody
         FROM ${everyClaim(state.storage.sql)} WHERE relay_pending IN (0, 1) AND source = ? AND event_key = ?`,
        source,
        eventKey,
      )
      .toArray()[0];
    return row
      ? {
          receiptId: row.receiptId,
          payloadSha256: row.payloadSha256,
          relayed: row.relayPending === 0,
          hasBody: row.hasBody === 1,
        }
      : null;
  });
}

/** Quarantine rows still in (or already relayed from) the owning shard's outbox, for one key. */
export async function shardQuarantineCount(source: string, eventKey: string, shardEnv: Env = env): Promise<number> {
  return runInDurableObject(
    shardFor(shardEnv, source, eventKey),
    (_instance: ClaimShard, state) =>
      state.storage.sql
        .exec<{ count: number }>(
          "SELECT COUNT(*) AS count FROM quarantine_outbox WHERE source = ? AND event_key = ?",
          source,
          eventKey,
        )
        .one().count,
  );
}

/** Every claim shard that exists (has storage), as stubs. */
export async function allShards(): Promise<DurableObjectStub<ClaimShard>[]> {
  const ids = await listDurableObjectIds(env.CLAIM_SHARDS);
  return ids.map((shardId) => env.CLAIM_SHARDS.get(shardId));
}

export async function shardIdList(): Promise<string[]> {
  return (await listDurableObjectIds(env.CLAIM_SHARDS)).map((shardId) => shardId.toString()).sort();
}

/**
 * Settling is per test: a test waits for the receipts it created, never for everything in the database. One test
 * that leaves work unfinished then fails on its own, naming that work, instead of turning every later test in its
 * file into a hook timeout that hides the real failure. "Created by this test" is "claimed since it began": tests
 * in a file run one after another, and every claim is stamped with the time it was received.
 */
let testBegan: number | null = null;

/**
 * How long a test's work may take to settle, generous on purpose: a quiet run settles in well under a second and
 * never waits this out, while at a load average of 20 one poll of every shard has taken over 10 s (budget.test.ts
 * failed its 18 s hook with its own assertions passing). Tests hold what happened, never how fast.
 */
const SETTLE_MS = 60_000;
/** The hook's own limit, past SETTLE_MS with room for a slow last poll: unfinished work fails with the list below, not a bare timeout. */
const SETTLE_HOOK_MS = SETTLE_MS + 10_000;

/**
 * Once per test file: marks where each test begins, and when it ends waits for the receipts it created (see
 * settle). A test then starts with the work of the tests before it finished, as long as they passed.
 */
export function settleEachTest(): void {
  beforeEach(() => {
    testBegan = Date.now();
  });
  afterEach(() => settle(), SETTLE_HOOK_MS);
}

/**
 * Waits until every receipt the current test created is relayed by its shard and finished in D1 (and every
 * quarantine it caused is relayed). Needs settleEachTest() in the file; work of earlier tests is not waited for.
 */
export async function settle(timeoutMs = SETTLE_MS): Promise<void> {
  if (testBegan === null)
    throw new Error("settle() waits for the current test's receipts: call settleEachTest() once in this test file");
  const since = testBegan;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const unfinished = await unfinishedSince(since);
    if (unfinished.length === 0) return;
    if (Date.now() > deadline) {
      throw new Error(
        `this test's work did not settle within ${timeoutMs} ms: ${unfinished.slice(0, 10).join("; ")}${unfinished.length > 10 ? `; and ${unfinished.length - 10} more` : ""}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * What this test started that is not finished, from `since` on: receipts in flight in D1, else claims and quarantines
 * a shard has not relayed yet. Empty only when the shards were read first and D1 after them, so a claim relayed
 * between the two reads is still seen.
 */
async function unfinishedSince(since: number): Promise<string[]> {
  // D1 alone while its receipts are in flight: one query per poll, rather than one call to every shard.
  const inFlight = await inFlightSince(since);
  if (inFlight.length > 0) return inFlight;
  const unrelayed = (
    await Promise.all(
      (
        await allShards()
      ).map((shard) =>
        runInDurableObject(shard, (_instance: ClaimShard, state) =>
          state.storage.sql
            .exec<{ what: string; source: string; eventKey: string }>(
              `SELECT 'unrelayed claim' AS what, source, event_key AS eventKey FROM ${everyClaim(state.storage.sql)} WHERE relay_pending = 1 AND received_at >= ?1
               UNION ALL
               SELECT 'unrelayed quarantine' AS what, source, event_key AS eventKey FROM quarantine_outbox WHERE relayed_at IS NULL AND received_at >= ?1
               UNION ALL
               SELECT 'unrelayed quarantine count' AS what, source, event_key AS eventKey FROM quarantine_overflow WHERE relayed_at IS NULL`,
              since,
            )
            .toArray(),
        ),
      ),
    )
  ).flat();
  if (unrelayed.length > 0) return unrelayed.map((row) => `${row.what} ${row.source}/${row.eventKey}`);
  return inFlightSince(since);
}

async function inFlightSince(since: number): Promise<string[]> {
  const { results } = await env.DB.prepare(
    "SELECT source, event_key AS eventKey, status FROM receipts WHERE received_at >= ? AND status IN ('pending', 'processing') ORDER BY id",
  )
    .bind(since)
    .all<{ source: string; eventKey: string; status: string }>();
  return results.map((row) => `${row.status} receipt ${row.source}/${row.eventKey}`);
}

export interface WorldSnapshot {
  shards: string[];
  /** SHA-256 over every row of every table in every shard and in D1, table by table. */
  fingerprint: Record<string, string>;
}

/** Longer than the queue's batch timeout (1 s): anything a request set going has had time to land. */
const QUIET_MS = 1_200;

/** The snapshot again after a quiet period, equal to `before`: nothing was written anywhere, not just "not yet". */
export async function expectUnchanged(before: WorldSnapshot): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, QUIET_MS));
  expect(await snapshot()).toEqual(before);
}

/**
 * The operator audit log (src/admin/audit-log/) records the admin request itself, allowed or refused: it is not the
 * pipeline's writing, and a test of an admin action asserts its row there by name.
 */
const OPERATOR_AUDIT_LOG = "operator_actions";

/**
 * The content of everything the pipeline can write, as one hash per table. Equal snapshots before and after a
 * request (see expectUnchanged): it wrote nothing, anywhere.
 */
export async function snapshot(): Promise<WorldSnapshot> {
  const fingerprint: Record<string, string> = {};
  for (const shard of await allShards()) {
    const shardId = shard.id.toString();
    const tables = await runInDurableObject(shard, (_instance: ClaimShard, state) => {
      const sql = state.storage.sql;
      const names = sql
        .exec<{ name: string }>(
          "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%' ORDER BY name",
        )
        .toArray()
        .map((row) => row.name);
      return names.map((name) => ({ name, rows: canonicalRows(sql.exec(`SELECT * FROM "${name}"`).toArray()) }));
    });
    for (const table of tables) fingerprint[`shard ${shardId} ${table.name}`] = await sha256(table.rows);
  }
  const { results: d1Tables } = await env.DB.prepare(
    "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%' AND name NOT IN ('d1_migrations', ?) ORDER BY name",
  )
    .bind(OPERATOR_AUDIT_LOG)
    .all<{ name: string }>();
  for (const { name } of d1Tables) {
    const { results } = await env.DB.prepare(`SELECT * FROM "${name}"`).all();
    fingerprint[`d1 ${name}`] = await sha256(canonicalRows(results));
  }
  return { shards: await shardIdList(), fingerprint };
}

/** Rows as text in a fixed order, whatever order the table returned them in. */
function canonicalRows(rows: readonly unknown[]): string {
  return rows
    .map((row) => JSON.stringify(row, bytesAsHex))
    .sort()
    .join("\n");
}

function bytesAsHex(_key: string, value: unknown): unknown {
  if (value instanceof ArrayBuffer)
    return [...new Uint8Array(value)].map((byte) => byte.toString(16).padStart(2, "0")).join("");
  return value;
}

async function sha256(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((byte) => byte.toString(16).padStart(2, "0")).join("");
}

export async function receiptsFor(source: string, eventKey: string) {
  const { results } = await env.DB.prepare(
    "SELECT id AS receiptId, status, attempts, payload_sha256 AS payloadSha256 FROM receipts WHERE source = ? AND event_key = ?",
  )
    .bind(source, eventKey)
    .all<{ receiptId: string; status: string; attempts: number; payloadSha256: string }>();
  return results;
}

export async function quarantineFor(source: string, eventKey: string) {
  const { results } = await env.DB.prepare(
    "SELECT id AS quarantineId, reason, original_receipt_id AS originalReceiptId, payload_sha256 AS payloadSha256 FROM quarantine WHERE source = ? AND event_key = ?",
  )
    .bind(source, eventKey)
    .all<{ quarantineId: string; reason: string; originalReceiptId: string; payloadSha256: string }>();
  return results;
}

/** Receipts of this key whose outcome committed (the guard that stops a second effect): 1 once processed. */
export async function processedCount(source: string, eventKey: string): Promise<number> {
  const row = await env.DB.prepare(
    "SELECT COUNT(*) AS count FROM receipts WHERE source = ? AND event_key = ? AND committed_at IS NOT NULL",
  )
    .bind(source, eventKey)
    .first<{ count: number }>();
  return row!.count;
}

/** Event keys that all belong to one claim shard (under the env's shard count), so one injected failure covers them all. */
export function keysInOneShard(prefix: string, count: number): string[] {
  const shards = shardCount(env);
  const target = shardIndex(`${prefix}_0`, shards);
  const keys: string[] = [];
  for (let attempt = 0; keys.length < count; attempt++) {
    const eventKey = `${prefix}_${attempt}`;
    if (shardIndex(eventKey, shards) === target) keys.push(eventKey);
  }
  return keys;
}

/**
 * Receipts relayed more than 10 s after they arrived, among those `where` picks (SQL over `receipts`): each also
 * enters the late-relay index, one D1 row more on insert and on delete. A loaded machine makes it happen, so the
 * budget tests count it rather than assume it away.
 */
export async function lateRelays(where: string): Promise<number> {
  const late = await env.DB.prepare(
    `SELECT COUNT(*) AS n FROM receipts WHERE ${where} AND relayed_at > received_at + 10000`,
  ).first<{ n: number }>();
  return late?.n ?? 0;
}

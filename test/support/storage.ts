import { listDurableObjectIds, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { shardCount, shardFor, shardIndex } from "../../src/claims/routing";
import type { ClaimShard } from "../../src/claims/shard";
import { eventually } from "./deliveries";

/**
 * Looking straight into the real storage the pipeline writes: the claim shards' SQLite and D1. Tests use these
 * to prove "nothing was written" and "exactly once" from the stored state itself, never from the HTTP answer.
 */

export interface ShardClaimRow {
  receiptId: string;
  payloadSha256: string;
  relayedAt: number | null;
  /** False once relayed: the shard keeps only the key and hash, the dedupe tombstone. */
  hasBody: boolean;
}

/** The claim row for a key in the shard that owns it (under the given env's shard count), or null. */
export async function shardClaim(source: string, eventKey: string, shardEnv: Env = env): Promise<ShardClaimRow | null> {
  return runInDurableObject(shardFor(shardEnv, source, eventKey), (_instance: ClaimShard, state) => {
    const row = state.storage.sql
      .exec<{ receiptId: string; payloadSha256: string; relayedAt: number | null; hasBody: number }>(
        `SELECT receipt_id AS receiptId, payload_sha256 AS payloadSha256, relayed_at AS relayedAt, body IS NOT NULL AS hasBody
         FROM claims WHERE source = ? AND event_key = ?`,
        source,
        eventKey,
      )
      .toArray()[0];
    return row ? { ...row, hasBody: row.hasBody === 1 } : null;
  });
}

/** Quarantine rows still in (or already relayed from) the owning shard's outbox, for one key. */
export async function shardQuarantineCount(source: string, eventKey: string, shardEnv: Env = env): Promise<number> {
  return runInDurableObject(shardFor(shardEnv, source, eventKey), (_instance: ClaimShard, state) =>
    state.storage.sql
      .exec<{ count: number }>("SELECT COUNT(*) AS count FROM quarantine_outbox WHERE source = ? AND event_key = ?", source, eventKey)
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

/** Waits until every shard has relayed everything it accepted, and D1 has nothing left in flight. */
export async function settle(timeoutMs = 20_000): Promise<void> {
  await eventually(
    async () => {
      for (const shard of await allShards()) {
        if ((await shard.unrelayedCount()) > 0) return undefined;
      }
      const inFlight = await env.DB.prepare("SELECT COUNT(*) AS count FROM receipts WHERE status IN ('pending', 'processing')").first<{
        count: number;
      }>();
      return inFlight?.count === 0 ? true : undefined;
    },
    timeoutMs,
    "every shard relayed and every receipt finished",
  );
}

export interface WorldSnapshot {
  shards: string[];
  shardClaims: number;
  shardQuarantines: number;
  receipts: number;
  quarantine: number;
  processedEvents: number;
  attempts: number;
  accounts: number;
  credits: number;
}

/** A count of everything the pipeline can write. Equal snapshots before and after a request: it wrote nothing. */
export async function snapshot(): Promise<WorldSnapshot> {
  let shardClaims = 0;
  let shardQuarantines = 0;
  for (const shard of await allShards()) {
    const counts = await runInDurableObject(shard, (_instance: ClaimShard, state) =>
      state.storage.sql
        .exec<{ claims: number; quarantines: number }>(
          "SELECT (SELECT COUNT(*) FROM claims) AS claims, (SELECT COUNT(*) FROM quarantine_outbox) AS quarantines",
        )
        .one(),
    );
    shardClaims += counts.claims;
    shardQuarantines += counts.quarantines;
  }
  const d1 = await env.DB.prepare(
    `SELECT (SELECT COUNT(*) FROM receipts) AS receipts, (SELECT COUNT(*) FROM quarantine) AS quarantine,
       (SELECT COUNT(*) FROM processed_events) AS processedEvents, (SELECT COUNT(*) FROM attempts) AS attempts,
       (SELECT COUNT(*) FROM accounts) AS accounts, (SELECT COALESCE(SUM(credits), 0) FROM accounts) AS credits`,
  ).first<Omit<WorldSnapshot, "shards" | "shardClaims" | "shardQuarantines">>();
  return { shards: await shardIdList(), shardClaims, shardQuarantines, ...d1! };
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

export async function processedCount(source: string, eventKey: string): Promise<number> {
  const row = await env.DB.prepare("SELECT COUNT(*) AS count FROM processed_events WHERE source = ? AND event_key = ?")
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

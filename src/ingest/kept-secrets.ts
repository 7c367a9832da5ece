import { and, desc, eq, sql } from "drizzle-orm";
import { sha256Hex } from "../crypto/digest";
import { utf8Bytes } from "../crypto/encoding";
import { database } from "../db/client";
import { keptSecrets } from "../db/schema";
import type { SourceSecret } from "../providers/types";

/**
 * Kept secrets: the ones senders hand over in a handshake (Asana's X-Hook-Secret, Notion's verification_token),
 * kept in D1's `handshake_secrets` (the table's older name; renaming it would need a migration). Only sources whose
 * adapter has `keptSecrets` read it, so every other source's acknowledgement path still touches no D1. Reads are cached per isolate for a minute; an empty answer is never
 * cached, and a cached list is re-read once when it verifies nothing (a hook registered in another isolate).
 *
 * The verify token that proves a handshake sits in the registered URL, so in logs: it is enough for a source's
 * first secret (the real sender's first handshake needs no operator step), never for replacing or adding to one.
 * A new secret handed over while the source has an active one is kept "pending" and verifies nothing until an
 * operator approves it; revoking removes one (src/admin/api/kept-secrets.ts).
 */

export type KeptSecretStatus = "active" | "pending";

/** What the admin API shows of a kept secret: never its value. */
export interface KeptSecretListing {
  fingerprint: string;
  status: KeptSecretStatus;
  receivedAt: number;
}

/** The newest this many active ones per source are tried: the verification budget bounds the rest anyway. */
const KEPT_PER_SOURCE = 8;
/** Pending ones kept per source; older ones are dropped, so a leaked token cannot grow the table without bound. */
const PENDING_PER_SOURCE = 8;
const CACHE_TTL_MS = 60_000;

const cache = new Map<string, { secrets: SourceSecret[]; readAt: number }>();

/** 16 hex characters of the secret's SHA-256: enough to tell kept secrets apart and to name one, useless to forge with. */
export async function secretFingerprint(secret: string): Promise<string> {
  return (await sha256Hex(utf8Bytes(secret))).slice(0, 16);
}

function asSecrets(rows: { secret: string; receivedAt: number }[]): SourceSecret[] {
  // The name is what logs and annotations could ever see: never the value.
  return rows.map((row) => ({ name: `handshake@${row.receivedAt}`, value: row.secret }));
}

/** The active kept secrets of a source, newest first: the only ones a delivery verifies against. */
export async function activeKeptSecrets(
  env: Pick<Env, "DB">,
  source: string,
  now: number,
  fresh = false,
): Promise<{ secrets: SourceSecret[]; cached: boolean }> {
  const hit = cache.get(source);
  if (!fresh && hit && now - hit.readAt < CACHE_TTL_MS) return { secrets: hit.secrets, cached: true };
  const rows = await database(env)
    .select({ secret: keptSecrets.secret, receivedAt: keptSecrets.receivedAt })
    .from(keptSecrets)
    .where(and(eq(keptSecrets.source, source), eq(keptSecrets.status, "active")))
    .orderBy(desc(keptSecrets.receivedAt))
    .limit(KEPT_PER_SOURCE);
  const secrets = asSecrets(rows);
  if (secrets.length > 0) cache.set(source, { secrets, readAt: now });
  else cache.delete(source);
  return { secrets, cached: false };
}

/**
 * Keeps a secret handed over in a proven handshake, in one statement so two first handshakes racing cannot both
 * become active: active when the source has no other active secret, else pending. A secret already kept keeps its
 * status and has its time refreshed. Answers the status it now has.
 */
export async function keepSecret(
  env: Pick<Env, "DB">,
  source: string,
  secret: string,
  now: number,
): Promise<KeptSecretStatus> {
  const db = database(env);
  const anotherIsActive = sql`EXISTS (SELECT 1 FROM ${keptSecrets} WHERE ${keptSecrets.source} = ${source} AND ${keptSecrets.status} = 'active' AND ${keptSecrets.secret} <> ${secret})`;
  const [kept] = await db
    .insert(keptSecrets)
    .values({
      source,
      secret,
      receivedAt: now,
      status: sql`CASE WHEN ${anotherIsActive} THEN 'pending' ELSE 'active' END`,
    })
    .onConflictDoUpdate({
      target: [keptSecrets.source, keptSecrets.secret],
      set: { receivedAt: sql`max(${keptSecrets.receivedAt}, excluded.received_at)` },
    })
    .returning({ status: keptSecrets.status });
  if (kept!.status === "pending") {
    await db.run(sql`DELETE FROM ${keptSecrets} WHERE ${keptSecrets.source} = ${source} AND ${keptSecrets.status} = 'pending'
      AND ${keptSecrets.secret} NOT IN (SELECT ${keptSecrets.secret} FROM ${keptSecrets} WHERE ${keptSecrets.source} = ${source}
        AND ${keptSecrets.status} = 'pending' ORDER BY ${keptSecrets.receivedAt} DESC LIMIT ${PENDING_PER_SOURCE})`);
  }
  cache.delete(source);
  return kept!.status;
}

async function keptRows(env: Pick<Env, "DB">, source: string) {
  const rows = await database(env)
    .select({ secret: keptSecrets.secret, status: keptSecrets.status, receivedAt: keptSecrets.receivedAt })
    .from(keptSecrets)
    .where(eq(keptSecrets.source, source))
    .orderBy(desc(keptSecrets.receivedAt));
  return Promise.all(rows.map(async (row) => ({ ...row, fingerprint: await secretFingerprint(row.secret) })));
}

const listing = ({ fingerprint, status, receivedAt }: KeptSecretListing): KeptSecretListing => ({
  fingerprint,
  status,
  receivedAt,
});

/** Every kept secret of a source, newest first, by fingerprint. */
export async function listKeptSecrets(env: Pick<Env, "DB">, source: string): Promise<KeptSecretListing[]> {
  return (await keptRows(env, source)).map(listing);
}

/**
 * Approves (makes active) or revokes (deletes) the kept secret with this fingerprint; null when the source has none
 * with it. Other isolates' caches may still try a revoked secret for up to CACHE_TTL_MS.
 */
export async function changeKeptSecret(
  env: Pick<Env, "DB">,
  source: string,
  fingerprint: string,
  change: "approve" | "revoke",
): Promise<KeptSecretListing | null> {
  const row = (await keptRows(env, source)).find((candidate) => candidate.fingerprint === fingerprint);
  if (!row) return null;
  const which = and(eq(keptSecrets.source, source), eq(keptSecrets.secret, row.secret));
  const db = database(env);
  if (change === "approve") await db.update(keptSecrets).set({ status: "active" }).where(which);
  else await db.delete(keptSecrets).where(which);
  cache.delete(source);
  return listing({ ...row, status: change === "approve" ? "active" : row.status });
}

import { and, desc, eq } from "drizzle-orm";
import { sha256Hex } from "../crypto/digest";
import { utf8Bytes } from "../crypto/encoding";
import { database } from "../db/client";
import { keptSecrets } from "../db/schema";
import type { SourceSecret } from "../providers/types";

/**
 * The active kept secrets a delivery to an Asana or Notion source verifies against (./kept-secrets.ts keeps them),
 * cached per isolate so that deliveries, forged ones above all, do not each cost a D1 read:
 *   - a list with secrets is kept for FOUND_TTL_MS; an empty one (no hook registered yet) for EMPTY_TTL_MS;
 *   - a cached list that verified nothing may be read again (a hook registered in another isolate since), but at
 *     most once per REREAD_INTERVAL_MS per source: a flood of forged signatures costs one read per interval, not
 *     one per delivery. A genuine delivery refused meanwhile is retried by its sender and verifies once re-read.
 * Times are the deliveries' own start times; they move between requests, which is all a TTL needs.
 */

/** The newest this many active ones per source are tried: the verification budget bounds the rest anyway. */
const KEPT_PER_SOURCE = 8;
export const FOUND_TTL_MS = 60_000;
export const EMPTY_TTL_MS = 5_000;
export const REREAD_INTERVAL_MS = 5_000;

interface CachedList {
  secrets: SourceSecret[];
  readAt: number;
}

const cache = new Map<string, CachedList>();

export type KeptSecretsRead = "use-cached" | "read";

/**
 * Whether a delivery uses the cached list or reads D1. `again` is the route asking after the cached list verified
 * nothing: only worth a read once the last one is REREAD_INTERVAL_MS old.
 */
export function keptSecretsRead(cached: CachedList | undefined, now: number, again: boolean): KeptSecretsRead {
  if (!cached) return "read";
  const age = now - cached.readAt;
  if (again) return age >= REREAD_INTERVAL_MS ? "read" : "use-cached";
  return age < (cached.secrets.length > 0 ? FOUND_TTL_MS : EMPTY_TTL_MS) ? "use-cached" : "read";
}

/** 16 hex characters of the secret's SHA-256: enough to tell kept secrets apart and to name one, useless to forge with. */
export async function secretFingerprint(secret: string): Promise<string> {
  return (await sha256Hex(utf8Bytes(secret))).slice(0, 16);
}

/** A kept secret's name where a listed one has its binding name: what the verification health counts it under. */
export function keptSecretName(fingerprint: string): string {
  return `kept:${fingerprint}`;
}

function asSecrets(rows: { secret: string }[]): Promise<SourceSecret[]> {
  // The name is what logs, metrics and the admin API could ever see: never the value.
  return Promise.all(
    rows.map(async (row) => ({ name: keptSecretName(await secretFingerprint(row.secret)), value: row.secret })),
  );
}

/**
 * The active kept secrets of a source, newest first: the only ones a delivery verifies against. `rereadable` says
 * whether asking `again` could read anything newer: the list came from the cache and a re-read is allowed now.
 */
export async function activeKeptSecrets(
  env: Pick<Env, "DB">,
  source: string,
  now: number,
  again = false,
): Promise<{ secrets: SourceSecret[]; rereadable: boolean }> {
  const cached = cache.get(source);
  if (keptSecretsRead(cached, now, again) === "use-cached")
    return { secrets: cached!.secrets, rereadable: !again && keptSecretsRead(cached, now, true) === "read" };
  const rows = await database(env)
    .select({ secret: keptSecrets.secret, receivedAt: keptSecrets.receivedAt })
    .from(keptSecrets)
    .where(and(eq(keptSecrets.source, source), eq(keptSecrets.status, "active")))
    .orderBy(desc(keptSecrets.receivedAt))
    .limit(KEPT_PER_SOURCE);
  const secrets = await asSecrets(rows);
  cache.set(source, { secrets, readAt: now });
  return { secrets, rereadable: false };
}

/** This isolate changed the source's kept secrets: its next delivery reads them afresh. */
export function forgetCachedKeptSecrets(source: string): void {
  cache.delete(source);
}

import { failDuringLocalOutage } from "../lib/local-faults";
import { count } from "../lib/meter";
import type { PendingClaim } from "../model/claims";

/**
 * Large bodies live in R2 (the optional `BODIES` bucket), not in D1 rows: a D1 row holds at most 2 MB and large
 * blobs slow every query that reads the table. The claim shard keeps the body durably until its relay, and the
 * relay writes it to R2 before the D1 insert, so the acknowledgement path is unchanged and a crash between the two
 * only rewrites the same object under the same key on the next relay.
 *
 * The object is keyed by the receipt id and holds the exact bytes received (R2 checks them against the payload's
 * SHA-256 on the way in). The receipt row keeps `body = NULL` and `body_location = 'r2'`, and still keeps the kept
 * headers; the object carries them too, as custom metadata, so it describes itself. Retention deletes the object
 * when it drops the body (`deleteStoredBodies`).
 */

export const BODY_LOCATION_R2 = "r2";
/** R2 allows 8,192 bytes of metadata per object; kept headers beyond this stay in D1 only. */
const MAX_METADATA_HEADERS_BYTES = 6 * 1024;
/** R2's delete takes at most 1,000 keys per call. */
const DELETE_CHUNK = 1000;

type Bodies = { BODIES?: R2Bucket };

function bucketOf(env: Bodies): R2Bucket | null {
  return env.BODIES ?? null;
}

/** Which claims of a relay batch go to R2: pure, so the decision is testable without a bucket. */
export function claimsForR2(claims: readonly PendingClaim[], thresholdOf: (source: string) => number): PendingClaim[] {
  return claims.filter((claim) => claim.body !== null && claim.body.byteLength > thresholdOf(claim.source));
}

/**
 * Writes the batch's large bodies to R2 and returns the receipt ids now held there. `thresholdOf` gives each
 * source's threshold in bytes (src/sources/body-threshold.ts). Without a bucket nothing moves and every body stays
 * in D1. A failed put fails the relay: the shard keeps the claim and retries.
 */
export async function storeLargeBodies(
  env: Bodies,
  claims: readonly PendingClaim[],
  thresholdOf: (source: string) => number,
): Promise<Set<string>> {
  const bucket = bucketOf(env);
  if (!bucket) return new Set();
  const large = claimsForR2(claims, thresholdOf);
  await Promise.all(large.map((claim) => putOwnBody(bucket, claim, claim.body!)));
  return new Set(large.map((claim) => claim.receiptId));
}

/** What an object of its own says of its body: enough to tell what it is without the D1 row. */
export type OwnBodyFacts = Pick<
  PendingClaim,
  "receiptId" | "source" | "eventKey" | "payloadSha256" | "receivedAt" | "keptHeaders"
>;

/**
 * Writes one body as an object of its own, keyed by its receipt id: a large body at relay, or a body copied out of
 * its segment to outlive it (src/reconcile/retention-segments.ts). R2 checks the bytes against the payload's SHA-256 on the way in.
 */
export async function putOwnBody(bucket: R2Bucket, facts: OwnBodyFacts, body: ArrayBuffer | Uint8Array): Promise<void> {
  count("r2ClassA");
  failDuringLocalOutage("r2");
  await bucket.put(facts.receiptId, body, {
    sha256: facts.payloadSha256,
    customMetadata: objectMetadata(facts),
  });
}

function objectMetadata(claim: OwnBodyFacts): Record<string, string> {
  const metadata: Record<string, string> = {
    source: claim.source,
    eventKey: claim.eventKey,
    payloadSha256: claim.payloadSha256,
    receivedAt: String(claim.receivedAt),
  };
  if (
    claim.keptHeaders !== null &&
    new TextEncoder().encode(claim.keptHeaders).byteLength <= MAX_METADATA_HEADERS_BYTES
  ) {
    metadata.keptHeaders = claim.keptHeaders;
  }
  return metadata;
}

/**
 * The bodies of these receipts that live in R2, by receipt id. An object that is gone (retention got there first)
 * is simply absent; an R2 outage throws, so the caller retries rather than treating the body as dropped.
 */
export async function readStoredBodies(env: Bodies, receiptIds: readonly string[]): Promise<Map<string, Uint8Array>> {
  const bucket = bucketOf(env);
  const found = new Map<string, Uint8Array>();
  if (!bucket || receiptIds.length === 0) return found;
  count("r2ClassB", receiptIds.length);
  await Promise.all(
    receiptIds.map(async (receiptId) => {
      failDuringLocalOutage("r2");
      const object = await bucket.get(receiptId);
      if (object) found.set(receiptId, new Uint8Array(await object.arrayBuffer()));
    }),
  );
  return found;
}

/**
 * Deletes the R2 copies of these receipts' bodies, for retention. Ids without an object cost nothing, so the
 * caller can pass every receipt whose body it just dropped without knowing where each body lived.
 */
export async function deleteStoredBodies(env: Bodies, receiptIds: readonly string[]): Promise<void> {
  const bucket = bucketOf(env);
  if (!bucket || receiptIds.length === 0) return;
  for (let start = 0; start < receiptIds.length; start += DELETE_CHUNK) {
    failDuringLocalOutage("r2");
    await bucket.delete(receiptIds.slice(start, start + DELETE_CHUNK) as string[]);
  }
}

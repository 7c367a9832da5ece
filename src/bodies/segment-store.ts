import { sha256Hex } from "../crypto/digest";
import { concatBytes, utf8Bytes } from "../crypto/encoding";
import { failDuringLocalOutage } from "../lib/local-faults";
import { count } from "../lib/meter";
import type { PendingClaim } from "../model/claims";
import { segmentDay, segmentKey, segmentLayout, segmentLocation } from "./segment-format";
import { BODY_LOCATION_R2, storeLargeBodies } from "./stored-bodies";

/**
 * Where the relay puts a batch's bodies when the BODIES bucket is bound: each body above its source's
 * `r2_body_threshold` in an object of its own (so a segment stays bounded by the relay's byte cap,
 * RELAY_BATCH_BYTES, and a large body is read without its neighbours), and, for a source with `body_segments`, every
 * other one in the batch's segment (segment-format.ts), one R2 write for all of them. Written before the D1 insert, so a crash between the two only
 * writes the same object again. Without a bucket every body stays in its D1 row, as it always has.
 *
 * Returns each receipt's `body_location` ('r2' or 'seg:…'); a receipt absent from the map keeps its body in D1
 * (no bucket, a source without segments, or an empty body, which costs nothing to keep).
 */
export async function storeBodies(
  env: { BODIES?: R2Bucket },
  claims: readonly PendingClaim[],
  thresholdOf: (source: string) => number,
  segmentsOf: (source: string) => boolean,
  now: number,
): Promise<Map<string, string>> {
  const locations = new Map<string, string>();
  const bucket = env.BODIES;
  if (!bucket) return locations;
  for (const receiptId of await storeLargeBodies(env, claims, thresholdOf)) locations.set(receiptId, BODY_LOCATION_R2);
  const inSegment = claims.filter(
    (claim) =>
      segmentsOf(claim.source) && !locations.has(claim.receiptId) && claim.body !== null && claim.body.byteLength > 0,
  );
  // One segment per source: a segment's key and its expiry are its source's.
  for (const source of new Set(inSegment.map((claim) => claim.source))) {
    const written = await writeSegment(
      bucket,
      source,
      inSegment.filter((claim) => claim.source === source),
      now,
    );
    for (const [receiptId, location] of written) locations.set(receiptId, location);
  }
  return locations;
}

async function writeSegment(
  bucket: R2Bucket,
  source: string,
  claims: readonly PendingClaim[],
  now: number,
): Promise<Map<string, string>> {
  const ids = claims.map((claim) => claim.receiptId);
  const sortedIds = [...ids].sort();
  const firstReceiptId = sortedIds[0]!;
  const lastReceiptId = sortedIds.at(-1)!;
  const key = segmentKey(source, segmentDay(now), firstReceiptId, await idsDigest(ids));
  const entries = segmentLayout(
    claims.map((claim) => ({ receiptId: claim.receiptId, length: claim.body!.byteLength })),
  );
  const bytes = concatBytes(...claims.map((claim) => new Uint8Array(claim.body!)));
  count("r2ClassA");
  failDuringLocalOutage("r2");
  await bucket.put(key, bytes, {
    // So an operator listing the bucket can tell what an object is without reading it.
    customMetadata: { source, firstReceiptId, lastReceiptId, count: String(claims.length) },
  });
  return new Map(entries.map((entry) => [entry.receiptId, segmentLocation({ key, ...entry })]));
}

/** Eight hex digits of the SHA-256 of the batch's receipt ids, in order: the key then names the exact bytes. */
async function idsDigest(ids: readonly string[]): Promise<string> {
  return (await sha256Hex(utf8Bytes(ids.join("\n")))).slice(0, 8);
}

import { sha256Hex } from "../crypto/digest";
import { failDuringLocalOutage } from "../lib/local-faults";
import { count } from "../lib/meter";
import { coveringRange, isSegmentLocation, parseSegmentLocation, type SegmentPlace } from "./segment-format";
import { BODY_LOCATION_R2, readStoredBodies } from "./stored-bodies";

/** What an attempt records when a stored body fails its check: a dead letter an operator sees, never other bytes sent. */
export const BODY_INTEGRITY_FAILED = "stored body failed its integrity check (SHA-256 mismatch)";

/** A receipt whose body is kept in the BODIES bucket: what its row says of it. */
export interface BodyRef {
  receiptId: string;
  bodyLocation: string;
  payloadSha256: string;
}

export interface ReadBodies {
  /** The bytes of each body found, by receipt id. A body not here and not in `corrupt` is gone (retention). */
  bodies: Map<string, Uint8Array>;
  /** Receipts whose stored bytes do not hash to their payload_sha256 (or whose location cannot be read): never served. */
  corrupt: Set<string>;
}

/**
 * The bodies of these receipts that live in R2, whichever way: an object of its own ('r2') or a range of a segment
 * ('seg:…', segment-format.ts). Receipts sharing a segment are served by ONE read of the range covering them all;
 * each body read from a segment must hash to its payload_sha256 (a segment is written without a checksum of its
 * own). An object that is gone was dropped by retention: its bodies are simply absent. An R2 outage throws, so the
 * caller retries rather than treating the body as dropped.
 */
export async function readBodies(env: { BODIES?: R2Bucket }, refs: readonly BodyRef[]): Promise<ReadBodies> {
  const result: ReadBodies = { bodies: new Map(), corrupt: new Set() };
  const bucket = env.BODIES;
  if (!bucket || refs.length === 0) return result;
  const own = refs.filter((ref) => ref.bodyLocation === BODY_LOCATION_R2).map((ref) => ref.receiptId);
  const bySegment = new Map<string, { ref: BodyRef; place: SegmentPlace }[]>();
  for (const ref of refs) {
    if (!isSegmentLocation(ref.bodyLocation)) continue;
    const place = parseSegmentLocation(ref.bodyLocation);
    if (!place) {
      result.corrupt.add(ref.receiptId);
      continue;
    }
    bySegment.set(place.key, [...(bySegment.get(place.key) ?? []), { ref, place }]);
  }
  const [ownBodies] = await Promise.all([
    readStoredBodies(env, own),
    ...[...bySegment].map(([key, entries]) => readFromSegment(bucket, key, entries, result)),
  ]);
  for (const [receiptId, bytes] of ownBodies) result.bodies.set(receiptId, bytes);
  return result;
}

async function readFromSegment(
  bucket: R2Bucket,
  key: string,
  entries: readonly { ref: BodyRef; place: SegmentPlace }[],
  result: ReadBodies,
): Promise<void> {
  const range = coveringRange(entries.map((entry) => entry.place));
  count("r2ClassB");
  failDuringLocalOutage("r2");
  const object = await bucket.get(key, { range });
  if (!object) return;
  const covered = new Uint8Array(await object.arrayBuffer());
  await Promise.all(
    entries.map(async ({ ref, place }) => {
      const start = place.offset - range.offset;
      const bytes = covered.slice(start, start + place.length);
      if (bytes.byteLength === place.length && (await sha256Hex(bytes)) === ref.payloadSha256)
        result.bodies.set(ref.receiptId, bytes);
      else result.corrupt.add(ref.receiptId);
    }),
  );
}

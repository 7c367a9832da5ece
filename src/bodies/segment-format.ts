/**
 * Segments: the bodies of one relay batch written back to back as ONE R2 object, so a body costs 1/batch of an R2
 * write (Class A) instead of one. Pure decisions only (names, layout, expiry); the I/O is segment-store.ts,
 * body-reader.ts and src/reconcile/retention-segments.ts.
 *
 * A receipt whose body is in a segment keeps `body = NULL` and `body_location = 'seg:<key>:<offset>:<length>'`
 * (no extra column: every byte of a receipt row is paid for as long as its key is kept). The key is
 * `segments/<source>/<yyyy-mm-dd>/<first receipt id>-<digest>`:
 *   - the day is the relay's (UTC), never earlier than any of its receipts' arrival, so expiring a whole day's
 *     prefix never drops a body before its own payload retention;
 *   - the first (smallest) receipt id says what the object is at a glance;
 *   - the digest is of the batch's receipt ids in order, so the key names the exact bytes: a relay repeated after a
 *     crash writes the same object again, and a different batch (the shard re-reads its backlog from another point
 *     after a restart) never overwrites bytes that rows written by an earlier relay point into.
 */

export const SEGMENT_LOCATION_PREFIX = "seg:";
const SEGMENTS_ROOT = "segments/";
const DAY_MS = 86_400_000;

export interface SegmentEntry {
  receiptId: string;
  offset: number;
  length: number;
}

export interface SegmentPlace {
  key: string;
  offset: number;
  length: number;
}

/** `yyyy-mm-dd` (UTC) of an epoch-ms time. */
export function segmentDay(time: number): string {
  return new Date(time).toISOString().slice(0, 10);
}

/** Where a source's segments of one day live: the prefix retention lists and deletes. */
export function segmentDayPrefix(source: string, day: string): string {
  return `${segmentSourcePrefix(source)}${day}/`;
}

export function segmentSourcePrefix(source: string): string {
  return `${SEGMENTS_ROOT}${source}/`;
}

export function segmentKey(source: string, day: string, firstReceiptId: string, digest: string): string {
  return `${segmentDayPrefix(source, day)}${firstReceiptId}-${digest}`;
}

/** The bodies' places in the object, in the batch's order, back to back. */
export function segmentLayout(bodies: readonly { receiptId: string; length: number }[]): SegmentEntry[] {
  let offset = 0;
  return bodies.map(({ receiptId, length }) => {
    const entry = { receiptId, offset, length };
    offset += length;
    return entry;
  });
}

export function segmentLocation(place: SegmentPlace): string {
  return `${SEGMENT_LOCATION_PREFIX}${place.key}:${place.offset}:${place.length}`;
}

export function isSegmentLocation(location: string | null): location is string {
  return location?.startsWith(SEGMENT_LOCATION_PREFIX) ?? false;
}

/** A `seg:` location read back, or null for any other (or a malformed) value. */
export function parseSegmentLocation(location: string | null): SegmentPlace | null {
  if (!isSegmentLocation(location)) return null;
  const match = /^seg:(.+):(\d+):(\d+)$/.exec(location);
  if (!match) return null;
  return { key: match[1]!, offset: Number(match[2]), length: Number(match[3]) };
}

/** The day a segment key was written on, or null for a key that is not a segment's. */
export function dayOfSegmentKey(key: string): string | null {
  const match = /^segments\/.+\/(\d{4}-\d{2}-\d{2})\/[^/]+$/.exec(key);
  return match ? match[1]! : null;
}

/**
 * Whether a day's segments are past the source's payload retention at `now`: every receipt in them arrived before
 * the day ended, so the whole day may go once its end is older than the retention. A body thus lives between its
 * payload retention and one day more.
 */
export function segmentDayExpired(day: string, payloadRetentionMs: number, now: number): boolean {
  return day < segmentDay(now - payloadRetentionMs);
}

/**
 * Whether the body at `location` is in a segment whose day is past its source's payload retention: gone, or about to
 * be at the next cron run, so not to be replayed (a replay would find no body). Any other location: false.
 */
export function segmentBodyExpired(location: string | null, payloadRetentionMs: number, now: number): boolean {
  const day = dayOfSegmentKey(parseSegmentLocation(location)?.key ?? "");
  return day !== null && segmentDayExpired(day, payloadRetentionMs, now);
}

/** When a day's segments become due for deletion (epoch ms). */
export function segmentDayExpiresAt(day: string, payloadRetentionMs: number): number {
  return Date.parse(`${day}T00:00:00.000Z`) + DAY_MS + payloadRetentionMs;
}

/**
 * One read per segment for the receipts that share it: the range covering all their bodies (the whole object
 * when they are the whole batch). `offset`/`length` of the read; each entry is sliced out of it afterwards.
 */
export function coveringRange(places: readonly SegmentPlace[]): { offset: number; length: number } {
  const start = Math.min(...places.map((place) => place.offset));
  const end = Math.max(...places.map((place) => place.offset + place.length));
  return { offset: start, length: end - start };
}

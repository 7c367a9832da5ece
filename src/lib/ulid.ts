/**
 * ULIDs: 48-bit millisecond time + 80 random bits, Crockford base32. Sortable by creation time, which makes
 * receipt ids usable as keyset-pagination cursors.
 */
const ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

export function ulid(now: number = Date.now()): string {
  let time = "";
  let remaining = now;
  for (let i = 0; i < 10; i++) {
    time = ALPHABET[remaining % 32]! + time;
    remaining = Math.floor(remaining / 32);
  }
  const random = crypto.getRandomValues(new Uint8Array(16));
  let tail = "";
  for (let i = 0; i < 16; i++) tail += ALPHABET[random[i]! % 32];
  return time + tail;
}

/** The smallest ULID minted at or after `time` (epoch ms): a bound for id-range scans by time. */
export function ulidFloor(time: number): string {
  let prefix = "";
  let remaining = Math.max(0, Math.floor(time));
  for (let i = 0; i < 10; i++) {
    prefix = ALPHABET[remaining % 32]! + prefix;
    remaining = Math.floor(remaining / 32);
  }
  return prefix + "0".repeat(16);
}

/** The epoch ms a ULID was minted at (its first 10 characters). */
export function ulidTime(id: string): number {
  let time = 0;
  for (const char of id.slice(0, 10)) time = time * 32 + ALPHABET.indexOf(char);
  return time;
}

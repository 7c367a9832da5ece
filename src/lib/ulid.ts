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

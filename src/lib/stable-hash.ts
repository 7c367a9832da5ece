/**
 * Which of `buckets` a text falls in. FNV-1a is stable across isolates and deploys, so every caller that hashes
 * the same text (an event key to its claim shard, a receipt id to its partition database) gets the same answer.
 */
export function stableBucket(text: string, buckets: number): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0) % buckets;
}

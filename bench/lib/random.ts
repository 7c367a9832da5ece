/**
 * Seeded randomness. Every fault is drawn from a hash of (seed, event, attempt, purpose) rather than from one
 * running stream, so the receiver and the naive control see the same faults whatever order deliveries finish in.
 */

export function mulberry32(seed: number): () => number {
  let state = seed | 0;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function keyedDraw(seed: number, ...parts: Array<string | number>): number {
  let hash = seed >>> 0;
  for (const char of parts.join("|")) hash = Math.imul(hash ^ char.charCodeAt(0), 2654435761) >>> 0;
  return mulberry32(hash)();
}

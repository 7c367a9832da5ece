/**
 * The allowed name an unknown one was probably meant to be: its camelCase spelling (`receipt_ids`), or one a
 * typo or two away (`sttus`). Null when nothing is close.
 */
export function likelyMeant(name: string, allowed: readonly string[]): string | null {
  const camel = name.replace(/[_-]([a-z])/g, (_match, letter: string) => letter.toUpperCase());
  if (camel !== name && allowed.includes(camel)) return camel;
  let best: { name: string; distance: number } | null = null;
  for (const candidate of allowed) {
    const distance = editDistance(name.toLowerCase(), candidate.toLowerCase());
    if (distance <= 2 && distance < (best?.distance ?? Infinity)) best = { name: candidate, distance };
  }
  return best?.name ?? null;
}

function editDistance(a: string, b: string): number {
  if (Math.abs(a.length - b.length) > 2) return 3;
  let previous = Array.from({ length: b.length + 1 }, (_, index) => index);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length]!;
}

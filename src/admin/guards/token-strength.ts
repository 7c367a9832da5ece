/**
 * Whether an admin token is strong enough to guard the admin surface: long enough and not guessable by shape. The
 * sign-in throttle (./login-throttle.ts) never refuses the right token, so it cannot stop a guesser on its own;
 * what stops one is a token with too many possibilities to try. Length alone passes "aaaaaaaaaaaaaaaa", so the
 * token's Shannon entropy over its own characters is checked too. It measures only repetition (a dictionary word
 * repeated still scores what its letters do), so it refuses the careless shapes, not every weak choice:
 * `npm run -s cli -- secret token` makes one from 32 random bytes.
 */

export const MIN_ADMIN_TOKEN_LENGTH = 16;
/**
 * Length × the entropy per character of the token's own character counts. A one-character token scores 0,
 * "abcdabcdabcdabcd" 32; a random 16-hex-character token scores under 40 about once in 500 (its characters
 * repeat by chance), a random 32-character one practically never.
 */
export const MIN_ADMIN_TOKEN_ENTROPY_BITS = 40;

/** Shannon entropy of the token's characters, in bits per character, times its length. */
export function tokenEntropyBits(token: string): number {
  const characters = [...token];
  const counts = new Map<string, number>();
  for (const character of characters) counts.set(character, (counts.get(character) ?? 0) + 1);
  let bitsPerCharacter = 0;
  for (const count of counts.values()) {
    const share = count / characters.length;
    bitsPerCharacter -= share * Math.log2(share);
  }
  return bitsPerCharacter * characters.length;
}

export type TokenStrength = "too-short" | "low-entropy" | "strong";

export function tokenStrength(token: string): TokenStrength {
  if (token.length < MIN_ADMIN_TOKEN_LENGTH) return "too-short";
  return tokenEntropyBits(token) < MIN_ADMIN_TOKEN_ENTROPY_BITS ? "low-entropy" : "strong";
}

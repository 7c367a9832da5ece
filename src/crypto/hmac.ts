/**
 * HMAC keys and signing through WebCrypto, keys imported once per isolate and reused. Verification is
 * src/crypto/verify.ts (crypto.subtle.verify, constant time); signing here is for what we send out.
 */

export type HmacHash = "SHA-1" | "SHA-256" | "SHA-512";

const keyCache = new Map<string, Promise<CryptoKey>>();
const KEY_CACHE_LIMIT = 256;

function cacheKey(hash: HmacHash, secret: Uint8Array): string {
  let text = `${hash}:`;
  for (let i = 0; i < secret.length; i++) text += String.fromCharCode(secret[i]!);
  return text;
}

export function hmacKey(hash: HmacHash, secret: Uint8Array): Promise<CryptoKey> {
  const key = cacheKey(hash, secret);
  let imported = keyCache.get(key);
  if (!imported) {
    if (keyCache.size >= KEY_CACHE_LIMIT) keyCache.clear();
    imported = crypto.subtle.importKey("raw", secret, { name: "HMAC", hash }, false, ["sign", "verify"]);
    keyCache.set(key, imported);
  }
  return imported;
}

export async function hmacSign(hash: HmacHash, secret: Uint8Array, data: Uint8Array): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.sign("HMAC", await hmacKey(hash, secret), data));
}

/** Constant-time equality for shared tokens (GitLab, admin bearer): compares digests, so lengths leak nothing. */
export async function tokensEqual(presented: string, expected: string): Promise<boolean> {
  const encoder = new TextEncoder();
  return bytesEqualConstantTime(encoder.encode(presented), encoder.encode(expected));
}

export async function bytesEqualConstantTime(presented: Uint8Array, expected: Uint8Array): Promise<boolean> {
  const [a, b] = await Promise.all([
    crypto.subtle.digest("SHA-256", presented),
    crypto.subtle.digest("SHA-256", expected),
  ]);
  return crypto.subtle.timingSafeEqual(a, b);
}

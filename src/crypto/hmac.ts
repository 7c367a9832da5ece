/**
 * HMAC through WebCrypto. Verification goes through crypto.subtle.verify, which compares in constant time, so
 * no adapter ever compares signature bytes itself. Keys are imported once per isolate and reused.
 */

export type HmacHash = "SHA-1" | "SHA-256" | "SHA-512";

const keyCache = new Map<string, Promise<CryptoKey>>();
const KEY_CACHE_LIMIT = 256;

function cacheKey(hash: HmacHash, secret: Uint8Array): string {
  let text = hash + ":";
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

/** Constant-time: true when `signature` is the HMAC of `data` under `secret`. */
export async function hmacVerify(hash: HmacHash, secret: Uint8Array, signature: Uint8Array, data: Uint8Array): Promise<boolean> {
  return crypto.subtle.verify("HMAC", await hmacKey(hash, secret), signature, data);
}

/** Constant-time equality for shared tokens (GitLab, admin bearer): compares digests, so lengths leak nothing. */
export async function tokensEqual(presented: string, expected: string): Promise<boolean> {
  const encoder = new TextEncoder();
  return bytesEqualConstantTime(encoder.encode(presented), encoder.encode(expected));
}

export async function bytesEqualConstantTime(presented: Uint8Array, expected: Uint8Array): Promise<boolean> {
  const [a, b] = await Promise.all([crypto.subtle.digest("SHA-256", presented), crypto.subtle.digest("SHA-256", expected)]);
  return crypto.subtle.timingSafeEqual(a, b);
}

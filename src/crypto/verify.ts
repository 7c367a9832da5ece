import { bytesEqualConstantTime, hmacKey } from "./hmac";

/**
 * One entry point for every signature check a provider needs: HMAC, Ed25519, ECDSA P-256 and shared tokens.
 * Every comparison happens inside WebCrypto (crypto.subtle.verify, or timingSafeEqual over digests for tokens),
 * so no caller ever compares secret-derived bytes itself. Malformed keys or signatures answer false, never throw:
 * a sender's junk must end in a clean 401, not a 500.
 */

export type SignatureAlgorithm =
  | "hmac-sha1"
  | "hmac-sha256"
  | "hmac-sha512"
  | "ed25519"
  | "ecdsa-p256-sha256"
  | "token";

export interface VerificationKey {
  algorithm: SignatureAlgorithm;
  /** HMAC secret bytes, a raw Ed25519 public key, a DER (SPKI) P-256 public key, or a shared token. */
  material: Uint8Array;
}

const HMAC_HASH = { "hmac-sha1": "SHA-1", "hmac-sha256": "SHA-256", "hmac-sha512": "SHA-512" } as const;

const publicKeyCache = new Map<string, Promise<CryptoKey | null>>();
const PUBLIC_KEY_CACHE_LIMIT = 128;

function publicKey(algorithm: "ed25519" | "ecdsa-p256-sha256", material: Uint8Array): Promise<CryptoKey | null> {
  let cacheKey = `${algorithm}:`;
  for (let i = 0; i < material.length; i++) cacheKey += String.fromCharCode(material[i]!);
  let imported = publicKeyCache.get(cacheKey);
  if (!imported) {
    if (publicKeyCache.size >= PUBLIC_KEY_CACHE_LIMIT) publicKeyCache.clear();
    imported = (
      algorithm === "ed25519"
        ? crypto.subtle.importKey("raw", material, { name: "Ed25519" }, false, ["verify"])
        : crypto.subtle.importKey("spki", material, { name: "ECDSA", namedCurve: "P-256" }, false, ["verify"])
    ).catch(() => null);
    publicKeyCache.set(cacheKey, imported);
  }
  return imported;
}

/**
 * ECDSA signatures arrive DER-encoded (SEQUENCE { INTEGER r, INTEGER s }) from most senders; WebCrypto wants
 * r‖s, each left-padded to 32 bytes. A 64-byte input is taken as already r‖s. Anything else is null.
 */
export function ecdsaP256SignatureToRaw(signature: Uint8Array): Uint8Array | null {
  if (signature.length === 64) return signature;
  if (signature.length < 8 || signature[0] !== 0x30 || signature[1] !== signature.length - 2) return null;
  const raw = new Uint8Array(64);
  let offset = 2;
  for (const half of [0, 1]) {
    if (signature[offset] !== 0x02) return null;
    const length = signature[offset + 1]!;
    const start = offset + 2;
    if (length < 1 || start + length > signature.length) return null;
    let integer = signature.subarray(start, start + length);
    while (integer.length > 32 && integer[0] === 0) integer = integer.subarray(1);
    if (integer.length > 32) return null;
    raw.set(integer, half * 32 + (32 - integer.length));
    offset = start + length;
  }
  return offset === signature.length ? raw : null;
}

/** True only when `signature` is a valid signature (or the shared token) for `data` under `key`. */
export async function verifySignature(key: VerificationKey, signature: Uint8Array, data: Uint8Array): Promise<boolean> {
  try {
    switch (key.algorithm) {
      case "hmac-sha1":
      case "hmac-sha256":
      case "hmac-sha512": {
        const hash = HMAC_HASH[key.algorithm];
        return await crypto.subtle.verify("HMAC", await hmacKey(hash, key.material), signature, data);
      }
      case "ed25519": {
        const imported = await publicKey("ed25519", key.material);
        return (
          imported !== null &&
          signature.length === 64 &&
          (await crypto.subtle.verify("Ed25519", imported, signature, data))
        );
      }
      case "ecdsa-p256-sha256": {
        const imported = await publicKey("ecdsa-p256-sha256", key.material);
        const raw = ecdsaP256SignatureToRaw(signature);
        return (
          imported !== null &&
          raw !== null &&
          (await crypto.subtle.verify({ name: "ECDSA", hash: "SHA-256" }, imported, raw, data))
        );
      }
      case "token":
        return await bytesEqualConstantTime(signature, key.material);
    }
  } catch {
    return false;
  }
}

/** HMAC keys are symmetric: the expected MAC can be computed once and compared against any number of candidates. */
export function isHmac(algorithm: SignatureAlgorithm): algorithm is keyof typeof HMAC_HASH {
  return algorithm in HMAC_HASH;
}

/**
 * Whether any of `signatures` is valid for `data` under `key`. For HMAC the expected MAC is computed once and
 * each presented signature compared to it in constant time (a MAC's length is public, so a length mismatch may
 * answer early); so the cost is one MAC over the body however many signatures were presented. Other algorithms
 * verify each signature.
 */
export async function anySignatureVerifies(
  key: VerificationKey,
  signatures: readonly Uint8Array[],
  data: Uint8Array,
): Promise<boolean> {
  if (!isHmac(key.algorithm)) {
    for (const signature of signatures) {
      if (await verifySignature(key, signature, data)) return true;
    }
    return false;
  }
  let expected: Uint8Array;
  try {
    expected = new Uint8Array(
      await crypto.subtle.sign("HMAC", await hmacKey(HMAC_HASH[key.algorithm], key.material), data),
    );
  } catch {
    return false;
  }
  let matched = false;
  // Every candidate is compared, match or not, so the time taken does not say which one matched.
  for (const signature of signatures) {
    if (signature.length === expected.length && crypto.subtle.timingSafeEqual(signature, expected)) matched = true;
  }
  return matched;
}

import { createHash, createHmac, createPrivateKey, sign } from "node:crypto";
import { privateKeys } from "./private-keys";

/**
 * Independent signers for the tests: node:crypto (workerd's nodejs_compat implementation), never the receiver's
 * own src/crypto, so a test signature agreeing with the route is two implementations agreeing.
 */

export type Bytes = Uint8Array | string;

export function hmac(algorithm: "sha1" | "sha256" | "sha512", key: Bytes, ...parts: Bytes[]): Buffer {
  const mac = createHmac(algorithm, typeof key === "string" ? Buffer.from(key, "utf8") : key);
  for (const part of parts) mac.update(part);
  return mac.digest();
}

export function sha256Hex(data: Bytes): string {
  return createHash("sha256").update(data).digest("hex");
}

function privateKey(secretName: string) {
  const pkcs8 = privateKeys[secretName];
  if (!pkcs8) throw new Error(`no private key for ${secretName}`);
  return createPrivateKey({ key: Buffer.from(pkcs8, "base64"), format: "der", type: "pkcs8" });
}

export function ed25519Sign(secretName: string, ...parts: Bytes[]): Buffer {
  return sign(null, Buffer.concat(parts.map((part) => Buffer.from(part))), privateKey(secretName));
}

/** ECDSA P-256 / SHA-256, DER-encoded as SendGrid sends it. */
export function ecdsaDerSign(secretName: string, ...parts: Bytes[]): Buffer {
  const pkcs8 = privateKeys[secretName];
  if (!pkcs8) throw new Error(`no private key for ${secretName}`);
  return sign("sha256", Buffer.concat(parts.map((part) => Buffer.from(part))), {
    key: Buffer.from(pkcs8, "base64"),
    format: "der",
    type: "pkcs8",
    dsaEncoding: "der",
  });
}

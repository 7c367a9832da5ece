import { encodeHex } from "./encoding";

export async function sha256Hex(bytes: Uint8Array): Promise<string> {
  return encodeHex(new Uint8Array(await crypto.subtle.digest("SHA-256", bytes)));
}

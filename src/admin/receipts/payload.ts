import { encodeBase64 } from "../../crypto/encoding";

export type ShownPayload = { encoding: "utf8"; text: string } | { encoding: "base64"; text: string };

const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** A retained body as an operator can read it: text when it is valid UTF-8, base64 otherwise. Null once dropped. */
export function decodeUtf8OrBase64(body: Uint8Array | ArrayBuffer | number[] | null): ShownPayload | null {
  if (body === null) return null;
  const bytes =
    body instanceof Uint8Array ? body : body instanceof ArrayBuffer ? new Uint8Array(body) : Uint8Array.from(body);
  try {
    return { encoding: "utf8", text: strictUtf8.decode(bytes) };
  } catch {
    return { encoding: "base64", text: encodeBase64(bytes) };
  }
}

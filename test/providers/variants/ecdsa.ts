import fc from "fast-check";
import { withHeader } from "../support/contract";
import { type Delivery, onFirst, type Variant } from "./property";

/**
 * ECDSA P-256 signatures are malleable: (r, s) and (r, n − s) both verify, and a DER signature also reads as raw
 * r‖s. Another spelling of a valid signature is a signature-preserving variant; no dedupe key here is made of the
 * signature's bytes, so it must be a duplicate.
 */

const P256_ORDER = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;

const toHex = (value: bigint) => value.toString(16).padStart(64, "0");
const bytesOf = (value: bigint) => Buffer.from(toHex(value), "hex");
const bigintOf = (bytes: Uint8Array) => BigInt(`0x${Buffer.from(bytes).toString("hex") || "0"}`);

function derInteger(value: bigint): Buffer {
  let bytes = bytesOf(value);
  while (bytes.length > 1 && bytes[0] === 0 && bytes[1]! < 0x80) bytes = bytes.subarray(1);
  if (bytes[0]! >= 0x80) bytes = Buffer.concat([Buffer.from([0]), bytes]);
  return Buffer.concat([Buffer.from([0x02, bytes.length]), bytes]);
}

/** r and s of a DER ECDSA signature. */
function derHalves(der: Buffer): [bigint, bigint] {
  const rLength = der[3]!;
  const r = der.subarray(4, 4 + rLength);
  const s = der.subarray(6 + rLength, 6 + rLength + der[5 + rLength]!);
  return [bigintOf(r), bigintOf(s)];
}

/** The same ECDSA signature (valid for the same bytes) spelled another way: s → n − s, or raw r‖s. */
export function ecdsaRespelled(header: string, encoding: "der-base64" | "raw-base64url"): fc.Arbitrary<Variant> {
  const decode = (text: string): [bigint, bigint] => {
    if (encoding === "der-base64") return derHalves(Buffer.from(text, "base64"));
    const raw = Buffer.from(text, "base64url");
    return [bigintOf(raw.subarray(0, 32)), bigintOf(raw.subarray(32))];
  };
  const highS = (r: bigint, s: bigint) =>
    encoding === "der-base64"
      ? (() => {
          const body = Buffer.concat([derInteger(r), derInteger(P256_ORDER - s)]);
          return Buffer.concat([Buffer.from([0x30, body.length]), body]).toString("base64");
        })()
      : Buffer.concat([bytesOf(r), bytesOf(P256_ORDER - s)]).toString("base64url");
  const respell = (label: string, change: (text: string) => string) =>
    onFirst(`${header} ${label}`, (delivery) => {
      const value = delivery.headers[header]!;
      return withHeader(delivery, header, change(value)) as Delivery;
    });
  const jwsSignature = (token: string, change: (signature: string) => string) => {
    const parts = token.split(".");
    return [...parts.slice(0, 2), change(parts[2]!)].join(".");
  };
  if (encoding === "raw-base64url")
    return fc.constant(
      respell("with s as n − s", (token) => jwsSignature(token, (signature) => highS(...decode(signature)))),
    );
  return fc.constantFrom(
    respell("with s as n − s", (text) => highS(...decode(text))),
    respell("as raw r‖s", (text) => {
      const [r, s] = decode(text);
      return Buffer.concat([bytesOf(r), bytesOf(s)]).toString("base64");
    }),
  );
}

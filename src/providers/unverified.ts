import { parseFormBody, parseJsonBody } from "./json";
import { AMPERSAND, BACKSLASH, CLOSE_BRACE, CLOSE_BRACKET, COMMA, OPEN_BRACE, OPEN_BRACKET, QUOTE } from "./json-bytes";

/**
 * What an adapter may parse before a request is verified (Invariant 10: rejection is cheap). The caller is not
 * authenticated yet, so the work must stay close to reading and hashing the bytes. Parsing itself is linear, but a
 * wide JSON object or 100k form parameters build 100k values, and that costs tens of times a SHA-256 of the same
 * bytes. So a body is first measured in one pass over its bytes that stops at the first limit crossed, and parsed
 * only when it is within the limits; over them, the request is refused (`payload-over-limits`) without parsing.
 *
 * A verified body is parsed with src/providers/json.ts and none of these limits: its signature says who sent it.
 */

/** More form parameters than any sender that signs a form (Twilio: ~40; Mailgun routes: ~30) sends. */
export const MAX_UNVERIFIED_FORM_PARAMS = 1000;
/** Members and elements (commas and opened containers): an Adyen batch of 16 items or a Graph batch of 100 stays far below. */
export const MAX_UNVERIFIED_JSON_VALUES = 4096;
/** Nesting no sender that signs inside its body (Adyen, Mailgun, SNS, Graph, monday.com, Notion, Linear) comes near. */
export const MAX_UNVERIFIED_JSON_DEPTH = 32;

/** Thrown by the parsers below; `refusingOversized` (src/providers/signed.ts) turns it into a rejection. */
export class PayloadOverLimits extends Error {}

/** True when the form has at most `maxParams` parameters; counts `&` natively and stops at the first one over. */
export function formWithinLimits(rawBody: Uint8Array, maxParams = MAX_UNVERIFIED_FORM_PARAMS): boolean {
  let params = 1;
  for (let at = rawBody.indexOf(AMPERSAND); at !== -1; at = rawBody.indexOf(AMPERSAND, at + 1)) {
    if (++params > maxParams) return false;
  }
  return true;
}

/**
 * True when the JSON text (valid or not) opens at most `maxValues` members and elements and nests at most
 * `maxDepth` deep. Bytes inside strings are skipped (UTF-8 never puts `"` or `\` inside a multi-byte character).
 */
export function jsonWithinLimits(
  rawBody: Uint8Array,
  maxValues = MAX_UNVERIFIED_JSON_VALUES,
  maxDepth = MAX_UNVERIFIED_JSON_DEPTH,
): boolean {
  let values = 0;
  let depth = 0;
  let inString = false;
  for (let i = 0, length = rawBody.length; i < length; i++) {
    const byte = rawBody[i]!;
    if (inString) {
      if (byte === BACKSLASH) i++;
      else if (byte === QUOTE) inString = false;
    } else if (byte === QUOTE) {
      inString = true;
    } else if (byte === COMMA) {
      if (++values > maxValues) return false;
    } else if (byte === OPEN_BRACE || byte === OPEN_BRACKET) {
      if (++values > maxValues || ++depth > maxDepth) return false;
    } else if (byte === CLOSE_BRACE || byte === CLOSE_BRACKET) {
      depth--;
    }
  }
  return true;
}

/** The body as JSON (undefined when it is not JSON), for reading a signature before verification; throws over the limits. */
export function parseUnverifiedJson(rawBody: Uint8Array): unknown {
  if (!jsonWithinLimits(rawBody)) throw new PayloadOverLimits("json");
  return parseJsonBody(rawBody);
}

/** The body as a form (undefined when it is not UTF-8), for reading or signing it before verification; throws over the limit. */
export function parseUnverifiedForm(rawBody: Uint8Array): URLSearchParams | undefined {
  if (!formWithinLimits(rawBody)) throw new PayloadOverLimits("form");
  return parseFormBody(rawBody);
}

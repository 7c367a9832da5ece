import { BACKSLASH, CLOSE_BRACE, CLOSE_BRACKET, COMMA, OPEN_BRACE, OPEN_BRACKET, QUOTE } from "./json-bytes";
/**
 * Where values sit in a JSON text's bytes, for an adapter that keeps part of a body exactly as received (an Adyen
 * batch item). It runs only on text JSON.parse has accepted, so it never diagnoses errors: it skips each value by
 * its first byte, in one linear pass. UTF-8 never puts an ASCII byte inside a multi-byte character, so scanning
 * the bytes finds the same structure as scanning the characters.
 */

/** Bytes `start` (inclusive) to `end` (exclusive) of the text. */
export interface Span {
  start: number;
  end: number;
}

const BOM = [0xef, 0xbb, 0xbf];

const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

function isWhitespace(byte: number | undefined): boolean {
  return byte === 0x20 || byte === 0x09 || byte === 0x0a || byte === 0x0d;
}

function skipWhitespace(bytes: Uint8Array, at: number): number {
  while (isWhitespace(bytes[at])) at++;
  return at;
}

/** From an opening quote to just past its closing one. */
function endOfString(bytes: Uint8Array, at: number): number {
  for (let i = at + 1; i < bytes.length; i++) {
    if (bytes[i] === BACKSLASH) i++;
    else if (bytes[i] === QUOTE) return i + 1;
  }
  return bytes.length;
}

/** From a value's first byte to just past its last. */
function endOfValue(bytes: Uint8Array, at: number): number {
  const first = bytes[at];
  if (first === QUOTE) return endOfString(bytes, at);
  if (first !== OPEN_BRACE && first !== OPEN_BRACKET) {
    // A number or a literal runs to the next delimiter.
    let i = at;
    while (i < bytes.length && !isWhitespace(bytes[i]) && ![COMMA, CLOSE_BRACE, CLOSE_BRACKET].includes(bytes[i]!)) i++;
    return i;
  }
  let depth = 0;
  for (let i = at; i < bytes.length; i++) {
    const byte = bytes[i];
    if (byte === QUOTE) i = endOfString(bytes, i) - 1;
    else if (byte === OPEN_BRACE || byte === OPEN_BRACKET) depth++;
    else if ((byte === CLOSE_BRACE || byte === CLOSE_BRACKET) && --depth === 0) return i + 1;
  }
  return bytes.length;
}

/** The whole text's value, past a byte-order mark and surrounding whitespace (as the body decoder allows). */
export function documentSpan(bytes: Uint8Array): Span {
  const bom = BOM.every((byte, index) => bytes[index] === byte) ? BOM.length : 0;
  const start = skipWhitespace(bytes, bom);
  return { start, end: endOfValue(bytes, start) };
}

/** Each element's span, in order, of the array at `array`. */
export function elementSpans(bytes: Uint8Array, array: Span): Span[] {
  const spans: Span[] = [];
  let at = skipWhitespace(bytes, array.start + 1);
  while (at < array.end && bytes[at] !== CLOSE_BRACKET) {
    const end = endOfValue(bytes, at);
    spans.push({ start: at, end });
    at = skipWhitespace(bytes, skipWhitespace(bytes, end) + 1);
  }
  return spans;
}

/**
 * The span of the value of the member named `name` in the object at `object`, or null. The last member of that
 * name, as JSON.parse keeps the last; names are compared decoded, so an escaped spelling matches too.
 */
export function memberSpan(bytes: Uint8Array, object: Span, name: string): Span | null {
  let found: Span | null = null;
  let at = skipWhitespace(bytes, object.start + 1);
  while (at < object.end && bytes[at] === QUOTE) {
    const nameEnd = endOfString(bytes, at);
    const valueStart = skipWhitespace(bytes, skipWhitespace(bytes, nameEnd) + 1);
    const valueEnd = endOfValue(bytes, valueStart);
    if (JSON.parse(decoder.decode(bytes.subarray(at, nameEnd))) === name) found = { start: valueStart, end: valueEnd };
    // Past the value, the comma and the whitespace before the next name (the colon was skipped above).
    at = skipWhitespace(bytes, skipWhitespace(bytes, valueEnd) + 1);
  }
  return found;
}

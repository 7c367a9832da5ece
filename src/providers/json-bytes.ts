/**
 * The ASCII bytes the byte scanners over unverified and verified JSON (src/providers/unverified.ts,
 * src/providers/json-spans.ts) stop at. UTF-8 never puts an ASCII byte inside a multi-byte character, so scanning
 * bytes for these finds the same structure as scanning characters.
 */
export const AMPERSAND = 0x26;
export const QUOTE = 0x22;
export const BACKSLASH = 0x5c;
export const COMMA = 0x2c;
export const OPEN_BRACE = 0x7b;
export const OPEN_BRACKET = 0x5b;
export const CLOSE_BRACE = 0x7d;
export const CLOSE_BRACKET = 0x5d;

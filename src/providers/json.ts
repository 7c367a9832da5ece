/** Reads a verified body as JSON, and dotted paths out of it, for adapters whose identity lives in the payload. */

const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });

export function parseJsonBody(rawBody: Uint8Array): unknown {
  try {
    return JSON.parse(decoder.decode(rawBody));
  } catch {
    return undefined;
  }
}

export function valueAtPath(document: unknown, path: string): unknown {
  let current: unknown = document;
  for (const segment of path.split(".")) {
    if (current === null || typeof current !== "object") return undefined;
    current = (current as Record<string, unknown>)[segment];
  }
  return current;
}

export function stringAtPath(document: unknown, path: string | undefined): string | null {
  if (!path) return null;
  const value = valueAtPath(document, path);
  if (typeof value === "string" && value.length > 0) return value;
  if (typeof value === "number" && Number.isFinite(value)) return String(value);
  return null;
}

/** A version is a finite integer the provider supplied; anything else is "no version", never a guess. */
export function versionAtPath(document: unknown, path: string | undefined): number | null {
  if (!path) return null;
  const value = valueAtPath(document, path);
  if (typeof value === "number" && Number.isSafeInteger(value)) return value;
  if (typeof value === "string" && /^-?\d{1,15}$/.test(value)) return Number(value);
  return null;
}

export function timeAtPath(document: unknown, path: string | undefined): number | null {
  if (!path) return null;
  const value = valueAtPath(document, path);
  if (typeof value === "number" && Number.isFinite(value)) return value < 1e12 ? value * 1000 : value;
  if (typeof value === "string") {
    const parsed = Date.parse(value);
    return Number.isNaN(parsed) ? null : parsed;
  }
  return null;
}

/** Reads an application/x-www-form-urlencoded body (Twilio, Slack commands, Mailgun routes); undefined if not UTF-8. */
export function parseFormBody(rawBody: Uint8Array): URLSearchParams | undefined {
  try {
    return new URLSearchParams(decoder.decode(rawBody));
  } catch {
    return undefined;
  }
}

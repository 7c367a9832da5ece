import type { Fetched } from "./key-cache";

/**
 * Keys and certificates some senders publish instead of sharing a secret (AWS SNS's signing certificate, Plaid's
 * verification keys). They are fetched only from the sender's own pinned hosts (a URL the request names is checked
 * against the pin before anything is fetched), with a timeout, and kept per isolate (src/providers/key-cache.ts:
 * refusals remembered, fetches in flight capped per source, keys that verified a delivery protected). The outcome
 * is one of three, and the route answers each differently:
 *   - `found`: the key material;
 *   - `refused`: the pinned host said there is no such key (a 4xx), or the URL is not pinned: a forgery, a 401;
 *   - `unavailable`: the host could not be reached in time or failed (network error, timeout, 5xx): a 503, so
 *     the sender retries later. Never an accept, and never a 401 a sender that does not retry would take as final.
 */

export const KEY_FETCH_TIMEOUT_MS = 3_000;

/**
 * Fetches a URL that has already passed its sender's pin, with the timeout. The answer's status decides the
 * outcome; `read` turns a 2xx body into the key (and may refuse it, e.g. a certificate that does not parse).
 */
export async function fetchPinned<T>(
  url: URL,
  init: RequestInit,
  read: (response: Response) => Promise<Fetched<T>>,
  /** Reads a 4xx that may mean "our credentials are wrong" (a deploy mistake to retry after) rather than "no such key". */
  classifyRefusal?: (response: Response) => Promise<"refused" | "unavailable">,
): Promise<Fetched<T>> {
  let response: Response;
  try {
    response = await fetch(redirectedForTests(url), {
      ...init,
      redirect: "manual",
      signal: AbortSignal.timeout(KEY_FETCH_TIMEOUT_MS),
    });
  } catch {
    return { kind: "unavailable" };
  }
  if (response.status >= 200 && response.status < 300) return read(response);
  // A redirect is not followed: it would leave the pinned host.
  const refused = response.status >= 400 && response.status < 500 && response.status !== 408 && response.status !== 429;
  if (refused && classifyRefusal) return { kind: await classifyRefusal(response).catch(() => "refused" as const) };
  await response.body?.cancel();
  return refused ? { kind: "refused" } : { kind: "unavailable" };
}

/**
 * Tests only: sends fetches for pinned URLs to a local stand-in instead, keeping the path and query, so the pin is
 * still checked against the real URL the request names. It is set only by a test calling
 * `redirectKeyFetchesForTests` (no production module calls it), which refuses unless the Worker has the
 * `TEST_KEY_STANDIN` binding (declared only in test/fixtures/secrets, never in wrangler.toml) and the origin is a
 * loopback `http://127.0.0.1:<port>`, which a deployed Worker cannot reach anyway.
 */
let testStandinOrigin: string | null = null;

export function redirectKeyFetchesForTests(env: object, origin: string | null): void {
  if ((env as Record<string, unknown>).TEST_KEY_STANDIN !== "loopback")
    throw new Error("key fetch redirect needs the TEST_KEY_STANDIN binding");
  if (origin !== null && !/^http:\/\/127\.0\.0\.1:\d{1,5}$/.test(origin))
    throw new Error("key fetch redirect must be a loopback origin");
  testStandinOrigin = origin;
}

/** The URL a pinned fetch goes to: itself, or in tests the stand-in (also src/admin/access/access-token.ts's certificates). */
export function redirectedForTests(url: URL): string {
  return testStandinOrigin === null ? url.href : `${testStandinOrigin}${url.pathname}${url.search}`;
}

/**
 * A brake on guessing the admin token, through the sign-in form and as an API bearer token alike: after
 * LOGIN_FAILURES_PER_WINDOW wrong tokens from one client (CF-Connecting-IP) within a minute, that client's wrong
 * tokens are answered 429 with Retry-After until the minute is over. The right token is never refused, throttled
 * or not: whoever shares the operator's address (an office, a carrier's NAT) must not be able to lock them out.
 * So the brake marks and slows scripted guessing without bounding it; the real defence is a token too random to
 * guess (./token-strength.ts refuses a short or repetitive one). Kept in memory per isolate, so a sign-in costs
 * no D1 write or Durable Object call; the price is that each isolate counts on its own.
 */

export const LOGIN_FAILURES_PER_WINDOW = 10;
export const LOGIN_WINDOW_MS = 60_000;
/** Bounds the isolate's memory: past this many clients, the oldest window is forgotten first. */
const MAX_TRACKED_CLIENTS = 10_000;

const failures = new Map<string, { count: number; windowStartedAt: number }>();

/** Who is signing in, as Cloudflare's edge saw it; one shared key where there is no edge (wrangler dev, tests). */
export function loginClient(request: Request): string {
  return request.headers.get("cf-connecting-ip") ?? "no-client-address";
}

function currentWindow(client: string, now: number) {
  const entry = failures.get(client);
  if (entry && now - entry.windowStartedAt >= LOGIN_WINDOW_MS) {
    failures.delete(client);
    return undefined;
  }
  return entry;
}

/** Seconds until this client may try again, or null when it may try now. */
function loginRetryAfterSeconds(client: string, now: number): number | null {
  const entry = currentWindow(client, now);
  if (!entry || entry.count < LOGIN_FAILURES_PER_WINDOW) return null;
  return Math.max(1, Math.ceil((entry.windowStartedAt + LOGIN_WINDOW_MS - now) / 1000));
}

/**
 * Counts a wrong token from this client. Answers the seconds it must wait when it was already past the limit (the
 * caller answers 429), else null (an ordinary 401).
 */
export function refuseWrongToken(client: string, now: number): number | null {
  const retryAfter = loginRetryAfterSeconds(client, now);
  recordLoginFailure(client, now);
  return retryAfter;
}

function recordLoginFailure(client: string, now: number): void {
  const entry = currentWindow(client, now);
  if (entry) {
    entry.count += 1;
    return;
  }
  if (failures.size >= MAX_TRACKED_CLIENTS) failures.delete(failures.keys().next().value!);
  failures.set(client, { count: 1, windowStartedAt: now });
}

export function forgetLoginFailures(client: string): void {
  failures.delete(client);
}

// The CLI's two kinds of request: signed deliveries to /webhooks, and the admin API with the bearer token. Both
// turn a connection failure or an error envelope into one line.
import { CliError, EXIT, unreachable } from "./errors.mjs";
import { adminToken, receiverUrl } from "./project.mjs";

const TIMEOUT_MS = 15_000;

/**
 * @param {string} url
 * @param {{ body: string, headers: Record<string, string> }} request
 */
export async function postWebhook(url, request) {
  let response;
  try {
    response = await fetch(url, {
      method: "POST",
      body: request.body,
      headers: request.headers,
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
  } catch (error) {
    throw unreachable(new URL(url).origin, error);
  }
  return { status: response.status, text: await response.text(), headers: response.headers };
}

/**
 * How the CLI signs in to the admin API. Behind Cloudflare Access, its service token (CF_ACCESS_CLIENT_ID and
 * CF_ACCESS_CLIENT_SECRET in the environment) goes on every request; the admin token goes too only when ADMIN_TOKEN
 * is exported, since the Worker reads a bearer token first and Access's assertion only without one
 * (src/admin/access/sign-in.ts). Without a service token, the admin token as ever (.dev.vars locally).
 * @param {import("./project.mjs").ProjectOptions} options
 * @returns {Record<string, string>}
 */
export function adminAuthHeaders(options) {
  const id = process.env.CF_ACCESS_CLIENT_ID;
  const secret = process.env.CF_ACCESS_CLIENT_SECRET;
  const access = id && secret ? { "cf-access-client-id": id, "cf-access-client-secret": secret } : null;
  if (access && !process.env.ADMIN_TOKEN) return access;
  return { authorization: `Bearer ${adminToken(options)}`, ...access };
}

/**
 * One admin API call; answers the parsed JSON, or throws one line built from the error envelope.
 * @param {import("./project.mjs").ProjectOptions} options
 * @param {string} path e.g. `/receipts?source=demo`
 * @param {{ method?: string, body?: unknown }} [init]
 */
export async function adminRequest(options, path, init = {}) {
  const base = receiverUrl(options);
  let response;
  try {
    response = await fetch(`${base}/admin/api${path}`, {
      method: init.method ?? "GET",
      headers: {
        ...adminAuthHeaders(options),
        ...(init.body === undefined ? {} : { "content-type": "application/json" }),
      },
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
  } catch (error) {
    throw unreachable(base, error);
  }
  const text = await response.text();
  /** @type {any} */
  let parsed;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new CliError(
      `${base} answered ${response.status} with something that is not the admin API: is RECEIVER_URL pointing at the receiver?`,
      EXIT.setup,
    );
  }
  if (response.ok) return parsed;
  const message = parsed?.error?.message ?? `HTTP ${response.status}`;
  if (response.status === 401)
    throw new CliError(
      `the admin API refused the token: use the ADMIN_TOKEN the receiver has (.dev.vars locally, or export ADMIN_TOKEN=…)`,
      EXIT.setup,
    );
  if (response.status === 503)
    throw new CliError(
      `the admin API is shut: ${message} Set ADMIN_TOKEN (16+ characters) in .dev.vars and restart npm start`,
      EXIT.setup,
    );
  throw new CliError(
    message,
    response.status === 404 ? EXIT.notFound : response.status === 400 ? EXIT.usage : EXIT.failed,
  );
}

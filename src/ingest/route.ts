import { Hono, type Context } from "hono";
import { apiError } from "../lib/errors";
import { logError, logEvent, logsSuccesses } from "../lib/log";
import { recordDelivery } from "../lib/metrics";
import { adapterFor } from "../providers/registry";
import { SourceConfigError } from "../sources/config";
import { lookupSource } from "../sources/registry";
import { sourceKeys } from "../sources/secrets-set";
import { claimEvent, pickHeaders } from "../claims/claim-event";
import { acknowledge } from "./acknowledge";
import { keepSecret, secretFingerprint, storedSecrets } from "./handshake-secrets";
import { readBodyWithCap } from "./read-body";

/**
 * POST /webhooks/:source — the acknowledgement path. It does four things: look up the source, read the bytes,
 * verify, and claim in one Durable Object transaction. Everything slower happens after the 2xx.
 *
 * GET /webhooks/:source reaches only adapters that answer a challenge over GET (Meta, Dropbox, Okta): the same
 * lookup and verification, and the answer is always a handshake, never a claim. Any other method, or GET to a
 * source whose adapter does not answer it, is a 405 naming the methods that source accepts.
 */
export const webhooks = new Hono<{ Bindings: Env }>();

type Method = "GET" | "POST";

webhooks.post("/:source", (c) => receive(c, "POST"));
webhooks.get("/:source", (c) => receive(c, "GET"));
webhooks.all("/:source", (c) => {
  const lookup = lookupSourceOrThrow(c.env, c.req.param("source")!);
  const allowed: readonly Method[] = lookup.kind === "valid" ? (adapterFor(lookup.source.provider)!.methods ?? ["POST"]) : ["POST"];
  throw methodNotAllowed(allowed);
});

function methodNotAllowed(allowed: readonly Method[]) {
  return apiError(405, "method_not_allowed", `This source accepts ${allowed.join(" and ")} only.`, { allow: allowed.join(", ") });
}

function lookupSourceOrThrow(env: Env, sourceName: string) {
  let lookup;
  try {
    lookup = lookupSource(env, sourceName);
  } catch (error) {
    // SOURCES itself is unreadable: no source can be told apart, so none accepts anything.
    if (error instanceof SourceConfigError) {
      logError("config.invalid", error);
      throw apiError(503, "source_config_invalid", "The receiver's source configuration is invalid; nothing was accepted.");
    }
    throw error;
  }
  if (lookup.kind === "unknown") throw apiError(404, "unknown_source", "No webhook source is configured under this name.");
  return lookup;
}

async function receive(c: Context<{ Bindings: Env }>, method: Method) {
  const startedAt = Date.now();
  const sourceName = c.req.param("source")!;
  const requestId = c.req.header("cf-ray") ?? crypto.randomUUID();

  const lookup = lookupSourceOrThrow(c.env, sourceName);
  if (lookup.kind === "invalid") {
    // Only this source is out of service; 503 makes its sender retry once the table is fixed. The problems quote
    // config (never a secret's value) and stay in the log and the admin API: they are not for the caller.
    logEvent("config.invalid", { source: sourceName, problems: lookup.problems.join("; "), requestId });
    throw apiError(503, "source_config_invalid", "This source's configuration is invalid; nothing was accepted.");
  }
  const { source } = lookup;
  const adapter = adapterFor(source.provider)!;
  if (!(adapter.methods ?? ["POST"]).includes(method)) throw methodNotAllowed(adapter.methods ?? ["POST"]);

  // A GET challenge has no body to read.
  const rawBody = method === "GET" ? new Uint8Array(0) : await readBodyWithCap(c.req.raw, source.maxBodyBytes);
  if (rawBody === "too-large") {
    logEvent("delivery.rejected", { source: sourceName, disposition: "too_large", requestId });
    recordDelivery(c.env, { source: sourceName, disposition: "too_large", signature: "unchecked", ackMs: Date.now() - startedAt });
    throw apiError(413, "payload_too_large", `The body exceeds this source's limit of ${source.maxBodyBytes} bytes.`);
  }
  if (rawBody === "unreadable") {
    // The sender's stream broke part-way: its fault, so a 4xx and an ordinary line, not an error.
    logEvent("delivery.rejected", { source: sourceName, disposition: "body_unreadable", requestId });
    recordDelivery(c.env, { source: sourceName, disposition: "body_unreadable", signature: "unchecked", ackMs: Date.now() - startedAt });
    throw apiError(400, "body_unreadable", "The request body could not be read to its end.");
  }

  const { secrets, verifyTokens, signingUnset, verifyTokensUnset, signingExpired } = sourceKeys(source, c.env, startedAt);
  if (signingUnset.length > 0) {
    // A deploy mistake, not the sender's: 503 makes it retry once the secret is set.
    logEvent("config.secret_missing", { source: sourceName, missing: signingUnset.join(","), requestId });
    throw apiError(503, "source_secret_missing", "This source's signing secret is not configured yet.");
  }
  if (verifyTokensUnset.length > 0) {
    // The same deploy mistake for the token that proves a handshake: 503, never a 401 the sender takes as final.
    logEvent("config.secret_missing", { source: sourceName, missing: "verify_token", requestId });
    throw apiError(503, "source_secret_missing", "This source's verify token is not configured yet.");
  }
  if (signingExpired.length > 0) {
    // Every listed secret is past its expires: a rotation left unfinished, not a forgery. 503 so the sender keeps
    // its deliveries until a fresh secret is deployed; a 401 would make it give up on genuine ones.
    logEvent("config.secrets_expired", { source: sourceName, expired: signingExpired.join(","), requestId });
    throw apiError(503, "source_secrets_expired", "Every signing secret of this source has expired; nothing was accepted.");
  }

  const verifyWith = async (fresh: boolean) => {
    let kept;
    try {
      kept = adapter.storedSecrets ? await storedSecrets(c.env, sourceName, startedAt, fresh) : undefined;
    } catch (error) {
      // Without the sender's kept secret nothing can be verified: 503 so it retries, never a final 401.
      logError("delivery.stored_secret_unavailable", error, { source: sourceName, requestId });
      throw apiError(503, "source_secret_unavailable", "This source's signing secret could not be read; retry later.", { "retry-after": "5" });
    }
    const result = await adapter.verify({
      source: sourceName,
      method,
      rawBody,
      headers: c.req.raw.headers,
      url: c.req.url,
      secrets,
      now: startedAt,
      options: source.options,
      verifyTokens,
      storedSecrets: kept?.secrets,
    });
    return { result, cached: kept?.cached ?? false };
  };
  let { result: verdict, cached } = await verifyWith(false);
  // A kept secret handed over in another isolate since this one cached the list: read it once more.
  if (verdict.kind === "rejected" && verdict.reason === "signature-mismatch" && cached) ({ result: verdict } = await verifyWith(true));
  if (verdict.kind === "rejected") {
    logEvent("delivery.rejected", {
      source: sourceName,
      disposition: "rejected",
      signature: verdict.reason,
      requestId,
      durationMs: Date.now() - startedAt,
    });
    recordDelivery(c.env, { source: sourceName, disposition: "rejected", signature: verdict.reason, ackMs: Date.now() - startedAt });
    // One answer for every failed check: which part failed is for the operator's logs, not the caller.
    throw apiError(401, "signature_invalid", "The delivery's signature could not be verified.");
  }
  if (verdict.kind === "unavailable") {
    // The sender's published key could not be fetched: neither accepted nor refused, so the sender retries.
    logEvent("delivery.key_unavailable", { source: sourceName, reason: verdict.reason, requestId });
    throw apiError(503, "verification_key_unavailable", "The key this delivery is signed with could not be fetched; retry later.", { "retry-after": "5" });
  }
  if (verdict.kind === "handshake") {
    let kept: { kept?: string; fingerprint?: string } = {};
    if (verdict.keepSecret !== undefined) {
      try {
        kept = { kept: await keepSecret(c.env, sourceName, verdict.keepSecret, startedAt), fingerprint: await secretFingerprint(verdict.keepSecret) };
      } catch (error) {
        // Answering without keeping the secret would confirm a hook whose deliveries could never verify.
        logError("delivery.handshake_store_failed", error, { source: sourceName, requestId });
        throw apiError(503, "handshake_unavailable", "The handshake could not be stored; retry later.", { "retry-after": "5" });
      }
    }
    // A pending secret gets the same answer as an active one: the caller learns nothing of what the source holds,
    // and a genuine new hook is established, its deliveries refused (and retried by the sender) until approved.
    logEvent("delivery.handshake", { source: sourceName, method, signature: "valid", ...kept, requestId });
    return verdict.response;
  }
  if (method !== "POST") {
    // An adapter answers GET only with a handshake; anything else it says about a GET is refused, never claimed.
    throw apiError(401, "signature_invalid", "The delivery's signature could not be verified.");
  }

  const { identity } = verdict;
  let claimed;
  try {
    claimed = await claimEvent(c.env, {
      source,
      identity,
      rawBody: verdict.storedBody ?? rawBody,
      keptHeaders: pickHeaders(c.req.raw.headers, adapter.keptHeaders),
      receivedAt: startedAt,
      provenance: "live",
    });
  } catch (error) {
    logError("delivery.claim_failed", error, { source: sourceName, eventKey: identity.eventKey, requestId });
    throw apiError(503, "claim_unavailable", "The delivery could not be stored; retry later.", { "retry-after": "5" });
  }

  // A first acceptance is a routine line, logged only with LOG_SUCCESSES = "true"; a duplicate or quarantine always logs.
  if (claimed.disposition !== "accepted" || logsSuccesses(c.env)) {
    logEvent("delivery", {
      source: sourceName,
      eventKey: identity.eventKey,
      eventType: identity.eventType,
      disposition: claimed.disposition,
      receipt: claimed.receiptId,
      signature: "valid",
      timestampAgeSeconds: verdict.timestampAgeSeconds,
      requestId,
      durationMs: Date.now() - startedAt,
    });
  }
  recordDelivery(c.env, { source: sourceName, disposition: claimed.disposition, signature: "valid", ackMs: Date.now() - startedAt });
  return acknowledge(claimed, verdict.acknowledgement);
}

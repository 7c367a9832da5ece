import { Hono } from "hono";
import { apiError } from "../lib/errors";
import { logError, logEvent } from "../lib/log";
import { adapterFor } from "../providers/registry";
import { SourceConfigError, usableSecrets } from "../sources/config";
import { lookupSource } from "../sources/registry";
import { claimEvent, pickHeaders } from "./claim";
import { acknowledge } from "./acknowledge";
import { readBodyWithCap } from "./read-body";

/**
 * POST /webhooks/:source — the acknowledgement path. It does four things: look up the source, read the bytes,
 * verify, and claim in one Durable Object transaction. Everything slower happens after the 2xx.
 */
export const webhooks = new Hono<{ Bindings: Env }>();

webhooks.post("/:source", async (c) => {
  const startedAt = Date.now();
  const sourceName = c.req.param("source");
  const requestId = c.req.header("cf-ray") ?? crypto.randomUUID();

  let lookup;
  try {
    lookup = lookupSource(c.env, sourceName);
  } catch (error) {
    // SOURCES itself is unreadable: no source can be told apart, so none accepts anything.
    if (error instanceof SourceConfigError) {
      logError("config.invalid", error);
      throw apiError(503, "source_config_invalid", "The receiver's source configuration is invalid; nothing was accepted.");
    }
    throw error;
  }
  if (lookup.kind === "unknown") throw apiError(404, "unknown_source", "No webhook source is configured under this name.");
  if (lookup.kind === "invalid") {
    // Only this source is out of service; 503 makes its sender retry once the table is fixed. The problems quote
    // config (never a secret's value) and stay in the log and the admin API: they are not for the caller.
    logEvent("config.invalid", { source: sourceName, problems: lookup.problems.join("; "), requestId });
    throw apiError(503, "source_config_invalid", "This source's configuration is invalid; nothing was accepted.");
  }
  const { source } = lookup;
  const adapter = adapterFor(source.provider)!;

  const rawBody = await readBodyWithCap(c.req.raw, source.maxBodyBytes);
  if (rawBody === "too-large") {
    logEvent("delivery.rejected", { source: sourceName, disposition: "too_large", requestId });
    throw apiError(413, "payload_too_large", `The body exceeds this source's limit of ${source.maxBodyBytes} bytes.`);
  }
  if (rawBody === "unreadable") {
    // The sender's stream broke part-way: its fault, so a 4xx and an ordinary line, not an error.
    logEvent("delivery.rejected", { source: sourceName, disposition: "body_unreadable", requestId });
    throw apiError(400, "body_unreadable", "The request body could not be read to its end.");
  }

  const { secrets, missing } = usableSecrets(source, c.env, startedAt);
  if (missing.length > 0 && secrets.length === 0) {
    // A deploy mistake, not the sender's: 503 makes it retry once the secret is set.
    logEvent("config.secret_missing", { source: sourceName, missing: missing.join(","), requestId });
    throw apiError(503, "source_secret_missing", "This source's signing secret is not configured yet.");
  }

  const verdict = await adapter.verify({
    rawBody,
    headers: c.req.raw.headers,
    url: c.req.url,
    secrets,
    now: startedAt,
    options: source.options,
  });
  if (verdict.kind === "rejected") {
    logEvent("delivery.rejected", {
      source: sourceName,
      disposition: "rejected",
      signature: verdict.reason,
      requestId,
      durationMs: Date.now() - startedAt,
    });
    // One answer for every failed check: which part failed is for the operator's logs, not the caller.
    throw apiError(401, "signature_invalid", "The delivery's signature could not be verified.");
  }
  if (verdict.kind === "handshake") {
    logEvent("delivery.handshake", { source: sourceName, signature: "valid", requestId });
    return verdict.response;
  }

  const { identity } = verdict;
  let claimed;
  try {
    claimed = await claimEvent(c.env, {
      source,
      identity,
      rawBody,
      keptHeaders: pickHeaders(c.req.raw.headers, adapter.keptHeaders),
      receivedAt: startedAt,
      provenance: "live",
    });
  } catch (error) {
    logError("delivery.claim_failed", error, { source: sourceName, eventKey: identity.eventKey, requestId });
    throw apiError(503, "claim_unavailable", "The delivery could not be stored; retry later.", { "retry-after": "5" });
  }

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
  return acknowledge(claimed, verdict.acknowledgement);
});

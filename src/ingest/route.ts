import { type Context, Hono } from "hono";
import { recordDelivery } from "../lib/analytics";
import { apiError } from "../lib/errors";
import { logError, logEvent } from "../lib/log";
import { flushSignatureTally, type SignatureOutcome, tallySignature } from "../monitor/signature-tally";
import { adapterFor } from "../providers/registry";
import type { ProviderAdapter, VerifyResult } from "../providers/types";
import { type SourceConfig, SourceConfigError } from "../sources/config";
import { lookupSource } from "../sources/registry";
import { sourceKeys } from "../sources/secrets-set";
import { acknowledgeClaims, claimDelivery } from "./claim-delivery";
import { activeKeptSecrets, secretFingerprint } from "./kept-secret-reads";
import { handshakeClient, keepSecret } from "./kept-secrets";
import { readBodyWithCap } from "./read-body";
import { secretToStamp } from "./secret-choice";

/**
 * POST /webhooks/:source — the acknowledgement path, in named steps: look up the source, read the bytes, resolve
 * the keys, verify, then answer a handshake or claim each event the delivery carries in one Durable Object
 * transaction, and acknowledge. Each step logs and answers its own refusal. Everything slower happens after the 2xx.
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
  const allowed: readonly Method[] =
    lookup.kind === "valid" ? (adapterFor(lookup.source.provider)!.methods ?? ["POST"]) : ["POST"];
  throw methodNotAllowed(allowed);
});

function methodNotAllowed(allowed: readonly Method[]) {
  return apiError(405, "method_not_allowed", `This source accepts ${allowed.join(" and ")} only.`, {
    allow: allowed.join(", "),
  });
}

function lookupSourceOrThrow(env: Env, sourceName: string) {
  let lookup;
  try {
    lookup = lookupSource(env, sourceName);
  } catch (error) {
    // SOURCES itself is unreadable: no source can be told apart, so none accepts anything.
    if (error instanceof SourceConfigError) {
      logError("config.invalid", error);
      throw apiError(
        503,
        "source_config_invalid",
        "The receiver's source configuration is invalid; nothing was accepted.",
      );
    }
    throw error;
  }
  if (lookup.kind === "unknown")
    throw apiError(404, "unknown_source", "No webhook source is configured under this name.");
  return lookup;
}

/** What every step knows of the delivery in hand: enough to name it in a log line and to meter it. */
interface Delivery {
  readonly env: Env;
  readonly sourceName: string;
  readonly method: Method;
  readonly requestId: string;
  readonly startedAt: number;
  /** The request's waitUntil, for work after the answer; null where there is none (a test calling app.fetch). */
  readonly waitUntil: ((work: Promise<unknown>) => void) | null;
}

type Verified = Exclude<VerifyResult, { kind: "rejected" | "unavailable" }>;

async function receive(c: Context<{ Bindings: Env }>, method: Method) {
  const delivery: Delivery = {
    env: c.env,
    sourceName: c.req.param("source")!,
    method,
    requestId: c.req.header("cf-ray") ?? crypto.randomUUID(),
    startedAt: Date.now(),
    waitUntil: waitUntilOf(c),
  };
  const request = c.req.raw;
  const { source, adapter } = lookUp(delivery);
  const rawBody = await readBody(delivery, request, source.maxBodyBytes);
  const keys = keysOf(delivery, source);
  const { verdict, secretsToChooseFrom } = await verify(delivery, request, c.req.url, {
    source,
    adapter,
    keys,
    rawBody,
  });
  if (verdict.kind === "handshake") return answerHandshake(delivery, request, verdict);
  // An adapter answers GET only with a handshake; anything else it says about a GET is refused, never claimed.
  if (method !== "POST") throw signatureInvalid();
  countSignature(delivery, { kind: "verified" });
  const stampedSecret = secretToStamp(verdict.verifiedBy, secretsToChooseFrom);
  const claims = await claimDelivery(delivery, request, { source, adapter, rawBody, verdict, stampedSecret });
  return acknowledgeClaims(delivery, claims, verdict);
}

/** 1. Look up: the source, its adapter, and whether that adapter takes this method. */
function lookUp(delivery: Delivery) {
  const lookup = lookupSourceOrThrow(delivery.env, delivery.sourceName);
  if (lookup.kind === "invalid") {
    // Only this source is out of service; 503 makes its sender retry once the table is fixed. The problems quote
    // config (never a secret's value) and stay in the log and the admin API: they are not for the caller.
    logEvent("config.invalid", {
      source: delivery.sourceName,
      problems: lookup.problems.join("; "),
      requestId: delivery.requestId,
    });
    throw apiError(503, "source_config_invalid", "This source's configuration is invalid; nothing was accepted.");
  }
  const { source } = lookup;
  const adapter = adapterFor(source.provider)!;
  if (!(adapter.methods ?? ["POST"]).includes(delivery.method)) throw methodNotAllowed(adapter.methods ?? ["POST"]);
  return { source, adapter };
}

/** 2. Read the body: the exact bytes, up to the source's cap. A GET challenge has none. */
async function readBody(delivery: Delivery, request: Request, maxBodyBytes: number): Promise<Uint8Array> {
  if (delivery.method === "GET") return new Uint8Array(0);
  const rawBody = await readBodyWithCap(request, maxBodyBytes);
  if (rawBody === "too-large") {
    refusedUnread(delivery, "too_large");
    throw apiError(413, "payload_too_large", `The body exceeds this source's limit of ${maxBodyBytes} bytes.`);
  }
  if (rawBody === "unreadable") {
    // The sender's stream broke part-way: its fault, so a 4xx and an ordinary line, not an error.
    refusedUnread(delivery, "body_unreadable");
    throw apiError(400, "body_unreadable", "The request body could not be read to its end.");
  }
  return rawBody;
}

function refusedUnread(delivery: Delivery, disposition: "too_large" | "body_unreadable"): void {
  const { env, sourceName: source, requestId, startedAt } = delivery;
  logEvent("delivery.rejected", { source, disposition, requestId });
  recordDelivery(env, { source, disposition, signature: "unchecked", ackMs: Date.now() - startedAt });
}

/** 3. Keys: the secrets and verify tokens config names. Any not deployed, or all expired, is ours to fix: 503. */
function keysOf(delivery: Delivery, source: SourceConfig) {
  const { secrets, verifyTokens, signingUnset, verifyTokensUnset, signingExpired } = sourceKeys(
    source,
    delivery.env,
    delivery.startedAt,
  );
  const { sourceName: name, requestId } = delivery;
  if (signingUnset.length > 0) {
    // A deploy mistake, not the sender's: 503 makes it retry once the secret is set.
    logEvent("config.secret_missing", { source: name, missing: signingUnset.join(","), requestId });
    throw apiError(503, "source_secret_missing", "This source's signing secret is not configured yet.");
  }
  if (verifyTokensUnset.length > 0) {
    // The same deploy mistake for the token that proves a handshake: 503, never a 401 the sender takes as final.
    logEvent("config.secret_missing", { source: name, missing: "verify_token", requestId });
    throw apiError(503, "source_secret_missing", "This source's verify token is not configured yet.");
  }
  if (signingExpired.length > 0) {
    // Every listed secret is past its expires: a rotation left unfinished, not a forgery. 503 so the sender keeps
    // its deliveries until a fresh secret is deployed; a 401 would make it give up on genuine ones.
    logEvent("config.secrets_expired", { source: name, expired: signingExpired.join(","), requestId });
    throw apiError(
      503,
      "source_secrets_expired",
      "Every signing secret of this source has expired; nothing was accepted.",
    );
  }
  return { secrets, verifyTokens };
}

interface VerifyWith {
  source: SourceConfig;
  adapter: ProviderAdapter;
  keys: ReturnType<typeof keysOf>;
  rawBody: Uint8Array;
}

/** 4. Verify: an event or a handshake comes back; a forgery (401) or an unfetchable key (503) is thrown here. */
async function verify(
  delivery: Delivery,
  request: Request,
  url: string,
  input: VerifyWith,
): Promise<{ verdict: Verified; secretsToChooseFrom: number }> {
  let { verdict, rereadable, secretsToChooseFrom } = await verifyOnce(delivery, request, url, input, false);
  // A handshake secret handed over in another isolate since this one cached the list: read it once more.
  if (verdict.kind === "rejected" && verdict.reason === "signature-mismatch" && rereadable)
    ({ verdict, secretsToChooseFrom } = await verifyOnce(delivery, request, url, input, true));
  const { env, sourceName: source, requestId, startedAt } = delivery;
  if (verdict.kind === "rejected") {
    logEvent("delivery.rejected", {
      source,
      disposition: "rejected",
      signature: verdict.reason,
      requestId,
      durationMs: Date.now() - startedAt,
    });
    recordDelivery(env, { source, disposition: "rejected", signature: verdict.reason, ackMs: Date.now() - startedAt });
    countSignature(delivery, { kind: "rejected", reason: verdict.reason });
    throw signatureInvalid();
  }
  if (verdict.kind === "unavailable") {
    // The sender's published key could not be fetched: neither accepted nor refused, so the sender retries.
    logEvent("delivery.key_unavailable", { source, reason: verdict.reason, requestId });
    throw apiError(
      503,
      "verification_key_unavailable",
      "The key this delivery is signed with could not be fetched; retry later.",
      { "retry-after": "5" },
    );
  }
  return { verdict, secretsToChooseFrom };
}

async function verifyOnce(
  delivery: Delivery,
  request: Request,
  url: string,
  { source, adapter, keys, rawBody }: VerifyWith,
  again: boolean,
) {
  const { env, sourceName, method, requestId, startedAt } = delivery;
  let kept;
  try {
    kept = adapter.keptSecrets ? await activeKeptSecrets(env, sourceName, startedAt, again) : undefined;
  } catch (error) {
    // Without the sender's handshake secret nothing can be verified: 503 so it retries, never a final 401.
    logError("delivery.stored_secret_unavailable", error, { source: sourceName, requestId });
    throw apiError(503, "source_secret_unavailable", "This source's signing secret could not be read; retry later.", {
      "retry-after": "5",
    });
  }
  const verdict = await adapter.verify({
    source: sourceName,
    method,
    rawBody,
    headers: request.headers,
    url,
    secrets: keys.secrets,
    now: startedAt,
    options: source.options,
    dedupeRetentionMs: source.dedupeRetentionMs,
    verifyTokens: keys.verifyTokens,
    keptSecrets: kept?.secrets,
  });
  // A kept-secret adapter verifies with the kept secrets only; its listed ones prove handshakes.
  const secretsToChooseFrom = kept ? kept.secrets.length : keys.secrets.length;
  return { verdict, rereadable: kept?.rereadable ?? false, secretsToChooseFrom };
}

/**
 * Counts the outcome in this isolate's tally and, at most once per interval, hands the tally to the system monitor
 * after the answer (src/monitor/signature-tally.ts): the signature-failures issue, without a row or a Durable
 * Object request per delivery.
 */
function countSignature(delivery: Delivery, outcome: SignatureOutcome): void {
  const now = Date.now();
  tallySignature(delivery.sourceName, outcome, now);
  delivery.waitUntil?.(flushSignatureTally(delivery.env, now));
}

function waitUntilOf(c: Context<{ Bindings: Env }>): Delivery["waitUntil"] {
  try {
    const context = c.executionCtx;
    return (work) => context.waitUntil(work);
  } catch {
    return null;
  }
}

/** One answer for every failed check: which part failed is for the operator's logs, not the caller. */
function signatureInvalid() {
  return apiError(401, "signature_invalid", "The delivery's signature could not be verified.");
}

/** 5a. Handshake: keep any secret it hands over, then answer it. Never claimed. */
async function answerHandshake(
  delivery: Delivery,
  request: Request,
  verdict: Extract<Verified, { kind: "handshake" }>,
): Promise<Response> {
  const { env, sourceName: source, method, requestId, startedAt } = delivery;
  let kept: { kept?: string; fingerprint?: string } = {};
  if (verdict.keepSecret !== undefined) {
    try {
      kept = {
        kept: await keepSecret(env, source, verdict.keepSecret, startedAt, handshakeClient(request.headers)),
        fingerprint: await secretFingerprint(verdict.keepSecret),
      };
    } catch (error) {
      // Answering without keeping the secret would confirm a hook whose deliveries could never verify.
      logError("delivery.handshake_store_failed", error, { source, requestId });
      throw apiError(503, "handshake_unavailable", "The handshake could not be stored; retry later.", {
        "retry-after": "5",
      });
    }
  }
  if (kept.kept === "refused") {
    // Confirming the hook would leave a sender whose deliveries can never verify: the operator clears the list first.
    logEvent("delivery.handshake", { source, method, signature: "valid", ...kept, requestId });
    throw apiError(
      409,
      "pending_secrets_full",
      "This source already holds the most pending secrets it keeps; an operator must approve or revoke one first.",
    );
  }
  // A pending secret gets the same answer as an active one: the caller learns nothing of what the source holds,
  // and a genuine new hook is established, its deliveries refused (and retried by the sender) until approved.
  logEvent("delivery.handshake", { source, method, signature: "valid", ...kept, requestId });
  return verdict.response;
}

// biome-ignore-all lint/suspicious/noTemplateCurlyInString: the snippets are source text, template literals included
// The hand-written mutants of the mutation pass (scripts/mutate.mjs; docs/testing.md, "Mutation pass"). Each is one
// plausible bug: `from` (an exact snippet, found once in `file`) becomes `to`, and `tests` are the one to three test
// files of that area expected to notice. `class` groups them in the report.

const RETRY = "src/consumers/decide/retry-schedule.ts";
const DECIDE = "src/consumers/decide/decide.ts";
const LEASE = "src/consumers/lease/delivery-lease.ts";
const RELEASE = "src/consumers/deliveries/release-waiting.ts";
const AUTH = "src/admin/guards/auth.ts";
const THROTTLE = "src/admin/guards/login-throttle.ts";
const ORIGIN = "src/admin/guards/same-origin.ts";
const STRENGTH = "src/admin/guards/token-strength.ts";
const BODY_CAP = "src/admin/guards/body-cap.ts";
const READ_BODY = "src/ingest/read-body.ts";
const ROUTE = "src/ingest/route.ts";
const CLAIM = "src/ingest/claim-delivery.ts";
const SIGNED = "src/providers/signed.ts";
const STANDARD = "src/providers/standard-webhooks.ts";
const KEY_CACHE = "src/providers/key-cache.ts";
const CONFIG = "src/sources/config.ts";
const SECRETS_SET = "src/sources/secrets-set.ts";
const BODY_THRESHOLD = "src/sources/body-threshold.ts";

const retryTests = ["test/consumers/retry-schedule.test.ts", "test/consumers/decide.test.ts"];
const budgetTests = [
  "test/consumers/retry-schedule.test.ts",
  "test/consumers/max-age.test.ts",
  "test/consumers/decide.test.ts",
];
const routeRetryTests = [
  "test/routing/route-retry.test.ts",
  "test/routing/fan-out.test.ts",
  "test/consumers/delivery-lease.test.ts",
];
const releaseTests = ["test/routing/destination-back.test.ts", "test/routing/release-edges.test.ts"];
const tokenTests = ["test/admin/token-guard.test.ts", "test/admin/guard-edges.test.ts"];
const sessionTests = [
  "test/admin/token-guard.test.ts",
  "test/admin/dashboard.test.ts",
  "test/admin/guard-edges.test.ts",
];
const bodyCapTests = ["test/admin/body-cap.test.ts", "test/admin/guard-edges.test.ts"];
const readBodyTests = [
  "test/ingest/body-read.test.ts",
  "test/ingest/sources.test.ts",
  "test/ingest/body-cap-edges.test.ts",
];
const pipelineTests = [
  "test/providers/pipeline.test.ts",
  "test/ingest/verification.test.ts",
  "test/providers/signed-edges.test.ts",
];
const budgetCostTests = ["test/ingest/signature-work.test.ts", "test/providers/rejection-cost.test.ts"];
const standardTests = ["test/providers/standard-webhooks.test.ts", "test/providers/standard-webhooks-split.test.ts"];
const keyCacheTests = ["test/providers/key-fetch.test.ts"];
const crossSiteTests = ["test/admin/cross-site.test.ts", "test/admin/guard-edges.test.ts"];
const configTests = ["test/sources/config.test.ts", "test/sources/config-edges.test.ts"];

export const MUTANTS = [
  // src/consumers/decide/retry-schedule.ts
  {
    id: "retry.exponent-off-by-one",
    class: "off-by-one",
    file: RETRY,
    tests: retryTests,
    from: "2 ** Math.max(0, retryNumber - 1)",
    to: "2 ** Math.max(0, retryNumber)",
  },
  {
    id: "retry.cap-dropped",
    class: "dropped guard",
    file: RETRY,
    tests: retryTests,
    from: "const capped = Math.min(exponential, policy.maxDelaySeconds);",
    to: "const capped = exponential;",
  },
  {
    id: "retry.one-second-floor-dropped",
    class: "dropped guard",
    file: RETRY,
    tests: retryTests,
    from: "return Math.max(1, Math.round(jittered));",
    to: "return Math.round(jittered);",
  },
  {
    id: "retry.one-sided-jitter",
    class: "arithmetic",
    file: RETRY,
    tests: retryTests,
    from: "(2 * random() - 1)",
    to: "random()",
  },
  {
    id: "retry.retry-after-uncapped",
    class: "size cap",
    file: RETRY,
    tests: retryTests,
    from: "return Math.min(Math.max(retryAfterSeconds, 1), policy.maxDelaySeconds);",
    to: "return Math.max(retryAfterSeconds, 1);",
  },
  {
    id: "retry.retry-after-past-date",
    class: "boundary",
    file: RETRY,
    tests: retryTests,
    from: "Math.max(0, Math.ceil((date - now) / 1000))",
    to: "Math.ceil((date - now) / 1000)",
  },

  // src/consumers/decide/decide.ts
  {
    id: "decide.max-retries-boundary",
    class: "boundary",
    file: DECIDE,
    tests: budgetTests,
    from: "facts.attemptNumberInRun > policy.maxRetries",
    to: "facts.attemptNumberInRun >= policy.maxRetries",
  },
  {
    id: "decide.max-age-boundary",
    class: "boundary",
    file: DECIDE,
    tests: budgetTests,
    from: "if (nextAttemptAt > deadline) {",
    to: "if (nextAttemptAt >= deadline) {",
  },
  {
    id: "decide.replay-keeps-old-budget",
    class: "wrong field",
    file: DECIDE,
    tests: budgetTests,
    from: "return Math.max(receipt.receivedAt, receipt.replayedAt ?? 0);",
    to: "return receipt.receivedAt;",
  },
  {
    id: "decide.unknown-reported-dead",
    class: "wrong constant",
    file: DECIDE,
    tests: [...budgetTests, "test/consumers/leases.test.ts"],
    from: `const outcome = result.status === "unknown" ? "unknown" : "dead";
        return deadDecision(\`gave up`,
    to: `const outcome = "dead";
        return deadDecision(\`gave up`,
  },
  {
    id: "decide.error-uncapped",
    class: "size cap",
    file: DECIDE,
    tests: budgetTests,
    from: "const error = result.error.slice(0, MAX_ERROR_CHARS);",
    to: "const error = result.error;",
  },
  {
    id: "decide.delay-unit",
    class: "unit",
    file: DECIDE,
    tests: budgetTests,
    from: "facts.finishedAt + delaySeconds * 1000",
    to: "facts.finishedAt + delaySeconds",
  },
  {
    id: "decide.queue-delay-rounds-down",
    class: "off-by-one",
    file: DECIDE,
    tests: budgetTests,
    from: "Math.max(0, Math.ceil(seconds))",
    to: "Math.max(0, Math.floor(seconds))",
  },

  // src/consumers/lease/delivery-lease.ts
  {
    id: "lease.due-boundary",
    class: "boundary",
    file: LEASE,
    tests: routeRetryTests,
    from: "lte(deliveries.nextAttemptAt, now)",
    to: "lt(deliveries.nextAttemptAt, now)",
  },
  {
    id: "lease.expired-lease-not-retaken",
    class: "dropped guard",
    file: LEASE,
    tests: routeRetryTests,
    from: `and(eq(deliveries.status, "processing"), lt(deliveries.leaseUntil, now)),`,
    to: `and(eq(deliveries.status, "processing"), lt(deliveries.leaseUntil, 0)),`,
  },
  {
    id: "lease.committed-released",
    class: "dropped guard",
    file: LEASE,
    tests: routeRetryTests,
    from: `isNull(deliveries.committedAt),
        eq(deliveries.status, "processing"),`,
    to: `eq(deliveries.status, "processing"),`,
  },
  {
    id: "lease.release-keeps-count",
    class: "dropped statement",
    file: LEASE,
    tests: routeRetryTests,
    from: "leaseUntil: null, attempts: sql`${deliveries.attempts} - 1` }",
    to: "leaseUntil: null }",
  },

  // src/consumers/deliveries/release-waiting.ts
  {
    id: "release.first-attempt-counts-as-waited",
    class: "boundary",
    file: RELEASE,
    tests: releaseTests,
    from: "return delivery.attempts > 0;",
    to: "return delivery.attempts >= 0;",
  },
  {
    id: "release.ordered-route-released",
    class: "dropped guard",
    file: RELEASE,
    tests: releaseTests,
    from: "if (route.rules.ordering) return false;",
    to: "",
  },
  {
    id: "release.in-flight-limit-ignored",
    class: "dropped guard",
    file: RELEASE,
    tests: releaseTests,
    from: "control.maxInFlight === null && ",
    to: "",
  },
  {
    id: "release.dead-receipts-released",
    class: "dropped guard",
    file: RELEASE,
    tests: releaseTests,
    from: `eq(receipts.status, "pending"),
      ),`,
    to: `),`,
  },
  {
    id: "release.other-routes-released",
    class: "dropped guard",
    file: RELEASE,
    tests: releaseTests,
    from: `eq(deliveries.status, "pending"),
        eq(deliveries.route, route),`,
    to: `eq(deliveries.status, "pending"),`,
  },

  // src/admin/guards/
  {
    id: "auth.token-compare-not-awaited",
    class: "removed await",
    file: AUTH,
    tests: tokenTests,
    from: "!(await tokensEqual(presented, expected))",
    to: "!tokensEqual(presented, expected)",
  },
  {
    id: "auth.weak-token-accepted",
    class: "dropped guard",
    file: AUTH,
    tests: tokenTests,
    from: "if (configError) throw apiError(503, configError.code, configError.message);",
    to: "",
  },
  {
    id: "auth.tokenless-request-counted",
    class: "inverted condition",
    file: AUTH,
    tests: tokenTests,
    from: "presented ? refuseWrongToken(loginClient(c.req.raw), Date.now()) : null",
    to: "refuseWrongToken(loginClient(c.req.raw), Date.now())",
  },
  {
    id: "auth.session-expiry-boundary",
    class: "boundary",
    file: AUTH,
    tests: sessionTests,
    from: "if (expiresAt <= now) return false;",
    to: "if (expiresAt < now) return false;",
  },
  {
    id: "auth.session-never-expires",
    class: "dropped guard",
    file: AUTH,
    tests: sessionTests,
    from: "if (expiresAt <= now) return false;",
    to: "",
  },
  {
    id: "throttle.limit-off-by-one",
    class: "boundary",
    file: THROTTLE,
    tests: tokenTests,
    from: "entry.count < LOGIN_FAILURES_PER_WINDOW",
    to: "entry.count <= LOGIN_FAILURES_PER_WINDOW",
  },
  {
    id: "throttle.window-boundary",
    class: "boundary",
    file: THROTTLE,
    tests: tokenTests,
    from: "now - entry.windowStartedAt >= LOGIN_WINDOW_MS",
    to: "now - entry.windowStartedAt > LOGIN_WINDOW_MS",
  },
  {
    id: "throttle.retry-after-ignores-elapsed",
    class: "timestamp arithmetic",
    file: THROTTLE,
    tests: tokenTests,
    from: "(entry.windowStartedAt + LOGIN_WINDOW_MS - now) / 1000",
    to: "LOGIN_WINDOW_MS / 1000",
  },
  {
    id: "throttle.clients-unbounded",
    class: "size cap",
    file: THROTTLE,
    tests: tokenTests,
    from: "if (failures.size >= MAX_TRACKED_CLIENTS) failures.delete(failures.keys().next().value!);",
    to: "",
  },
  {
    id: "origin.delete-not-guarded",
    class: "dropped guard",
    file: ORIGIN,
    tests: crossSiteTests,
    from: `["POST", "PUT", "PATCH", "DELETE"]`,
    to: `["POST", "PUT", "PATCH"]`,
  },
  {
    id: "origin.origin-header-ignored",
    class: "dropped guard",
    file: ORIGIN,
    tests: crossSiteTests,
    from: "return origin !== null && origin !== new URL(requestUrl).origin;",
    to: "return false;",
  },
  {
    id: "origin.fetch-site-case",
    class: "normalisation",
    file: ORIGIN,
    tests: crossSiteTests,
    from: "!TRUSTED_FETCH_SITES.has(fetchSite.toLowerCase())",
    to: "!TRUSTED_FETCH_SITES.has(fetchSite)",
  },
  {
    id: "strength.length-boundary",
    class: "boundary",
    file: STRENGTH,
    tests: tokenTests,
    from: "if (token.length < MIN_ADMIN_TOKEN_LENGTH)",
    to: "if (token.length <= MIN_ADMIN_TOKEN_LENGTH)",
  },
  {
    id: "strength.entropy-boundary",
    class: "boundary",
    file: STRENGTH,
    tests: tokenTests,
    from: "tokenEntropyBits(token) < MIN_ADMIN_TOKEN_ENTROPY_BITS",
    to: "tokenEntropyBits(token) <= MIN_ADMIN_TOKEN_ENTROPY_BITS",
  },
  {
    id: "body-cap.off-by-one",
    class: "size cap",
    file: BODY_CAP,
    tests: bodyCapTests,
    from: "readBodyWithCap(c.req.raw, ADMIN_MAX_BODY_BYTES,",
    to: "readBodyWithCap(c.req.raw, ADMIN_MAX_BODY_BYTES + 1,",
  },
  {
    id: "body-cap.unreadable-passed-on",
    class: "dropped guard",
    file: BODY_CAP,
    tests: bodyCapTests,
    from: `if (body === "unreadable") throw`,
    to: `if (body === "") throw`,
  },

  // src/ingest/
  {
    id: "read-body.declared-boundary",
    class: "boundary",
    file: READ_BODY,
    tests: readBodyTests,
    from: "Number.isFinite(declared) && declared <= maxBytes) return readDeclared",
    to: "Number.isFinite(declared) && declared < maxBytes) return readDeclared",
  },
  {
    id: "read-body.chunked-boundary",
    class: "boundary",
    file: READ_BODY,
    tests: readBodyTests,
    from: "if (total > maxBytes) {",
    to: "if (total >= maxBytes) {",
  },
  {
    id: "read-body.declared-length-trusted",
    class: "dropped guard",
    file: READ_BODY,
    tests: readBodyTests,
    from: `return whole.byteLength > maxBytes ? "too-large" : new Uint8Array(whole);`,
    to: "return new Uint8Array(whole);",
  },
  {
    id: "route.get-claimed",
    class: "dropped guard",
    file: ROUTE,
    tests: ["test/providers/handshakes.test.ts"],
    from: `if (method !== "POST") throw signatureInvalid();`,
    to: "",
  },
  {
    id: "route.expired-secrets-401",
    class: "dropped guard",
    file: ROUTE,
    tests: ["test/edges/expired-secrets.test.ts"],
    from: "if (signingExpired.length > 0) {",
    to: "if (false) {",
  },
  {
    id: "route.kept-secret-not-awaited",
    class: "removed await",
    file: ROUTE,
    tests: ["test/providers/kept-secrets.test.ts"],
    from: "kept: await keepSecret(",
    to: "kept: keepSecret(",
  },
  {
    id: "claim.item-claims-whole-body",
    class: "wrong field",
    file: CLAIM,
    tests: ["test/providers/batches.test.ts"],
    from: "rawBody: storedBody ?? rawBody,",
    to: "rawBody,",
  },

  // src/providers/
  {
    id: "signed.tolerance-boundary",
    class: "boundary",
    file: SIGNED,
    tests: pipelineTests,
    from: "if (Math.abs(timestampAgeSeconds) > tolerance)",
    to: "if (Math.abs(timestampAgeSeconds) >= tolerance)",
  },
  {
    id: "signed.future-timestamps-accepted",
    class: "timestamp arithmetic",
    file: SIGNED,
    tests: pipelineTests,
    from: "if (Math.abs(timestampAgeSeconds) > tolerance)",
    to: "if (timestampAgeSeconds > tolerance)",
  },
  {
    id: "signed.no-secret-reason",
    class: "dropped guard",
    file: SIGNED,
    tests: pipelineTests,
    from: `if (input.secrets.length === 0) return rejected("no-usable-secret");`,
    to: "",
  },
  {
    id: "signed.step-budget-boundary",
    class: "boundary",
    file: SIGNED,
    tests: budgetCostTests,
    from: "verificationSteps(candidates, contents.length) > MAX_VERIFICATION_STEPS",
    to: "verificationSteps(candidates, contents.length) >= MAX_VERIFICATION_STEPS",
  },
  {
    id: "signed.event-key-uncapped",
    class: "size cap",
    file: SIGNED,
    tests: pipelineTests,
    from: `if (identity.eventKey.length > MAX_EVENT_KEY_CHARS) return rejected("malformed-payload");`,
    to: "",
  },
  {
    id: "signed.entries-off-by-one",
    class: "boundary",
    file: SIGNED,
    tests: pipelineTests,
    from: "entries.push(entry) > max",
    to: "entries.push(entry) >= max",
  },
  {
    id: "signed.header-cap-boundary",
    class: "boundary",
    file: SIGNED,
    tests: pipelineTests,
    from: "value.length > MAX_HEADER_CHARS",
    to: "value.length >= MAX_HEADER_CHARS",
  },
  {
    id: "signed.unix-seconds-unanchored",
    class: "parsing",
    file: SIGNED,
    tests: pipelineTests,
    from: "!/^\\d{1,15}$/.test(text)",
    to: "!/^\\d{1,15}/.test(text)",
  },
  {
    id: "signed.v0-prefix-unchecked",
    class: "signature base",
    file: SIGNED,
    tests: ["test/providers/slack.test.ts", "test/providers/zoom.test.ts", "test/providers/signed-edges.test.ts"],
    from: ` || !signature.startsWith("v0=")) return "malformed-signature";`,
    to: `) return "malformed-signature";`,
  },
  {
    id: "standard.timestamp-as-number",
    class: "signature base",
    file: STANDARD,
    tests: standardTests,
    from: "concatBytes(utf8Bytes(`${webhookId}.${timestampText}.`), rawBody)",
    to: "concatBytes(utf8Bytes(`${webhookId}.${signedAt}.`), rawBody)",
  },
  {
    id: "standard.split-check-skips-segment",
    class: "off-by-one",
    file: STANDARD,
    tests: standardTests,
    from: ".slice(1)\n      .some(",
    to: ".slice(2)\n      .some(",
  },
  {
    id: "standard.body-split-unchecked",
    class: "dropped guard",
    file: STANDARD,
    tests: standardTests,
    from: "return opening !== null && timeWithin(opening[1]!, now, tolerance);",
    to: "return false;",
  },
  {
    id: "verify.hmac-length-check-dropped",
    class: "constant-time compare",
    file: "src/crypto/verify.ts",
    tests: ["test/providers/junk-input.test.ts", "test/providers/github.test.ts"],
    from: "if (signature.length === expected.length && crypto.subtle.timingSafeEqual(signature, expected))",
    to: "if (crypto.subtle.timingSafeEqual(signature, expected))",
  },
  {
    id: "verify.hmac-compare-short-circuits",
    class: "constant-time compare",
    file: "src/crypto/verify.ts",
    tests: ["test/providers/junk-input.test.ts", "test/providers/github.test.ts"],
    from: "crypto.subtle.timingSafeEqual(signature, expected)) matched = true;",
    to: "crypto.subtle.timingSafeEqual(signature, expected)) return true;",
  },
  {
    id: "key-cache.load-window-boundary",
    class: "boundary",
    file: KEY_CACHE,
    tests: keyCacheTests,
    from: "return window.loads >= MAX_LOADS_PER_WINDOW ? null",
    to: "return window.loads > MAX_LOADS_PER_WINDOW ? null",
  },
  {
    id: "key-cache.in-flight-boundary",
    class: "boundary",
    file: KEY_CACHE,
    tests: keyCacheTests,
    from: "if (running >= MAX_FETCHES_IN_FLIGHT)",
    to: "if (running > MAX_FETCHES_IN_FLIGHT)",
  },
  {
    id: "key-cache.refusal-expiry-boundary",
    class: "boundary",
    file: KEY_CACHE,
    tests: keyCacheTests,
    from: "known.expiresAt > this.clock()",
    to: "known.expiresAt >= this.clock()",
  },
  {
    id: "key-cache.unproven-unbounded",
    class: "size cap",
    file: KEY_CACHE,
    tests: keyCacheTests,
    from: "if (this.unproven.size >= MAX_UNPROVEN_ENTRIES) this.unproven.delete(this.unproven.keys().next().value!);",
    to: "",
  },

  // src/sources/
  {
    id: "config.secret-expiry-boundary",
    class: "boundary",
    file: CONFIG,
    tests: ["test/edges/expired-secrets.test.ts", "test/sources/config.test.ts", "test/sources/config-edges.test.ts"],
    from: "now >= ref.expiresAt) continue;",
    to: "now > ref.expiresAt) continue;",
  },
  {
    id: "config.zero-retries-refused",
    class: "boundary",
    file: CONFIG,
    tests: configTests,
    from: "Number.isSafeInteger(value) && value >= 0",
    to: "Number.isSafeInteger(value) && value > 0",
  },
  {
    id: "config.jitter-one-refused",
    class: "boundary",
    file: CONFIG,
    tests: configTests,
    from: "value >= 0 && value <= 1",
    to: "value >= 0 && value < 1",
  },
  {
    id: "config.body-cap-limit-boundary",
    class: "boundary",
    file: CONFIG,
    tests: ["test/sources/config.test.ts", "test/ingest/sources.test.ts", "test/sources/config-edges.test.ts"],
    from: "cap > MAX_BODY_BYTES_LIMIT",
    to: "cap >= MAX_BODY_BYTES_LIMIT",
  },
  {
    id: "config.payload-retention-boundary",
    class: "boundary",
    file: CONFIG,
    tests: configTests,
    from: "if (payloadRetentionMs > dedupeRetentionMs) {",
    to: "if (payloadRetentionMs >= dedupeRetentionMs) {",
  },
  {
    id: "config.plain-http-anywhere",
    class: "dropped guard",
    file: CONFIG,
    tests: configTests,
    from: `if (url.protocol === "http:" && isLoopbackHost(url.hostname)) return null;`,
    to: `if (url.protocol === "http:") return null;`,
  },
  {
    id: "config.localhost-suffix",
    class: "parsing",
    file: CONFIG,
    tests: configTests,
    from: `hostname.endsWith(".localhost")`,
    to: `hostname.endsWith("localhost")`,
  },
  {
    id: "config.loopback-unanchored",
    class: "parsing",
    file: CONFIG,
    tests: configTests,
    from: "/^127(\\.\\d{1,3}){3}$/",
    to: "/^127(\\.\\d{1,3}){3}/",
  },
  {
    id: "body-threshold.zero-refused",
    class: "boundary",
    file: BODY_THRESHOLD,
    tests: ["test/bodies/r2-bodies.test.ts", "test/sources/config.test.ts", "test/sources/config-edges.test.ts"],
    from: "Number.isInteger(value) && value >= 0",
    to: "Number.isInteger(value) && value > 0",
  },
  {
    id: "secrets-set.rotation-half-unset",
    class: "dropped guard",
    file: SECRETS_SET,
    tests: ["test/admin/missing-secrets.test.ts", "test/edges/expired-secrets.test.ts"],
    from: "signingUnset: secrets.length === 0 ? missing : [],",
    to: "signingUnset: missing,",
  },
  {
    id: "secrets-set.kept-secret-adapter-expired",
    class: "dropped guard",
    file: SECRETS_SET,
    tests: ["test/edges/expired-secrets.test.ts", "test/providers/kept-secrets.test.ts"],
    from: " && !adapterFor(source.provider)?.keptSecrets",
    to: "",
  },
];

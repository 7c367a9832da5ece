import { sql } from "drizzle-orm";
import { blob, index, integer, primaryKey, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";

/**
 * A receipt whose body payload retention's scan may pass without dropping (migrations/0011): a dead letter, a
 * dismissed one, a replayed one. Written with literals, as the index is: SQLite uses a partial index only for a
 * query that repeats its condition.
 */
export const HELD_BODY = sql`(status IN ('dead', 'dismissed') OR replay_count > 0) AND (body IS NOT NULL OR body_location IS NOT NULL)`;

/**
 * An ordered delivery (a receipt's own, migrations/0017, or a further one, 0018) that has not finished, or is dead:
 * what can hold a later one of the same route and ordering value back. Literal, as the index is, so the ordering check's query repeats it word for word.
 */
export const ORDERED_OUTSTANDING = sql`ordering_key IS NOT NULL AND status IN ('pending', 'processing', 'dead')`;

/**
 * A receipt in the (source, event_key) arbiter (migrations/0023): every one but a shard-arbitrated one. Literal, as
 * the index is: a lookup by key must repeat it word for word or SQLite does not use the partial index.
 */
export const KEY_INDEXED = sql`shard_arbitrated IS NULL`;

/**
 * The audit trail. Every accepted delivery becomes one receipt. Times are epoch milliseconds (INTEGER) so that
 * SQL comparisons need no date parsing. The table is WITHOUT ROWID (migrations/0002_lean_receipts.sql) and
 * carries only indexes the happy path never touches beyond the (source, event_key) arbiter: every index a write
 * touches is a billed row. A first-try success lives entirely in this row (attempt_* columns); rows in
 * `attempts` are written only for attempts that failed or ended unusually.
 */
export const receipts = sqliteTable(
  "receipts",
  {
    receiptId: text("id").primaryKey(), // ULID minted by the claim shard, stable across relays and replays
    source: text("source").notNull(),
    eventKey: text("event_key").notNull(),
    eventType: text("event_type"),
    subjectId: text("subject"),
    version: integer("version"),
    occurredAt: integer("occurred_at"),
    payloadSha256: text("payload_sha256").notNull(),
    body: blob("body", { mode: "buffer" }), // dropped after payload retention, leaving a keyed tombstone
    keptHeaders: text("kept_headers"), // JSON object of the headers worth keeping (never signatures)
    /** 'r2' when the body is kept in the BODIES bucket under the receipt id (migrations/0005); null otherwise. */
    bodyLocation: text("body_location"),
    receivedAt: integer("received_at").notNull(),
    relayedAt: integer("relayed_at"),
    status: text("status", {
      enum: ["pending", "processing", "processed", "stale", "dead", "skipped", "dismissed"],
    })
      .notNull()
      .default("pending"),
    /** Attempts in the current run (since relay or the last replay): the retry budget. */
    attempts: integer("attempts").notNull().default(0),
    /**
     * Only ever increases, never reset by a replay: every attempt takes the next generation, a leased one when it
     * takes the lease. It fences every state change after a lease, and numbers rows in `attempts`.
     */
    leaseGeneration: integer("lease_generation").notNull().default(0),
    /** Set only while a retry is scheduled (partial index receipts_retrying): the happy path never writes it. */
    nextAttemptAt: integer("next_attempt_at"),
    leaseUntil: integer("lease_until"),
    /** The last failure, or why a receipt was skipped. */
    lastError: text("last_error"),
    processedAt: integer("processed_at"),
    /**
     * When this event's outcome (its effect, or the verdict that it is stale) was committed. Set once and never
     * reset: the guard that makes a second run of the same event apply nothing, replays included.
     */
    committedAt: integer("committed_at"),
    staleAgainstVersion: integer("stale_against_version"),
    /** Where the event came from; a replay never changes it. */
    provenance: text("provenance", { enum: ["live", "reconciled", "replayed"] })
      .notNull()
      .default("live"),
    replayCount: integer("replay_count").notNull().default(0),
    replayedAt: integer("replayed_at"),
    /** The latest attempt, kept in the row so that a first-try success writes no attempt row. */
    attemptStartedAt: integer("attempt_started_at"),
    attemptDurationMs: integer("attempt_duration_ms"),
    attemptHttpStatus: integer("attempt_http_status"),
    /** When an operator last dismissed this dead letter (migrations/0004); a restore leaves it, for the timeline. */
    dismissedAt: integer("dismissed_at"),
    /** When an operator last restored it from dismissed to dead (migrations/0016). */
    restoredAt: integer("restored_at"),
    /**
     * D1's clock when the receipt last entered dead, dismissed, stale or skipped (migrations/0013, set by a trigger
     * there on every write of the status); status-filtered paging catches up on it (src/admin/receipts/receipt-cursor.ts).
     */
    statusEnteredAt: integer("status_entered_at"),
    /**
     * The route whose delivery this row carries (migrations/0014): the first that matched, for a source with several;
     * null for a one-route source (its only route) and until the event is fanned out.
     */
    route: text("route"),
    /** The routes whose filter did not match, comma-separated ('' when all did); null until fanned out. */
    filteredRoutes: text("filtered_routes"),
    /**
     * The event's value for its route's `ordered_by` (migrations/0017), written by the relay's insert; null for a
     * source without an ordered route (which so never enters the index below) and for an event without a value.
     */
    orderingKey: text("ordering_key"),
    /**
     * 1 when the claim shard is this key's only arbiter (migrations/0023): a partitioned source's receipt whose claim
     * key is its event key (src/relay/receipt-insert.ts). It then has no entry in receipts_source_event_key, one billed row
     * less per receipt; null for every other receipt, which the D1 index still arbitrates.
     */
    shardArbitrated: integer("shard_arbitrated"),
  },
  (table) => [
    uniqueIndex("receipts_source_event_key").on(table.source, table.eventKey).where(KEY_INDEXED),
    index("receipts_dead").on(table.source, table.receiptId).where(sql`status = 'dead'`),
    index("receipts_held_bodies").on(table.source, table.receiptId).where(HELD_BODY),
    index("receipts_retrying").on(table.nextAttemptAt).where(sql`next_attempt_at IS NOT NULL`),
    // Only receipts relayed more than 10 s after they arrived enter it (migrations/0007): paging finds them here.
    index("receipts_late_relays").on(table.relayedAt).where(sql`relayed_at > received_at + 10000`),
    // Only ordered deliveries not yet finished (or dead): the ordering check's one seek (src/consumers/gate/delivery-order.ts).
    index("receipts_ordered_outstanding")
      .on(table.source, table.orderingKey, table.receiptId)
      .where(ORDERED_OUTSTANDING),
    index("receipts_status_entered")
      .on(table.statusEnteredAt)
      .where(sql`status IN ('dead', 'dismissed', 'stale', 'skipped')`),
  ],
);

/**
 * The delivery of one further route that matched a receipt (migrations/0014): the receipt row carries its first
 * matched route's delivery, this table each other one, with the same life (pending, processing under a lease,
 * processed/stale/skipped/dead) kept apart, so one destination's failure never delays or repeats another's. WITHOUT
 * ROWID, no index the happy path touches: a delivered route costs one row.
 */
export const deliveries = sqliteTable(
  "deliveries",
  {
    receiptId: text("receipt_id").notNull(),
    route: text("route").notNull(),
    // "dismissed": a dead delivery an operator set aside (src/admin/actions/dismiss.ts); restored, it is dead again.
    status: text("status", { enum: ["pending", "processing", "processed", "stale", "dead", "skipped", "dismissed"] })
      .notNull()
      .default("pending"),
    attempts: integer("attempts").notNull().default(0),
    leaseGeneration: integer("lease_generation").notNull().default(0),
    nextAttemptAt: integer("next_attempt_at"),
    leaseUntil: integer("lease_until"),
    lastError: text("last_error"),
    httpStatus: integer("http_status"),
    attemptStartedAt: integer("attempt_started_at"),
    attemptDurationMs: integer("attempt_duration_ms"),
    /** Set once, as the receipt's: the guard that makes a second run of this delivery apply nothing. */
    committedAt: integer("committed_at"),
    processedAt: integer("processed_at"),
    replayCount: integer("replay_count").notNull().default(0),
    replayedAt: integer("replayed_at"),
    /**
     * The event's ordering value when this delivery's route has `ordered_by` (migrations/0018): the receipt's
     * `ordering_key`, copied when the row is written; null for an unordered route, which so never enters the index below.
     */
    orderingKey: text("ordering_key"),
    /**
     * When this delivery last entered dead, dismissed, stale or skipped, on D1's clock: stamped by a trigger in the
     * same write (migrations/0022), as the receipt's own `status_entered_at`. The changes feed reads it.
     */
    statusEnteredAt: integer("status_entered_at"),
  },
  (table) => [
    primaryKey({ columns: [table.receiptId, table.route] }),
    index("deliveries_unfinished").on(table.nextAttemptAt).where(sql`status IN ('pending', 'processing')`),
    index("deliveries_dead").on(table.route, table.receiptId).where(sql`status = 'dead'`),
    // Only ordered further deliveries not yet finished (or dead): the ordering check's seek for routes other than the
    // receipt's own (src/consumers/gate/delivery-order.ts).
    index("deliveries_ordered_outstanding")
      .on(table.route, table.orderingKey, table.receiptId)
      .where(ORDERED_OUTSTANDING),
  ],
);

export const attempts = sqliteTable(
  "attempts",
  {
    receiptId: text("receipt_id").notNull(),
    attemptNumber: integer("attempt_number").notNull(),
    startedAt: integer("started_at").notNull(),
    finishedAt: integer("finished_at"),
    outcome: text("outcome", {
      enum: ["processed", "stale", "skipped", "retry", "dead", "unknown", "duplicate"],
    }),
    httpStatus: integer("http_status"),
    error: text("error"),
    durationMs: integer("duration_ms"),
  },
  (table) => [primaryKey({ columns: [table.receiptId, table.attemptNumber] })],
);

/** Contract violations worth a human look: above all, one event key seen with two different payloads. */
export const quarantine = sqliteTable(
  "quarantine",
  {
    quarantineId: text("id").primaryKey(),
    source: text("source").notNull(),
    eventKey: text("event_key").notNull(),
    reason: text("reason").notNull(),
    originalReceiptId: text("original_receipt_id"),
    originalSha256: text("original_sha256"),
    payloadSha256: text("payload_sha256").notNull(),
    body: blob("body", { mode: "buffer" }),
    keptHeaders: text("kept_headers"),
    receivedAt: integer("received_at").notNull(),
    /** D1's clock when the relay inserted the row (NULL for rows from before migrations/0012). */
    relayedAt: integer("relayed_at"),
    /**
     * How many quarantined deliveries the row stands for: 1 for a copy kept whole; for a key's copies past the
     * ones kept whole (src/claims/quarantine.ts), one row with no body counting them all (migrations/0020).
     */
    copies: integer("copies").notNull().default(1),
  },
  (table) => [
    index("quarantine_source_key").on(table.source, table.eventKey),
    index("quarantine_relayed_at").on(table.relayedAt),
  ],
);

/** Never holds a row: a guard statement inserts NULL here to abort its D1 batch (see src/consumers/commit/commit.ts). */
export const batchAborts = sqliteTable("batch_aborts", {
  reason: text("reason").notNull(),
});

/** Last applied version per object, for handlers that order by a provider-supplied version. */
export const objectVersions = sqliteTable(
  "object_versions",
  {
    source: text("source").notNull(),
    objectType: text("object_type").notNull(),
    objectId: text("object_id").notNull(),
    version: integer("version").notNull(),
    receiptId: text("receipt_id").notNull(),
    updatedAt: integer("updated_at").notNull(),
  },
  (table) => [primaryKey({ columns: [table.source, table.objectType, table.objectId] })],
);

export const checkpoints = sqliteTable(
  "checkpoints",
  {
    source: text("source").notNull(),
    reconciler: text("reconciler").notNull(),
    cursor: text("cursor"),
    updatedAt: integer("updated_at").notNull(),
  },
  (table) => [primaryKey({ columns: [table.source, table.reconciler] })],
);

export const alerts = sqliteTable(
  "alerts",
  {
    alertId: text("id").primaryKey(),
    source: text("source"),
    kind: text("kind").notNull(),
    state: text("state", { enum: ["open", "resolved"] }).notNull(),
    detail: text("detail"),
    openedAt: integer("opened_at").notNull(),
    resolvedAt: integer("resolved_at"),
    notifiedAt: integer("notified_at"),
    resolveNotifiedAt: integer("resolve_notified_at"),
  },
  (table) => [
    index("alerts_kind_state").on(table.source, table.kind, table.state),
    // At most one open incident per source and kind: two overlapping cron runs cannot both raise it.
    uniqueIndex("alerts_one_open_incident").on(table.source, table.kind).where(sql`state = 'open'`),
  ],
);

/**
 * Every route known to have a gate (src/gate/), so its gate can be forgotten once the route leaves the config: no
 * Durable Object can be listed, so this is how the cron finds the gate of a route no longer configured. Written by
 * the cron for each configured route with a control option, by a pause from the admin API, and for the route of an
 * open `route-breaker-open` alert; `absent_runs` counts the cron runs in a row that found the route absent
 * (src/reconcile/route-gates.ts; migrations/0021_route_gates.sql). WITHOUT ROWID: one row per route.
 */
export const routeGates = sqliteTable(
  "route_gates",
  {
    source: text("source").notNull(),
    route: text("route").notNull(),
    absentRuns: integer("absent_runs").notNull().default(0),
  },
  (table) => [primaryKey({ columns: [table.source, table.route] })],
);

/** One row per cron run of the reconciler: what each step did, so "did the cron run, and what did it find?" is a query. */
export const reconcileRuns = sqliteTable(
  "reconcile_runs",
  {
    runId: text("id").primaryKey(),
    /** The clock the run used (the cron's scheduled time), which tests inject. */
    clock: integer("clock").notNull(),
    startedAt: integer("started_at").notNull(),
    finishedAt: integer("finished_at"),
    /** JSON: counts per step, e.g. {"redrive": {"shardsFlushed": 2, ...}, "retention": {...}}. */
    counts: text("counts"),
    /** JSON array of {step, source, error} for steps that failed; the other steps still ran. */
    failures: text("failures"),
  },
  (table) => [index("reconcile_runs_started").on(table.startedAt)],
);

/** The example domain the demo source drives (docs/architecture.md, "The example domain"). Names are fixed: the bench reads them. */
export const accounts = sqliteTable("accounts", {
  id: text("id").primaryKey(),
  credits: integer("credits").notNull().default(0),
  plan: text("plan"),
  planVersion: integer("plan_version").notNull().default(0),
});

/**
 * Secrets a sender handed over in a proven handshake (Asana's X-Hook-Secret, Notion's verification_token): later
 * deliveries to the source verify against them (src/ingest/kept-secrets.ts). Written only after the handshake's
 * own proof (the source's verify token) checked out. Only "active" ones verify deliveries: a handshake while the
 * source already has one is kept "pending" until an operator approves it (migrations/0008_kept_secret_status.sql).
 * `received_at` is the last time the sender handed it over (a repeated handshake refreshes it), and `client_address`
 * (CF-Connecting-IP) and `user_agent` who handed it over then, so an operator can tell a genuine pending secret from
 * ones handed over by whoever read the verify token (migrations/0019_kept_secret_handshakes.sql; NULL before it).
 */
export const keptSecrets = sqliteTable(
  "handshake_secrets",
  {
    source: text("source").notNull(),
    secret: text("secret").notNull(),
    receivedAt: integer("received_at").notNull(),
    status: text("status", { enum: ["active", "pending"] })
      .notNull()
      .default("active"),
    clientAddress: text("client_address"),
    userAgent: text("user_agent"),
  },
  (table) => [
    primaryKey({ columns: [table.source, table.secret] }),
    index("handshake_secrets_newest").on(table.source, table.receivedAt),
  ],
);

/**
 * Sources whose first kept secret has been installed: the verify token installs one without an operator only while
 * its source is absent here. A row is never deleted, so revoking every secret (what one does after a leak) does not
 * reopen the first install to whoever holds the verify token (migrations/0019_kept_secret_handshakes.sql).
 */
export const keptSecretInstalls = sqliteTable("kept_secret_installs", {
  source: text("source").primaryKey(),
  installedAt: integer("installed_at").notNull(),
});

/**
 * Every replay of a receipt (migrations/0006_replays.sql), so a timeline shows them all: the receipt row keeps
 * only replay_count and the latest replayed_at. Written only by a replay, in the same batch as its reset; the happy
 * path never touches it. replay_number is the receipt's replay_count after that replay. Deleted with its receipt.
 */
export const replays = sqliteTable(
  "replays",
  {
    receiptId: text("receipt_id").notNull(),
    replayNumber: integer("replay_number").notNull(),
    replayedAt: integer("replayed_at").notNull(),
    /** The status the replay took the receipt from: processed, stale, skipped or dead. */
    previousStatus: text("previous_status").notNull(),
    /** Which door the replay came through: "api" (the admin API, the CLI too) or "dashboard"; null when called directly. */
    requestedBy: text("requested_by"),
    /**
     * When the run this replay ended had finished well (the receipt's processed_at then, which the replayed run
     * overwrites): so replay 1 keeps the first run's finish, "received → finished" (src/db/receipt-runs.ts).
     * Null when that run went dead, or the replay predates this column (migrations/0026).
     */
    previousProcessedAt: integer("previous_processed_at"),
  },
  (table) => [primaryKey({ columns: [table.receiptId, table.replayNumber] })],
);

/**
 * The operator audit log (src/admin/audit-log/): one row per operator action through the admin API or the dashboard
 * — replay, dismiss, restore, pause, resume, approve, revoke, acknowledge — who (the Access identity, or
 * "admin-token"), with which role, through which door, on what, how many it affected, and whether it was allowed or
 * refused for the role. The id is a ULID minted at `at`, so newest-first paging and the cron's time-bounded delete
 * both read the primary key (migrations/0024_operator_actions.sql). Never written by the happy path.
 */
export const operatorActions = sqliteTable("operator_actions", {
  actionId: text("id").primaryKey(),
  at: integer("at").notNull(),
  actor: text("actor").notNull(),
  role: text("role").notNull(),
  via: text("via").notNull(),
  action: text("action").notNull(),
  target: text("target").notNull(),
  affected: integer("affected").notNull(),
  outcome: text("outcome", { enum: ["allowed", "refused"] }).notNull(),
});

/**
 * Bulk replay jobs (docs/operating.md, "Bulk replay by filter"; migrations/0025): one row per job in each receipt
 * database, since each database walks its own receipts and a step's resets and the row's cursor commit in one D1
 * batch, so a job resumed after a crash or a redeploy goes on from its cursor and never replays a delivery twice.
 * Written only by an operator's replay or a route's recovery (src/replay/replay-jobs.ts): never on the happy path.
 */
export const replayJobs = sqliteTable(
  "replay_jobs",
  {
    jobKey: text("job_key").primaryKey(),
    source: text("source").notNull(),
    route: text("route"),
    /** The whole filter as given (JSON: src/replay/replay-filter.ts), read back by every step. */
    filter: text("filter").notNull(),
    /** Who started it: "api" (the admin API, the CLI too), "dashboard", or "recovery" (a route's breaker closed). */
    origin: text("origin", { enum: ["api", "dashboard", "recovery"] }).notNull(),
    state: text("state", { enum: ["running", "done"] })
      .notNull()
      .default("running"),
    /** The newest receipt id walked so far: the next step starts after it. */
    cursor: text("cursor"),
    scanned: integer("scanned").notNull().default(0),
    replayed: integer("replayed").notNull().default(0),
    /** Matched, but its body is past payload retention: nothing left to send. */
    expired: integer("expired").notNull().default(0),
    createdAt: integer("created_at").notNull(),
    updatedAt: integer("updated_at").notNull(),
    finishedAt: integer("finished_at"),
  },
  (table) => [index("replay_jobs_running").on(table.state).where(sql`state = 'running'`)],
);

import { sql } from "drizzle-orm";
import { blob, index, integer, primaryKey, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";

/**
 * The audit trail. Every accepted delivery becomes one receipt; every attempt to process it one attempt row.
 * Times are epoch milliseconds (INTEGER) so that SQL comparisons need no date parsing.
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
    receivedAt: integer("received_at").notNull(),
    relayedAt: integer("relayed_at"),
    status: text("status", {
      enum: ["pending", "processing", "processed", "stale", "dead", "skipped", "dismissed"],
    })
      .notNull()
      .default("pending"),
    attempts: integer("attempts").notNull().default(0),
    nextAttemptAt: integer("next_attempt_at"),
    leaseUntil: integer("lease_until"),
    lastError: text("last_error"),
    processedAt: integer("processed_at"),
    staleAgainstVersion: integer("stale_against_version"),
    provenance: text("provenance", { enum: ["live", "reconciled", "replayed"] })
      .notNull()
      .default("live"),
    enqueuedAt: integer("enqueued_at"),
    /** When an operator dismissed this dead letter (status `dismissed`, migrations/0004); null once restored. */
    dismissedAt: integer("dismissed_at"),
  },
  (table) => [
    uniqueIndex("receipts_source_event_key").on(table.source, table.eventKey),
    index("receipts_status_next_attempt").on(table.status, table.nextAttemptAt),
    index("receipts_source_received").on(table.source, table.receivedAt),
    index("receipts_subject").on(table.source, table.subjectId),
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
  },
  (table) => [index("quarantine_source_key").on(table.source, table.eventKey)],
);

/** The processed-key guard: a handler's batch inserts here first, so a second run of one event rolls back. */
export const processedEvents = sqliteTable(
  "processed_events",
  {
    source: text("source").notNull(),
    eventKey: text("event_key").notNull(),
    receiptId: text("receipt_id").notNull(),
    processedAt: integer("processed_at").notNull(),
  },
  (table) => [primaryKey({ columns: [table.source, table.eventKey] })],
);

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

/** The example domain the demo source drives (see docs/architecture.md). Names are fixed: the bench reads them. */
export const accounts = sqliteTable("accounts", {
  id: text("id").primaryKey(),
  credits: integer("credits").notNull().default(0),
  plan: text("plan"),
  planVersion: integer("plan_version").notNull().default(0),
});

/**
 * Secrets a sender handed over in a proven handshake (Asana's X-Hook-Secret, Notion's verification_token): later
 * deliveries to the source verify against them (src/ingest/handshake-secrets.ts). Written only after the handshake's
 * own proof (the source's verify token) checked out.
 */
export const handshakeSecrets = sqliteTable(
  "handshake_secrets",
  {
    source: text("source").notNull(),
    secret: text("secret").notNull(),
    receivedAt: integer("received_at").notNull(),
  },
  (table) => [primaryKey({ columns: [table.source, table.secret] }), index("handshake_secrets_newest").on(table.source, table.receivedAt)],
);

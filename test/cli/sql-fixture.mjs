// The receipt rows `cli sql` is tested on (test/cli/sql.test.mjs), spread over two receipt databases so that every
// recipe of docs/audit.md needs rows of both: one event's receipt in one database and its quarantined copy in the
// other (a source that moved), one hour's deliveries in both, dead letters and waiting work on both sides. The
// recipes' example values (source "billing", key "evt_1001", day 2026-11-01) are what it holds.

const ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
let minted = 0;

/** A ULID minted at `time`, as the claim shard mints a receipt id; the random part numbers the rows instead. */
function idAt(/** @type {number} */ time) {
  let prefix = "";
  for (let remaining = time, i = 0; i < 10; i++, remaining = Math.floor(remaining / 32))
    prefix = ALPHABET[remaining % 32] + prefix;
  minted += 1;
  return prefix + String(minted).padStart(16, "0");
}

const at = (/** @type {string} */ iso) => Date.parse(iso);

/** @typedef {{ database: "DB" | "DB_SECOND", table: string, row: Record<string, unknown> }} FixtureRow */

/** @type {FixtureRow[]} */
export const FIXTURE_ROWS = [];

function receipt(/** @type {"DB" | "DB_SECOND"} */ database, /** @type {Record<string, unknown>} */ row) {
  const id = idAt(/** @type {number} */ (row.received_at));
  FIXTURE_ROWS.push({
    database,
    table: "receipts",
    row: { id, payload_sha256: "0".repeat(64), status: "pending", ...row },
  });
  return id;
}

const add = (
  /** @type {"DB" | "DB_SECOND"} */ database,
  /** @type {string} */ table,
  /** @type {Record<string, unknown>} */ row,
) => FIXTURE_ROWS.push({ database, table, row });

// The life of evt_1001: a 503, processed on the retry, replayed twice; its receipt in DB_SECOND, a copy with other
// bytes quarantined in DB.
const t = at("2026-11-01T10:00:00Z");
const life = receipt("DB_SECOND", {
  source: "billing",
  event_key: "evt_1001",
  event_type: "invoice.paid",
  received_at: t,
  relayed_at: t + 20,
  status: "processed",
  attempts: 2,
  lease_generation: 2,
  processed_at: t + 31_100,
  committed_at: t + 31_100,
  replay_count: 2,
  replayed_at: t + 180_000,
  attempt_started_at: t + 31_000,
  attempt_duration_ms: 100,
  attempt_http_status: 200,
  body: Buffer.from('{"invoice":"in_1001","amount":1200}'),
});
add("DB_SECOND", "attempts", {
  receipt_id: life,
  attempt_number: 1,
  started_at: t + 1000,
  finished_at: t + 1200,
  outcome: "retry",
  http_status: 503,
  error: "destination answered 503",
  duration_ms: 200,
});
for (const [replayNumber, requestedBy] of [
  [1, "api"],
  [2, "dashboard"],
]) {
  const replayedAt = t + 60_000 * (Number(replayNumber) + 1);
  add("DB_SECOND", "replays", {
    receipt_id: life,
    replay_number: replayNumber,
    replayed_at: replayedAt,
    previous_status: "processed",
    requested_by: requestedBy,
  });
  add("DB_SECOND", "attempts", {
    receipt_id: life,
    attempt_number: Number(replayNumber) + 2,
    started_at: replayedAt + 50,
    finished_at: replayedAt + 60,
    outcome: "duplicate",
    error: "already committed by an earlier run; nothing applied",
    duration_ms: 10,
  });
}
add("DB_SECOND", "deliveries", {
  receipt_id: life,
  route: "ledger",
  status: "dead",
  attempts: 3,
  last_error: "ledger answered 500",
});
add("DB", "quarantine", {
  id: idAt(t + 60_000),
  source: "billing",
  event_key: "evt_1001",
  reason: "payload-mismatch",
  original_receipt_id: life,
  payload_sha256: "ab".repeat(32),
  received_at: t + 60_000,
  body: Buffer.from('{"invoice":"in_1001","amount":9999}'),
});
add("DB_SECOND", "quarantine", {
  id: idAt(t + 90_000),
  source: "billing",
  event_key: "evt_1002",
  reason: "payload-mismatch",
  payload_sha256: "cd".repeat(32),
  received_at: t + 90_000,
  copies: 3,
});

// Dead letters: after the cut-off in DB, before it and without an attempt row in DB_SECOND.
const diedAfter = receipt("DB", {
  source: "billing",
  event_key: "evt_2001",
  received_at: at("2026-11-01T10:30:00Z"),
  status: "dead",
  attempts: 1,
  last_error: "data.amount must be an integer",
  body: Buffer.from('{"amount":"12"}'),
});
add("DB", "attempts", {
  receipt_id: diedAfter,
  attempt_number: 1,
  started_at: at("2026-11-02T00:00:00Z"),
  finished_at: at("2026-11-02T00:00:01Z"),
  outcome: "dead",
  duration_ms: 1000,
});
const diedBefore = receipt("DB_SECOND", {
  source: "billing",
  event_key: "evt_2002",
  received_at: at("2026-10-30T10:00:00Z"),
  status: "dead",
  attempts: 1,
  last_error: "old",
});
add("DB_SECOND", "attempts", {
  receipt_id: diedBefore,
  attempt_number: 1,
  started_at: at("2026-10-31T10:00:00Z"),
  finished_at: at("2026-10-31T10:00:01Z"),
  outcome: "dead",
  duration_ms: 1000,
});
receipt("DB_SECOND", {
  source: "billing",
  event_key: "evt_2003",
  received_at: at("2026-11-03T12:15:00Z"),
  status: "dead",
  last_error: "work queue gave up after 100 deliveries",
});

// Waiting work, on both sides, of two sources.
receipt("DB", { source: "billing", event_key: "evt_3001", received_at: at("2026-11-04T08:00:00Z") });
receipt("DB_SECOND", {
  source: "billing",
  event_key: "evt_3002",
  received_at: at("2026-11-04T09:00:00Z"),
  status: "processing",
  attempts: 1,
});
receipt("DB_SECOND", { source: "shipping", event_key: "shp_1", received_at: at("2026-11-02T07:00:00Z") });
receipt("DB", {
  source: "shipping",
  event_key: "shp_2",
  received_at: at("2026-11-01T10:45:00Z"),
  status: "processing",
  attempts: 1,
});

// Reconciled and replayed receipts.
receipt("DB_SECOND", {
  source: "billing",
  event_key: "evt_4001",
  received_at: at("2026-11-05T06:00:00Z"),
  occurred_at: at("2026-11-04T23:00:00Z"),
  status: "processed",
  provenance: "reconciled",
  event_type: "invoice.created",
});
receipt("DB", {
  source: "shipping",
  event_key: "shp_3",
  received_at: at("2026-11-05T05:00:00Z"),
  status: "processed",
  provenance: "reconciled",
});
receipt("DB", {
  source: "billing",
  event_key: "evt_5001",
  received_at: at("2026-11-05T14:20:00Z"),
  status: "processed",
  replay_count: 1,
  replayed_at: at("2026-11-06T09:00:00Z"),
});
receipt("DB", {
  source: "billing-before-log",
  event_key: "evt_1001",
  received_at: at("2026-11-05T15:00:00Z"),
  relayed_at: at("2026-11-05T15:00:00Z"),
  status: "processed",
  processed_at: at("2026-11-05T15:00:01Z"),
  replay_count: 2,
  replayed_at: at("2026-11-06T10:00:00Z"),
});

/** One INSERT per row, values as SQL literals (a blob as X'…'), for `wrangler d1 execute --file` and the reference. */
export function insertStatements(/** @type {FixtureRow[]} */ rows) {
  return rows
    .map(({ table, row }) => {
      const names = Object.keys(row).join(", ");
      const values = Object.values(row).map(literal).join(", ");
      return `INSERT INTO ${table} (${names}) VALUES (${values});`;
    })
    .join("\n");
}

function literal(/** @type {unknown} */ value) {
  if (value === null || value === undefined) return "NULL";
  if (value instanceof Uint8Array) return `X'${Buffer.from(value).toString("hex")}'`;
  if (typeof value === "number") return String(value);
  return `'${String(value).replaceAll("'", "''")}'`;
}

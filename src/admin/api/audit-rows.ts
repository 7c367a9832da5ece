import { Hono } from "hono";
import { apiError } from "../../lib/errors";
import { receiptDatabaseBindings } from "../../sources/databases";
import type { AdminEnv } from "../guards/auth";
import { AUDIT_TABLES, type AuditRowFilter, auditRowsPage, type RowKey } from "../receipts/audit-rows";
import { AUDIT_TABLE_NAMES, isAuditTable } from "../receipts/audit-table-names";
import { parseInstant, type Query } from "../receipts/filters";

/**
 * /admin/api/audit/rows — the rows of one receipt table from every receipt database, a page at a time, for
 * `npm run cli -- sql` (../receipts/audit-rows.ts). Read-only, behind the admin bearer token like every admin route.
 *
 *   GET /admin/api/audit/rows?table=receipts[&source=S][&since=T][&until=T][&bodies=true][&limit=N][&after=C]
 *
 * `since`/`until` (epoch ms or ISO 8601) select by receipt id, whose time is when the receipt arrived. Answers
 * `{table, columns, base64Columns, rows, nextCursor}`: rows as arrays in the order of `columns`, a body (only with
 * bodies=true) as base64 (named in base64Columns); repeat with after=nextCursor until it is null. The cursor names the database the walk is in, so a page
 * never mixes up two databases' keys.
 */
export const auditRowsApi = new Hono<AdminEnv>();

export const AUDIT_ROWS_PARAMETERS = ["table", "source", "since", "until", "bodies", "limit", "after"] as const;
const DEFAULT_ROWS = 500;
const MAX_ROWS = 1000;
/** Bodies are up to the ingest cap each: a page that carries them stays small enough for one Worker's memory. */
const MAX_ROWS_WITH_BODIES = 50;

interface AuditCursor {
  database: string;
  /** The key of the last row sent from that database; null to start it from its first row. */
  after: RowKey | null;
}

/**
 * The databases that may hold a table's rows in the range, in walk order: every receipt database (each source's,
 * a moved source's old one). A range narrower than the databases' own periods could skip some, once a database
 * says which period it holds.
 */
function databasesToRead(env: Env): string[] {
  return receiptDatabaseBindings(env);
}

auditRowsApi.get("/rows", async (c) => {
  const query = c.req.query();
  const table = query.table ?? "";
  if (!isAuditTable(table))
    throw apiError(
      400,
      "invalid_query",
      `Query parameter "table" must be one of ${AUDIT_TABLE_NAMES.join(", ")} (the receipt tables).`,
    );
  const filter = parseFilter(query);
  const limit = parseRowLimit(query, filter.bodies ? MAX_ROWS_WITH_BODIES : MAX_ROWS);
  const databases = databasesToRead(c.env);
  let cursor = parseAuditCursor(query.after, databases, AUDIT_TABLES[table].key.length) ?? {
    database: databases[0]!,
    after: null,
  };
  let columns: string[] = [];
  let base64Columns: string[] = [];
  const rows: unknown[][] = [];
  let nextCursor: AuditCursor | null = null;
  for (;;) {
    const page = await auditRowsPage(c.env, cursor.database, table, filter, cursor.after, limit - rows.length);
    ({ columns, base64Columns } = page);
    rows.push(...page.rows);
    const following = databases[databases.indexOf(cursor.database) + 1];
    if (page.lastKey !== null) {
      nextCursor = { database: cursor.database, after: page.lastKey };
      break;
    }
    if (following === undefined) break;
    cursor = { database: following, after: null };
    if (rows.length === limit) {
      nextCursor = cursor;
      break;
    }
  }
  return c.json({ table, columns, base64Columns, rows, nextCursor: nextCursor && encodeCursor(nextCursor) });
});

function parseFilter(query: Query): AuditRowFilter {
  const bodies = query.bodies;
  if (bodies !== undefined && bodies !== "true" && bodies !== "false")
    throw apiError(400, "invalid_query", 'Query parameter "bodies" must be true or false.');
  const filter: AuditRowFilter = {
    source: query.source || undefined,
    since: parseInstant(query, "since"),
    until: parseInstant(query, "until"),
    bodies: bodies === "true",
  };
  if (filter.since !== undefined && filter.until !== undefined && filter.since >= filter.until)
    throw apiError(400, "invalid_query", 'Query parameter "since" must be earlier than until.');
  return filter;
}

function parseRowLimit(query: Query, max: number): number {
  if (query.limit === undefined) return Math.min(DEFAULT_ROWS, max);
  const limit = Number(query.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > max)
    throw apiError(400, "invalid_query", `Query parameter "limit" must be an integer from 1 to ${max}.`);
  return limit;
}

function encodeCursor(cursor: AuditCursor): string {
  return btoa(JSON.stringify([cursor.database, cursor.after]))
    .replace(/\+/g, "-")
    .replace(/\//g, "_");
}

/** A previous page's nextCursor; anything else (or a database this Worker no longer binds) is a 400. */
function parseAuditCursor(text: string | undefined, databases: string[], keyLength: number): AuditCursor | null {
  if (text === undefined) return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(atob(text.replace(/-/g, "+").replace(/_/g, "/")));
  } catch {
    parsed = null;
  }
  const [database, after] = Array.isArray(parsed) && parsed.length === 2 ? parsed : [];
  const keyValid =
    after === null ||
    (Array.isArray(after) &&
      after.length === keyLength &&
      after.every((value) => typeof value === "string" || typeof value === "number"));
  if (typeof database !== "string" || !databases.includes(database) || !keyValid)
    throw apiError(400, "invalid_cursor", 'Query parameter "after" must be a previous page\'s nextCursor.');
  return { database, after: after as RowKey | null };
}

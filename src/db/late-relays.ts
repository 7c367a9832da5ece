import { sql } from "drizzle-orm";
import { receipts } from "./schema";

/**
 * A receipt relayed more than LATE_RELAY_MS after it was received (a relay held up by an outage, a shard's back-off
 * or a poison row) sorts by id among receipts a reader may already have passed. The partial index
 * `receipts_late_relays` (migrations/0007_late_relays.sql) holds exactly those, by relay time: the happy path's rows
 * never match its predicate, so its insert and update write no row for it. Readers that page along the id (admin
 * paging, the cron's stuck scan) look the late ones up there.
 */

/** Must equal the literal in the partial index `receipts_late_relays`. */
export const LATE_RELAY_MS = 10_000;

/** Relayed late: the condition of the partial index, written the same way so that D1 can use it. */
export const relayedLate = sql`${receipts.relayedAt} > ${receipts.receivedAt} + 10000`;

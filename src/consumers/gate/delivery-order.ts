import { type SQL, sql } from "drizzle-orm";
import { type Database, database } from "../../db/client";
import { type EarlierDelivery, orderingWait, type RouteOrdering } from "../../routing/ordering";
import { databaseBindingIn, receiptDatabaseEnvs } from "../../sources/databases";

/**
 * The ordering check of an ordered route (docs/routing.md "Ordering"): before an attempt, is an earlier-received
 * delivery to the same route, of the same ordering value, still outstanding? One D1 read of `receipts` for a slice's
 * ordered deliveries, and one of `deliveries` when any of them belongs to a source with several routes; a route
 * without `ordered_by` never gets here.
 */

export interface OrderedDelivery {
  receiptId: string;
  route: string;
  ordering: RouteOrdering;
  /**
   * The source has several routes: an earlier delivery to this route may be a further one, in `deliveries`. A
   * one-route source's deliveries are all receipt rows, so it never reads that table.
   */
  fannedOut: boolean;
}

interface EarlierRow {
  receiptId: string;
  route: string;
  status: string | null;
  nextAttemptAt: number | null;
  leaseUntil: number | null;
}

/** The key `orderingHolds` answers under: one delivery is one receipt's to one route. */
export function orderedDeliveryKey(receiptId: string, route: string): string {
  return `${receiptId}\u0000${route}`;
}

/**
 * The deliveries that must wait, each with how long and why, keyed by `orderedDeliveryKey`. The later delivery's value
 * is its receipt's `ordering_key` (written by the relay: one value per event). For each delivery D1 is asked for the
 * nearest earlier delivery (by receipt id, which is received order) to the same route with that value that is still
 * pending, processing or dead (with `on_dead = "skip"`, a dead one is passed over; a dismissed one, receipt or further
 * delivery, is finished and holds nothing):
 *
 * - in `receipts`, one seek backwards in the partial index `receipts_ordered_outstanding`: an earlier receipt of the
 *   same source whose own delivery is to this route (`route`), or that has not been fanned out yet (no `route`, no
 *   `filtered_routes`: a one-route source's every receipt, or an event whose routes are not chosen yet, which may
 *   still be this route's, so it holds the later one until its first attempt chooses);
 * - in `deliveries`, one seek backwards in `deliveries_ordered_outstanding`, for an earlier event that came to this
 *   route as a further delivery (its receipt checked to be of the same source: route names are per source).
 *
 * First in the database `env` reads (where the slice's receipts are). A source that moved to another database
 * (src/sources/databases.ts) leaves its older receipts, and the retries and dead letters among them, in the one it
 * moved from, and the earlier delivery may be there: so when this Worker binds more than one receipt database, each
 * delivery nothing holds here is asked about in every other one too (the same two seeks, handed its source and value,
 * which the first read fetches alongside). A Worker with one database pays nothing for this; one with several pays one
 * more read per other database for a slice whose ordered deliveries nothing held at home (two for a source with
 * several routes), each a seek per delivery in a partial index that holds only outstanding ordered work.
 *
 * Each subquery repeats its partial index's condition word for word (SQLite uses a partial index only then).
 */
export async function orderingHolds(
  env: Pick<Env, "DB" | "SOURCES">,
  db: Database,
  ordered: readonly OrderedDelivery[],
  now: number,
): Promise<Map<string, { waitMs: number; reason: string }>> {
  const holds = new Map<string, { waitMs: number; reason: string }>();
  if (ordered.length === 0) return holds;
  const here = databaseBindingIn(env);
  const elsewhere = receiptDatabaseEnvs(env).filter(({ binding }) => binding !== here);
  const [inHere, values] = await Promise.all([
    earlierIn(db, ordered, laterHere),
    elsewhere.length > 0
      ? db.all<OrderingValueRow>(orderingValues(ordered.map((delivery) => delivery.receiptId)))
      : Promise.resolve([]),
  ]);
  const rows = [...inHere];
  const askElsewhere = notHeldYet(ordered, inHere, values);
  if (askElsewhere.length > 0) {
    const found = await Promise.all(
      elsewhere.map(({ env: otherEnv }) => earlierIn(database(otherEnv), askElsewhere, laterElsewhere)),
    );
    rows.push(...found.flat());
  }
  const byKey = new Map(ordered.map((delivery) => [orderedDeliveryKey(delivery.receiptId, delivery.route), delivery]));
  const earlier = new Map<string, EarlierDelivery[]>();
  for (const row of rows) {
    const key = orderedDeliveryKey(row.receiptId, row.route);
    if (row.status === null || !byKey.has(key)) continue;
    const found = { status: row.status, nextAttemptAt: row.nextAttemptAt, leaseUntil: row.leaseUntil };
    earlier.set(key, [...(earlier.get(key) ?? []), found]);
  }
  for (const [key, rows] of earlier) {
    const wait = orderingWait(byKey.get(key)!.ordering, rows, now);
    if (wait) holds.set(key, wait);
  }
  return holds;
}

interface OrderingValueRow {
  receiptId: string;
  source: string;
  orderingKey: string;
}

/** An ordered delivery as another database is asked about it: its receipt is not there, so its source and value come along. */
interface AskedElsewhere extends OrderedDelivery {
  source: string;
  orderingKey: string;
}

/**
 * Which deliveries the other databases are asked about: those with an ordering value (one without is not ordered)
 * that nothing in their own database holds (one held there waits anyway, and is asked again when it comes back).
 */
export function notHeldYet(
  ordered: readonly OrderedDelivery[],
  heldHere: readonly Pick<EarlierRow, "receiptId" | "route">[],
  values: readonly OrderingValueRow[],
): AskedElsewhere[] {
  const held = new Set(heldHere.map((row) => orderedDeliveryKey(row.receiptId, row.route)));
  const valuesByReceipt = new Map(values.map((row) => [row.receiptId, row]));
  return ordered.flatMap((delivery) => {
    const value = valuesByReceipt.get(delivery.receiptId);
    if (!value || held.has(orderedDeliveryKey(delivery.receiptId, delivery.route))) return [];
    return [{ ...delivery, source: value.source, orderingKey: value.orderingKey }];
  });
}

/** Both seeks in one database: `receipts` for every delivery, `deliveries` for those of a source with several routes. */
async function earlierIn<D extends OrderedDelivery>(
  db: Database,
  ordered: readonly D[],
  later: (deliveries: readonly D[]) => LaterSide,
): Promise<EarlierRow[]> {
  const fannedOut = ordered.filter((delivery) => delivery.fannedOut);
  const reads = await Promise.all([
    db.all<EarlierRow>(earlierReceipts(later(ordered))),
    fannedOut.length > 0 ? db.all<EarlierRow>(earlierDeliveries(later(fannedOut))) : Promise.resolve([]),
  ]);
  return reads.flat();
}

/** The ordering value of each of the slice's receipts that has one, read by primary key where they are. */
function orderingValues(receiptIds: readonly string[]): SQL {
  return sql`
    SELECT id AS receiptId, source, ordering_key AS orderingKey FROM receipts
    WHERE id IN (SELECT value FROM json_each(${JSON.stringify(receiptIds)})) AND ordering_key IS NOT NULL`;
}

/**
 * The later delivery, as the two reads below see it: `asked` is each `[receiptId, route, skipDead, …]`, and `id`,
 * `source` and `orderingKey` say where its receipt's id, source and value come from.
 */
interface LaterSide {
  from: SQL;
  id: SQL;
  source: SQL;
  orderingKey: SQL;
}

const skipsDead = (delivery: OrderedDelivery) => delivery.ordering.onDead === "skip";

/** In the receipts' own database: each later receipt joined by its id. */
function laterHere(deliveries: readonly OrderedDelivery[]): LaterSide {
  const askedJson = JSON.stringify(
    deliveries.map((delivery) => [delivery.receiptId, delivery.route, skipsDead(delivery)]),
  );
  return {
    from: sql`FROM json_each(${askedJson}) AS asked
      JOIN receipts AS later ON later.id = json_extract(asked.value, '$[0]')`,
    id: sql`later.id`,
    source: sql`later.source`,
    orderingKey: sql`later.ordering_key`,
  };
}

/** In another database, which does not hold the later receipt: its source and value are handed in. */
function laterElsewhere(deliveries: readonly AskedElsewhere[]): LaterSide {
  const askedJson = JSON.stringify(
    deliveries.map((delivery) => [
      delivery.receiptId,
      delivery.route,
      skipsDead(delivery),
      delivery.source,
      delivery.orderingKey,
    ]),
  );
  return {
    from: sql`FROM json_each(${askedJson}) AS asked`,
    id: sql`json_extract(asked.value, '$[0]')`,
    source: sql`json_extract(asked.value, '$[3]')`,
    orderingKey: sql`json_extract(asked.value, '$[4]')`,
  };
}

function earlierReceipts(later: LaterSide): SQL {
  return sql`
    SELECT ${later.id} AS receiptId, json_extract(asked.value, '$[1]') AS route, earlier.status AS status,
           earlier.next_attempt_at AS nextAttemptAt, earlier.lease_until AS leaseUntil
    ${later.from}
    JOIN receipts AS earlier ON earlier.id = (
      SELECT candidate.id FROM receipts AS candidate
      WHERE candidate.source = ${later.source} AND candidate.ordering_key = ${later.orderingKey}
        AND candidate.id < ${later.id}
        AND candidate.ordering_key IS NOT NULL AND candidate.status IN ('pending', 'processing', 'dead')
        AND (candidate.route = json_extract(asked.value, '$[1]')
             OR (candidate.route IS NULL AND candidate.filtered_routes IS NULL))
        AND (candidate.status <> 'dead' OR NOT json_extract(asked.value, '$[2]'))
      ORDER BY candidate.id DESC LIMIT 1
    )
    WHERE ${later.orderingKey} IS NOT NULL`;
}

function earlierDeliveries(later: LaterSide): SQL {
  return sql`
    SELECT ${later.id} AS receiptId, json_extract(asked.value, '$[1]') AS route, earlier.status AS status,
           earlier.next_attempt_at AS nextAttemptAt, earlier.lease_until AS leaseUntil
    ${later.from}
    JOIN deliveries AS earlier ON earlier.route = json_extract(asked.value, '$[1]') AND earlier.receipt_id = (
      SELECT candidate.receipt_id FROM deliveries AS candidate
      WHERE candidate.route = json_extract(asked.value, '$[1]') AND candidate.ordering_key = ${later.orderingKey}
        AND candidate.receipt_id < ${later.id}
        AND candidate.ordering_key IS NOT NULL AND candidate.status IN ('pending', 'processing', 'dead')
        AND (candidate.status <> 'dead' OR NOT json_extract(asked.value, '$[2]'))
        AND EXISTS (SELECT 1 FROM receipts AS owner WHERE owner.id = candidate.receipt_id AND owner.source = ${later.source})
      ORDER BY candidate.receipt_id DESC LIMIT 1
    )
    WHERE ${later.orderingKey} IS NOT NULL`;
}

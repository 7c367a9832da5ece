import { env } from "cloudflare:workers";
import { and, eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { database } from "../../src/db/client";
import { deliveries, receipts } from "../../src/db/schema";
import { adminPost, seedReceipt } from "./support";

/**
 * Dismissing and restoring one route's delivery (POST /admin/api/dead/dismiss|restore with "route"): a further
 * delivery's own row (migrations/0014) moves dead <-> dismissed; when the route is the receipt's own, the receipt
 * does. Rows are written as the consumer would have left them, on `routing-fanout-rows` (routes first, second,
 * third; test/fixtures/sources/fanout.json).
 */

const SOURCE = "routing-fanout-rows";

/** A fanned-out event: its own delivery to `first` with `ownStatus`, a further one to `second` with `secondStatus`. */
async function fannedOut(ownStatus: "processed" | "dead", secondStatus: "processed" | "dead"): Promise<string> {
  const receiptId = await seedReceipt({
    source: SOURCE,
    receivedAt: Date.now(),
    status: ownStatus,
    route: "first",
    filteredRoutes: "third",
    attempts: 1,
  });
  await database(env).insert(deliveries).values({ receiptId, route: "second", status: secondStatus, attempts: 1 });
  return receiptId;
}

async function statuses(receiptId: string): Promise<{ own: string | undefined; second: string | undefined }> {
  const db = database(env);
  const [own] = await db.select({ status: receipts.status }).from(receipts).where(eq(receipts.receiptId, receiptId));
  const [second] = await db
    .select({ status: deliveries.status })
    .from(deliveries)
    .where(and(eq(deliveries.receiptId, receiptId), eq(deliveries.route, "second")));
  return { own: own?.status, second: second?.status };
}

async function move(action: "dismiss" | "restore", body: unknown): Promise<{ status: number; json: unknown }> {
  const response = await adminPost(`/admin/api/dead/${action}`, body);
  return { status: response.status, json: await response.json() };
}

async function replay(receiptId: string, route?: string): Promise<{ status: number; code: unknown }> {
  const query = route === undefined ? "" : `?route=${route}`;
  const response = await adminPost(`/admin/api/receipts/${receiptId}/replay${query}`, {});
  const json = (await response.json()) as { error?: { code?: unknown } };
  return { status: response.status, code: json.error?.code };
}

describe("dismissing one route's dead delivery", () => {
  it("dismisses and restores a further delivery by route, leaving the receipt's own as it was", async () => {
    const deadFurther = await fannedOut("processed", "dead");
    const delivered = await fannedOut("processed", "processed");

    // Without a route it is the receipt's own dead letter, as before: this receipt has none.
    expect(await move("dismiss", { receiptIds: [deadFurther] })).toEqual({
      status: 200,
      json: { changed: [], unchanged: [deadFurther] },
    });
    expect(await statuses(deadFurther)).toEqual({ own: "processed", second: "dead" });

    expect(await move("dismiss", { receiptIds: [deadFurther, delivered], route: "second" })).toEqual({
      status: 200,
      json: { changed: [deadFurther], unchanged: [delivered], routeNotFound: [] },
    });
    expect(await statuses(deadFurther)).toEqual({ own: "processed", second: "dismissed" });
    // Not dead: unchanged.
    expect(await statuses(delivered)).toEqual({ own: "processed", second: "processed" });
    // A dismissed delivery, or a dismissed receipt, is not replayed: restored first, it is.
    expect(await replay(deadFurther, "second")).toEqual({ status: 409, code: "dismissed" });
    expect(await statuses(deadFurther)).toEqual({ own: "processed", second: "dismissed" });
    // Dismissed once is not dismissed again.
    expect((await move("dismiss", { receiptIds: [deadFurther], route: "second" })).json).toEqual({
      changed: [],
      unchanged: [deadFurther],
      routeNotFound: [],
    });

    expect(await move("restore", { receiptIds: [deadFurther, delivered], route: "second" })).toEqual({
      status: 200,
      json: { changed: [deadFurther], unchanged: [delivered], routeNotFound: [] },
    });
    expect(await statuses(deadFurther)).toEqual({ own: "processed", second: "dead" });
  });

  it("acts on the receipt when the route named is the receipt's own", async () => {
    const deadOwn = await fannedOut("dead", "dead");
    expect((await move("dismiss", { receiptIds: [deadOwn], route: "first" })).json).toEqual({
      changed: [deadOwn],
      unchanged: [],
      routeNotFound: [],
    });
    expect(await statuses(deadOwn)).toEqual({ own: "dismissed", second: "dead" });
    expect(await replay(deadOwn)).toEqual({ status: 409, code: "dismissed" });
    const [row] = await database(env)
      .select({ dismissedAt: receipts.dismissedAt })
      .from(receipts)
      .where(eq(receipts.receiptId, deadOwn));
    expect(row?.dismissedAt).toEqual(expect.any(Number));

    // A route the receipt was filtered out of has no delivery to move.
    expect((await move("dismiss", { receiptIds: [deadOwn], route: "third" })).json).toEqual({
      changed: [],
      unchanged: [deadOwn],
      routeNotFound: [],
    });
    expect((await move("restore", { receiptIds: [deadOwn], route: "first" })).json).toEqual({
      changed: [deadOwn],
      unchanged: [],
      routeNotFound: [],
    });
    expect(await statuses(deadOwn)).toEqual({ own: "dead", second: "dead" });
  });

  it("checks the route against each receipt's own source: another source's route moves nothing of it", async () => {
    const deadFurther = await fannedOut("processed", "dead");
    // `demo` has one route, `default`; `second` is this file's source's route (and other sources').
    const otherSource = await seedReceipt({ source: "demo", receivedAt: Date.now(), status: "dead", attempts: 1 });

    const alone = await move("dismiss", { receiptIds: [otherSource], route: "second" });
    expect(alone.status).toBe(404);
    expect(alone.json).toMatchObject({
      error: { code: "route_not_found", message: 'Source "demo" has no route "second" (its routes: default).' },
    });
    expect(await statuses(otherSource)).toEqual({ own: "dead", second: undefined });

    // With a receipt that has the route, that one moves and the other is named apart, untouched.
    expect(await move("dismiss", { receiptIds: [otherSource, deadFurther], route: "second" })).toEqual({
      status: 200,
      json: { changed: [deadFurther], unchanged: [], routeNotFound: [otherSource] },
    });
    expect(await statuses(otherSource)).toEqual({ own: "dead", second: undefined });
    expect(await statuses(deadFurther)).toEqual({ own: "processed", second: "dismissed" });
  });

  it("refuses a route no source has, and a route that is not a name, changing nothing", async () => {
    const deadFurther = await fannedOut("processed", "dead");
    const unknown = await move("dismiss", { receiptIds: [deadFurther], route: "no-such-route" });
    expect(unknown.status).toBe(404);
    expect(unknown.json).toMatchObject({ error: { code: "route_not_found" } });
    expect(JSON.stringify(unknown.json)).toContain("no-such-route");
    for (const route of ["", 7]) {
      const invalid = await move("dismiss", { receiptIds: [deadFurther], route });
      expect(invalid.status).toBe(400);
      expect(invalid.json).toMatchObject({ error: { code: "invalid_body" } });
    }
    expect(await statuses(deadFurther)).toEqual({ own: "processed", second: "dead" });
  });
});

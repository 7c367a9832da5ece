import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { BODY_INTEGRITY_FAILED } from "../../src/bodies/body-reader";
import { parseSegmentLocation, segmentDayPrefix } from "../../src/bodies/segment-format";
import { loadReceipts } from "../../src/consumers/load/load";
import { sha256Hex } from "../../src/crypto/digest";
import { utf8Bytes } from "../../src/crypto/encoding";
import { database } from "../../src/db/client";
import { difference, meterReading } from "../../src/lib/meter";
import { ulid } from "../../src/lib/ulid";
import type { PendingClaim } from "../../src/model/claims";
import { applyRetention } from "../../src/reconcile/retention";
import { expireSegments } from "../../src/reconcile/retention-segments";
import { relayToD1 } from "../../src/relay/relay";
import { replayReceipt } from "../../src/replay/replay-receipts";
import { parseSource } from "../../src/sources/config";
import { loadSources } from "../../src/sources/registry";
import { adminGet } from "../admin/support";
import { standinRequests } from "../consumers/support/processing";
import { runCron } from "../reconcile/support";
import { eventually, post, signDemo, waitForStatus } from "../support/deliveries";

/**
 * Bodies in R2 segments (src/bodies/segment-format.ts): one object per relay batch, read back by range, expired a
 * whole day at a time, with the bodies that must outlive payload retention copied out first. Through the real route,
 * shard relay, queue consumer, admin API, replay and cron, with the BODIES bucket wrangler.toml binds
 * (test/fixtures/sources/segments.json: payload retention 1h; a forward that answers 404 then 204, or none).
 */

const FORWARD = "segments-forward";
const NONE = "segments-none";
const CORRUPT = "segments-corrupt";
/** Two routes: "main" answers 204, "side" 404 (a dead further delivery). */
const ROUTES = "segments-routes";
/** The same as NONE without `body_segments`. */
const OFF = "segments-off";
/** Past the end of today plus 1h of payload retention: every segment written now is due. */
const PAST_EXPIRY = 2 * 86_400_000;

async function row(source: string, eventKey: string) {
  return (await env.DB.prepare(
    `SELECT id AS receiptId, status, body IS NOT NULL AS bodyInRow, body_location AS bodyLocation, last_error AS lastError
     FROM receipts WHERE source = ? AND event_key = ?`,
  )
    .bind(source, eventKey)
    .first<{
      receiptId: string;
      status: string;
      bodyInRow: number;
      bodyLocation: string | null;
      lastError: string | null;
    }>())!;
}

async function sendOne(source: string, tag: string): Promise<{ eventKey: string; body: string }> {
  const eventKey = `seg_${tag}_${crypto.randomUUID()}`;
  const body = JSON.stringify({ type: "report.ready", data: { tag, note: `café ☕ ${eventKey}` } });
  expect((await post(`/webhooks/${source}`, body, signDemo(eventKey, body))).status).toBe(200);
  return { eventKey, body };
}

function onlySource(source: string): Env {
  return { ...env, SOURCES: { [source]: (env.SOURCES as Record<string, unknown>)[source] } } as Env;
}

async function detailOf(receiptId: string) {
  return (await adminGet(`/admin/api/receipts/${receiptId}`)).json<{
    receipt: {
      body: { encoding: string; text: string } | null;
      bodyRetained: boolean;
      bodyProblem: string | null;
    };
  }>();
}

/** A claim as a shard hands it to the relay, for relaying a batch of our own making. */
async function claimOf(source: string, body: string, receivedAt = Date.now()): Promise<PendingClaim> {
  const bytes = utf8Bytes(body);
  const eventKey = `seg_direct_${crypto.randomUUID()}`;
  return {
    source,
    claimKey: eventKey,
    eventKey,
    eventType: "report.ready",
    subjectId: null,
    version: null,
    occurredAt: null,
    receiptId: ulid(receivedAt),
    payloadSha256: await sha256Hex(bytes),
    body: bytes.slice().buffer,
    keptHeaders: null,
    receivedAt,
    provenance: "live",
  };
}

async function segmentKeysOf(source: string): Promise<string[]> {
  return (await env.BODIES.list({ prefix: `segments/${source}/` })).objects.map((object) => object.key);
}

describe("bodies in R2 segments", () => {
  it("writes a batch's bodies to one segment, reads each back by range byte-exact, forwards, shows and replays it", {
    timeout: 120_000,
  }, async () => {
    const { eventKey, body } = await sendOne(FORWARD, "replay");
    // The first forward meets a 404: dead, after the consumer read the body back from the segment and sent it.
    expect(await waitForStatus(FORWARD, eventKey, ["dead"])).toBe("dead");
    const receipt = await row(FORWARD, eventKey);
    expect(receipt.bodyInRow).toBe(0);
    expect(receipt.bodyLocation).toMatch(
      /^seg:segments\/segments-forward\/\d{4}-\d{2}-\d{2}\/[0-9A-Z]{26}-[0-9a-f]{8}:\d+:\d+$/,
    );

    // The range the row names is exactly the bytes received, and the object says what it is.
    const place = parseSegmentLocation(receipt.bodyLocation)!;
    const ranged = (await env.BODIES.get(place.key, { range: { offset: place.offset, length: place.length } }))!;
    expect(new Uint8Array(await ranged.arrayBuffer())).toEqual(utf8Bytes(body));
    const head = (await env.BODIES.head(place.key))!;
    expect(head.customMetadata).toMatchObject({ source: FORWARD });
    expect(Number(head.customMetadata!.count)).toBeGreaterThanOrEqual(1);
    expect(head.customMetadata!.firstReceiptId! <= receipt.receiptId).toBe(true);
    expect(head.customMetadata!.lastReceiptId! >= receipt.receiptId).toBe(true);

    expect((await detailOf(receipt.receiptId)).receipt).toMatchObject({
      body: { encoding: "utf8", text: body },
      bodyRetained: true,
      bodyProblem: null,
    });
    expect((await replayReceipt(env, receipt.receiptId)).kind).toBe("replayed");
    expect(await waitForStatus(FORWARD, eventKey, ["processed"])).toBe("processed");
    const forwards = await standinRequests(receipt.receiptId);
    expect(forwards.map((request) => request.answer)).toEqual([404, 204]);
    expect(forwards.every((request) => request.body === body)).toBe(true);
  });

  it("costs one R2 write per batch, one read for the receipts of a batch together, and no D1 row at payload retention", {
    timeout: 120_000,
  }, async () => {
    const events = 50;
    const receivedAt = Date.now();
    const claims = await Promise.all(
      Array.from({ length: events }, (_, index) =>
        claimOf(
          NONE,
          JSON.stringify({ type: "report.ready", data: { index, pad: "x".repeat(index * 7) } }),
          receivedAt,
        ),
      ),
    );
    const relayMeter = meterReading();
    await relayToD1(env, claims, []);
    const relayed = difference(meterReading().totals, relayMeter.totals);
    // One object for the whole batch: 1/50 of a Class A operation per event.
    expect({ classA: relayed.r2ClassA, classB: relayed.r2ClassB }).toEqual({ classA: 1, classB: 0 });

    const ids = claims.map((claim) => claim.receiptId);
    const readMeter = meterReading();
    const loaded = await loadReceipts(database(env), ids, env, true);
    expect(difference(meterReading().totals, readMeter.totals).r2ClassB).toBe(1);
    for (const claim of claims)
      expect(loaded.find((receipt) => receipt.receiptId === claim.receiptId)!.body).toEqual(
        new Uint8Array(claim.body!),
      );

    for (const claim of claims) await waitForStatus(NONE, claim.eventKey, ["skipped"]);
    const source = loadSources(env).get(NONE)!;
    const later = Date.now() + PAST_EXPIRY;
    const retentionMeter = meterReading();
    await applyRetention(env, [source], later);
    const expired = await expireSegments(env, [source], later, Date.now() + 60_000);
    const retention = difference(meterReading().totals, retentionMeter.totals);
    expect(expired).toMatchObject({ bodiesCopiedOut: 0, caughtUp: true });
    expect(expired.segmentsDeleted).toBeGreaterThanOrEqual(1);
    expect(await segmentKeysOf(NONE)).toEqual([]);
    // Per event, exactly: the pass's fixed work (its cursors in `checkpoints`) is fewer rows than there are events.
    expect(Math.floor(retention.d1RowsWritten / events)).toBe(0);
    // The rows keep their locations; their bodies read as dropped.
    const after = await loadReceipts(database(env), ids, env, true);
    expect(after.every((receipt) => receipt.body === null && receipt.bodyProblem === null)).toBe(true);
  });

  it("reports a body dropped once the cron deleted its segment, refuses its replay, and carries on", {
    timeout: 180_000,
  }, async () => {
    const { eventKey } = await sendOne(NONE, "dropped");
    await waitForStatus(NONE, eventKey, ["skipped"]);
    const receipt = await row(NONE, eventKey);
    const place = parseSegmentLocation(receipt.bodyLocation)!;
    expect(await env.BODIES.head(place.key)).not.toBeNull();

    await eventually(
      async () => {
        await runCron(Date.now() + PAST_EXPIRY, onlySource(NONE));
        return (await env.BODIES.head(place.key)) === null ? true : undefined;
      },
      90_000,
      "the cron to delete the segment",
    );
    // No row written: the location stays, and reads as dropped.
    expect((await row(NONE, eventKey)).bodyLocation).toBe(receipt.bodyLocation);
    expect((await detailOf(receipt.receiptId)).receipt).toMatchObject({ body: null, bodyRetained: false });
    expect((await replayReceipt(env, receipt.receiptId, Date.now() + PAST_EXPIRY)).kind).toBe("payload_expired");

    // Nothing else breaks: the next event goes to a new segment and through.
    const next = await sendOne(NONE, "after");
    expect(await waitForStatus(NONE, next.eventKey, ["skipped"])).toBe("skipped");
    const nextPlace = parseSegmentLocation((await row(NONE, next.eventKey)).bodyLocation)!;
    expect(await env.BODIES.head(nextPlace.key)).not.toBeNull();
  });

  it("copies a dead letter's body out of its segment before the segment expires, so it can still be replayed", {
    timeout: 180_000,
  }, async () => {
    const { eventKey, body } = await sendOne(FORWARD, "dead");
    expect(await waitForStatus(FORWARD, eventKey, ["dead"])).toBe("dead");
    const receipt = await row(FORWARD, eventKey);
    const place = parseSegmentLocation(receipt.bodyLocation)!;
    const day = place.key.split("/")[2]!;

    await eventually(
      async () => {
        await runCron(Date.now() + PAST_EXPIRY, onlySource(FORWARD));
        return (await env.BODIES.list({ prefix: segmentDayPrefix(FORWARD, day) })).objects.length === 0
          ? true
          : undefined;
      },
      90_000,
      "the cron to delete the day's segments",
    );
    // Copied to an object of its own, the row pointing there: one row written, for this one held body.
    expect((await row(FORWARD, eventKey)).bodyLocation).toBe("r2");
    const own = (await env.BODIES.get(receipt.receiptId))!;
    expect(new Uint8Array(await own.arrayBuffer())).toEqual(utf8Bytes(body));
    expect((await detailOf(receipt.receiptId)).receipt).toMatchObject({ body: { text: body }, bodyRetained: true });

    expect((await replayReceipt(env, receipt.receiptId)).kind).toBe("replayed");
    expect(await waitForStatus(FORWARD, eventKey, ["processed"])).toBe("processed");
    const forwards = await standinRequests(receipt.receiptId);
    expect(forwards.map((request) => request.answer)).toEqual([404, 204]);
    expect(forwards.every((request) => request.body === body)).toBe(true);
  });

  it("copies out the body of a receipt whose further route's delivery is dead, though its own route finished", {
    timeout: 180_000,
  }, async () => {
    const { eventKey, body } = await sendOne(ROUTES, "further");
    expect(await waitForStatus(ROUTES, eventKey, ["processed"])).toBe("processed");
    const receipt = await row(ROUTES, eventKey);
    await eventually(
      async () =>
        (
          await env.DB.prepare("SELECT status FROM deliveries WHERE receipt_id = ? AND route = 'side'")
            .bind(receipt.receiptId)
            .first<{ status: string }>()
        )?.status === "dead"
          ? true
          : undefined,
      30_000,
      "the side route's delivery to die",
    );
    const place = parseSegmentLocation(receipt.bodyLocation)!;
    await eventually(
      async () => {
        await runCron(Date.now() + PAST_EXPIRY, onlySource(ROUTES));
        return (await env.BODIES.head(place.key)) === null ? true : undefined;
      },
      90_000,
      "the cron to delete the segment",
    );
    expect((await row(ROUTES, eventKey)).bodyLocation).toBe("r2");
    const own = (await env.BODIES.get(receipt.receiptId))!;
    expect(new Uint8Array(await own.arrayBuffer())).toEqual(utf8Bytes(body));
  });

  it("detects a segment whose bytes changed: never shown nor sent, the replay dies saying why", {
    timeout: 120_000,
  }, async () => {
    const { eventKey, body } = await sendOne(CORRUPT, "corrupt");
    expect(await waitForStatus(CORRUPT, eventKey, ["dead"])).toBe("dead");
    const receipt = await row(CORRUPT, eventKey);
    const place = parseSegmentLocation(receipt.bodyLocation)!;

    // One byte of this body changed in place: same length, same key.
    const whole = new Uint8Array(await (await env.BODIES.get(place.key))!.arrayBuffer());
    whole[place.offset + 2] = whole[place.offset + 2]! ^ 0x01;
    await env.BODIES.put(place.key, whole);

    expect((await detailOf(receipt.receiptId)).receipt).toMatchObject({
      body: null,
      bodyRetained: true,
      bodyProblem: BODY_INTEGRITY_FAILED,
    });
    expect((await replayReceipt(env, receipt.receiptId)).kind).toBe("replayed");
    await eventually(
      async () => ((await row(CORRUPT, eventKey)).lastError === BODY_INTEGRITY_FAILED ? true : undefined),
      30_000,
      "the replay to die on the integrity check",
    );
    expect((await row(CORRUPT, eventKey)).status).toBe("dead");
    // Only the first forward, with the true bytes: the changed ones never left.
    const forwards = await standinRequests(receipt.receiptId);
    expect(forwards.map((request) => request.body)).toEqual([body]);
  });

  it("keeps bodies in D1 rows for a source without body_segments, and for every source when no bucket is bound", async () => {
    const body = JSON.stringify({ type: "report.ready", data: { tag: crypto.randomUUID() } });
    const withoutSegments = await claimOf(OFF, body);
    const withoutBucket = await claimOf(NONE, body);
    await relayToD1(env, [withoutSegments], []);
    await relayToD1({ ...env, BODIES: undefined } as unknown as Env, [withoutBucket], []);
    for (const claim of [withoutSegments, withoutBucket])
      expect(await row(claim.source, claim.eventKey)).toMatchObject({ bodyInRow: 1, bodyLocation: null });
    const context = { knownProviders: new Set(["standard-webhooks"]), knownHandlers: new Set<string>() };
    const table = (value: unknown) => ({
      provider: "standard-webhooks",
      secrets: ["DEMO_WEBHOOK_SECRET"],
      body_segments: value,
    });
    expect(parseSource("segmented", table("yes"), context)).toEqual({
      ok: false,
      problems: [expect.stringMatching(/body_segments must be true or false/)],
    });
    expect(parseSource("segmented", table(true), context).ok).toBe(true);
  });
});

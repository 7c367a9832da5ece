import { env } from "cloudflare:workers";
import { SignJWT } from "jose";
import { describe, expect, it } from "vitest";
import {
  claimAnswer,
  expectRejectedAndNothingWritten,
  nowSeconds,
  secretValue,
  send,
  storedCounts,
  uniqueKey,
} from "./support/contract";

/**
 * monday.com's JWT does not cover the body, so each token is honoured once (src/providers/monday.ts): the same
 * body under it is a duplicate, another body under it is quarantined, never accepted. A genuine retry under a fresh
 * token is one event too (D1's unique key drops it at relay). A token may live ten minutes at most. jose signs.
 */
const SOURCE = "pv-monday";

function token(claims: Record<string, unknown>, iat: number | undefined, exp: number): Promise<string> {
  const jwt = new SignJWT(claims).setProtectedHeader({ alg: "HS256", typ: "JWT" }).setExpirationTime(exp);
  if (iat !== undefined) jwt.setIssuedAt(iat);
  return jwt.sign(new TextEncoder().encode(secretValue("monday", "CURRENT")));
}

/** A token as monday.com mints one per request: issued now, five minutes to live, per-request claims. */
const freshToken = () => token({ shortLivedToken: uniqueKey("slt") }, nowSeconds(), nowSeconds() + 300);

const bodyOf = (triggerUuid: string, pulseId: number) =>
  JSON.stringify({ event: { type: "create_pulse", triggerUuid, pulseId } });

async function post(authorization: string, body: string) {
  const response = await send(SOURCE, { body, headers: { authorization, "content-type": "application/json" } });
  expect(response.ok).toBe(true);
  return claimAnswer(response);
}

/** After relaying into D1: receipts of these trigger ids, and the quarantine rows of the source. */
async function stored(triggerUuids: string[]) {
  await storedCounts(SOURCE);
  const count = async (sql: string, ...bindings: string[]) =>
    (await env.DB.prepare(sql)
      .bind(...bindings)
      .first<{ count: number }>())!.count;
  const receipts = await count(
    `SELECT COUNT(*) AS count FROM receipts WHERE source = ? AND event_key IN (${triggerUuids.map(() => "?").join(", ")})`,
    SOURCE,
    ...triggerUuids,
  );
  return { receipts, quarantined: await count("SELECT COUNT(*) AS count FROM quarantine WHERE source = ?", SOURCE) };
}

describe("monday: one token, one body", () => {
  it("the same body under a seen token is a duplicate; another body under it is quarantined, never accepted", async () => {
    const triggerUuid = uniqueKey("mnd_once");
    const forged = uniqueKey("mnd_forged");
    const before = await stored([triggerUuid, forged]);
    const captured = await freshToken();
    const first = await post(captured, bodyOf(triggerUuid, 1));
    expect(first.status).toBe("accepted");
    expect(await post(captured, bodyOf(triggerUuid, 1))).toEqual({ status: "duplicate", receipt: first.receipt });
    expect((await post(captured, bodyOf(forged, 666))).status).toBe("quarantined");
    expect((await post(captured, bodyOf(triggerUuid, 666))).status).toBe("quarantined");
    expect(await stored([triggerUuid, forged])).toEqual({
      receipts: before.receipts + 1,
      quarantined: before.quarantined + 2,
    });
  });

  it("a genuine retry under a fresh token is answered accepted, and D1's unique key keeps it one event, nothing quarantined", async () => {
    const triggerUuid = uniqueKey("mnd_retry");
    const before = await stored([triggerUuid]);
    expect((await post(await freshToken(), bodyOf(triggerUuid, 2))).status).toBe("accepted");
    expect((await post(await freshToken(), bodyOf(triggerUuid, 2))).status).toBe("accepted");
    expect(await stored([triggerUuid])).toEqual({ receipts: before.receipts + 1, quarantined: before.quarantined });
  });

  it("a token living longer than ten minutes (exp − iat, or exp − now without iat) is refused, and writes nothing", async () => {
    const now = nowSeconds();
    const longLived = await token({ shortLivedToken: uniqueKey("slt") }, now, now + 3600);
    await expectRejectedAndNothingWritten(SOURCE, {
      body: bodyOf(uniqueKey("mnd_long"), 3),
      headers: { authorization: longLived, "content-type": "application/json" },
    });
    const longWithoutIat = await token({ shortLivedToken: uniqueKey("slt") }, undefined, now + 3600);
    await expectRejectedAndNothingWritten(SOURCE, {
      body: bodyOf(uniqueKey("mnd_long"), 4),
      headers: { authorization: longWithoutIat, "content-type": "application/json" },
    });
    const tenMinutes = await token({ shortLivedToken: uniqueKey("slt") }, now, now + 600);
    expect((await post(tenMinutes, bodyOf(uniqueKey("mnd_ten"), 5))).status).toBe("accepted");
  });
});

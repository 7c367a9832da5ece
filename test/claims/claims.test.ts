import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { app } from "../../src/app";
import { claimEvent } from "../../src/claims/claim-event";
import { shardFor, shardIndex } from "../../src/claims/routing";
import type { ClaimShard } from "../../src/claims/shard";
import type { ClaimResult } from "../../src/model/claims";
import { replayReceipt } from "../../src/replay/replay-receipts";
import { loadSources } from "../../src/sources/registry";
import { account, credit, deliverDemo, eventually, post, signDemo, waitForStatus } from "../support/deliveries";
import {
  expectUnchanged,
  processedCount,
  quarantineFor,
  receiptsFor,
  settle,
  settleEachTest,
  shardClaim,
  shardQuarantineCount,
  snapshot,
} from "../support/storage";

type Answer = { status: string; receipt: string };

const nowSeconds = () => Math.floor(Date.now() / 1000);

async function provenanceOf(receiptId: string) {
  return env.DB.prepare("SELECT provenance, replay_count AS replayCount, status FROM receipts WHERE id = ?")
    .bind(receiptId)
    .first<{ provenance: string; replayCount: number; status: string }>();
}

settleEachTest();

describe("one claim per event key", () => {
  it("answers 50 concurrent copies with exactly one accepted and 49 duplicates, and applies the credit once", async () => {
    const body = JSON.stringify(credit("acct_fifty", 10));
    const headers = signDemo("msg_fifty", body);
    const responses = await Promise.all(Array.from({ length: 50 }, () => post("/webhooks/demo", body, headers)));
    expect(responses.map((response) => response.status)).toEqual(Array.from({ length: 50 }, () => 200));
    const answers = await Promise.all(responses.map((response) => response.json<Answer>()));
    const accepted = answers.filter((answer) => answer.status === "accepted");
    expect(accepted).toHaveLength(1);
    expect(answers.filter((answer) => answer.status === "duplicate")).toHaveLength(49);
    const receiptId = accepted[0]!.receipt;
    expect(new Set(answers.map((answer) => answer.receipt))).toEqual(new Set([receiptId]));

    expect(await waitForStatus("demo", "msg_fifty")).toBe("processed");
    await settle();
    expect(await receiptsFor("demo", "msg_fifty")).toEqual([
      expect.objectContaining({ receiptId, status: "processed", attempts: 1 }),
    ]);
    expect(await processedCount("demo", "msg_fifty")).toBe(1);
    expect((await account("acct_fifty"))?.credits).toBe(10);
  });

  it("deduplicates a legitimate retry that carries a fresh signature and timestamp on its webhook-id", async () => {
    const payload = credit("acct_retry", 25);
    const firstAttempt = await deliverDemo("msg_retry", payload, nowSeconds() - 120);
    const accepted = await firstAttempt.json<Answer>();
    expect(accepted.status).toBe("accepted");

    const body = JSON.stringify(payload);
    const retryHeaders = signDemo("msg_retry", body, nowSeconds());
    expect(retryHeaders["webhook-signature"]).not.toBe(
      signDemo("msg_retry", body, nowSeconds() - 120)["webhook-signature"],
    );
    const retry = await post("/webhooks/demo", body, retryHeaders);
    expect(retry.status).toBe(200);
    expect(await retry.json()).toEqual({ status: "duplicate", receipt: accepted.receipt });

    await waitForStatus("demo", "msg_retry");
    await settle();
    // The shard has dropped the body and kept only the key and hash; that tombstone still answers a late retry.
    expect(await shardClaim("demo", "msg_retry")).toMatchObject({
      receiptId: accepted.receipt,
      hasBody: false,
      relayed: true,
    });
    const late = await deliverDemo("msg_retry", payload);
    expect(await late.json()).toEqual({ status: "duplicate", receipt: accepted.receipt });
    await settle();
    expect(await receiptsFor("demo", "msg_retry")).toHaveLength(1);
    expect((await account("acct_retry"))?.credits).toBe(25);
  });

  it("quarantines the same key with a changed payload: visible in D1, never processed", async () => {
    const original = await deliverDemo("msg_changed", credit("acct_changed", 30));
    const accepted = await original.json<Answer>();
    expect(accepted.status).toBe("accepted");

    const changedAnswers = await Promise.all(
      Array.from({ length: 5 }, () => deliverDemo("msg_changed", credit("acct_changed", 3000))),
    );
    for (const response of changedAnswers) {
      expect(response.status).toBe(200);
      expect(await response.json()).toEqual({ status: "quarantined", receipt: accepted.receipt });
    }
    const other = await deliverDemo("msg_changed", credit("acct_changed_elsewhere", 1));
    expect((await other.json<Answer>()).status).toBe("quarantined");

    await settle();
    const quarantined = await quarantineFor("demo", "msg_changed");
    // One row per distinct bad payload, however often it was sent.
    expect(quarantined).toHaveLength(2);
    for (const row of quarantined) {
      expect(row).toMatchObject({ reason: "payload-mismatch", originalReceiptId: accepted.receipt });
    }
    expect(await shardQuarantineCount("demo", "msg_changed")).toBe(2);
    expect(await receiptsFor("demo", "msg_changed")).toEqual([
      expect.objectContaining({ receiptId: accepted.receipt, status: "processed" }),
    ]);
    expect((await account("acct_changed"))?.credits).toBe(30);
    expect(await account("acct_changed_elsewhere")).toBeNull();
  });

  it("keeps two distinct events for one account, both applied", async () => {
    const answers = await Promise.all([
      deliverDemo("msg_distinct_a", credit("acct_distinct", 5)),
      deliverDemo("msg_distinct_b", credit("acct_distinct", 5)),
    ]);
    const statuses = await Promise.all(answers.map((response) => response.json<Answer>()));
    expect(statuses.map((answer) => answer.status)).toEqual(["accepted", "accepted"]);
    expect(statuses[0]!.receipt).not.toBe(statuses[1]!.receipt);
    await waitForStatus("demo", "msg_distinct_a");
    await waitForStatus("demo", "msg_distinct_b");
    expect((await account("acct_distinct"))?.credits).toBe(10);
  });
});

describe("changing the shard count with no epoch declared (CLAIM_SHARD_PREVIOUS unset)", () => {
  /** An event key whose owning shard differs between the two counts. */
  function keyMovedBetween(prefix: string, fromCount: number, toCount: number): string {
    for (let attempt = 0; ; attempt++) {
      const eventKey = `${prefix}_${attempt}`;
      if (shardIndex(eventKey, fromCount) !== shardIndex(eventKey, toCount)) return eventKey;
    }
  }

  const resharded = { ...env, CLAIM_SHARD_COUNT: "3" };
  const deliverResharded = (eventKey: string, payload: unknown) => {
    const body = JSON.stringify(payload);
    return app.fetch(
      new Request("https://receiver.test/webhooks/demo", { method: "POST", body, headers: signDemo(eventKey, body) }),
      resharded,
    );
  };

  it("lets the new shard accept a copy, and D1's unique key catches it at relay: one receipt, one effect", async () => {
    const eventKey = keyMovedBetween("msg_reshard", 8, 3);
    const first = await (await deliverDemo(eventKey, credit("acct_reshard", 40))).json<Answer>();
    expect(first.status).toBe("accepted");
    await waitForStatus("demo", eventKey);

    const second = await (await deliverResharded(eventKey, credit("acct_reshard", 40))).json<Answer>();
    // The new owner has never seen the key: it accepts, and only D1 knows better.
    expect(second.status).toBe("accepted");
    expect(second.receipt).not.toBe(first.receipt);
    const claimed = await eventually(async () => {
      const row = await shardClaim("demo", eventKey, resharded);
      return row?.relayed ? row : undefined;
    });
    expect(claimed.receiptId).toBe(second.receipt);

    await settle();
    expect(await receiptsFor("demo", eventKey)).toEqual([
      expect.objectContaining({ receiptId: first.receipt, status: "processed" }),
    ]);
    expect(await processedCount("demo", eventKey)).toBe(1);
    expect((await account("acct_reshard"))?.credits).toBe(40);
  });

  it("still quarantines a changed payload that reaches a new shard: D1 compares the hashes", async () => {
    const eventKey = keyMovedBetween("msg_reshard_changed", 8, 3);
    const first = await (await deliverDemo(eventKey, credit("acct_reshard_changed", 50))).json<Answer>();
    await waitForStatus("demo", eventKey);

    const second = await (await deliverResharded(eventKey, credit("acct_reshard_changed", 5000))).json<Answer>();
    expect(second.status).toBe("accepted");
    await settle();
    const quarantined = await eventually(async () => {
      const rows = await quarantineFor("demo", eventKey);
      return rows.length > 0 ? rows : undefined;
    });
    expect(quarantined).toEqual([
      expect.objectContaining({ reason: "payload-mismatch", originalReceiptId: first.receipt }),
    ]);
    expect(await receiptsFor("demo", eventKey)).toHaveLength(1);
    expect((await account("acct_reshard_changed"))?.credits).toBe(50);
  });

  it("treats a reconciled copy with other bytes as the same event at D1 too: no quarantine, one effect", async () => {
    const eventKey = keyMovedBetween("msg_reshard_reconciled", 8, 3);
    const first = await (await deliverDemo(eventKey, credit("acct_reshard_reconciled", 70))).json<Answer>();
    await waitForStatus("demo", eventKey);

    // The provider API's rendering of the event: same key, different bytes, entering the way catch-up enters.
    const rendered = new TextEncoder().encode(
      JSON.stringify({ data: { amount: 70, account: "acct_reshard_reconciled" }, type: "account.credited" }),
    );
    const reclaimed = await claimEvent(resharded, {
      source: loadSources(env).get("demo")!,
      identity: {
        eventKey,
        eventKeyOrigin: "provider-id",
        eventKeySigned: true,
        eventType: "account.credited",
        subjectId: "acct_reshard_reconciled",
        version: null,
        occurredAt: null,
      },
      rawBody: rendered,
      keptHeaders: {},
      receivedAt: Date.now(),
      provenance: "reconciled",
    });
    expect(reclaimed.disposition).toBe("accepted");
    await eventually(async () => {
      const row = await shardClaim("demo", eventKey, resharded);
      return row?.relayed ? row : undefined;
    });
    await settle();
    expect(await quarantineFor("demo", eventKey)).toEqual([]);
    expect(await receiptsFor("demo", eventKey)).toEqual([
      expect.objectContaining({ receiptId: first.receipt, status: "processed" }),
    ]);
    expect((await account("acct_reshard_reconciled"))?.credits).toBe(70);
  });

  it("keeps a replayed reconciled receipt reconciled, so a later live copy with other bytes is a duplicate, not quarantined", async () => {
    const eventKey = keyMovedBetween("msg_replayed_reconciled", 8, 3);
    // Catch-up found the event first: the provider API's rendering of it, claimed as reconciled.
    const rendered = new TextEncoder().encode(
      JSON.stringify({ data: { amount: 80, account: "acct_replayed_reconciled" }, type: "account.credited" }),
    );
    const reclaimed = await claimEvent(env, {
      source: loadSources(env).get("demo")!,
      identity: {
        eventKey,
        eventKeyOrigin: "provider-id",
        eventKeySigned: true,
        eventType: "account.credited",
        subjectId: "acct_replayed_reconciled",
        version: null,
        occurredAt: null,
      },
      rawBody: rendered,
      keptHeaders: {},
      receivedAt: Date.now(),
      provenance: "reconciled",
    });
    expect(reclaimed.disposition).toBe("accepted");
    expect(await waitForStatus("demo", eventKey)).toBe("processed");
    const [reconciled] = await receiptsFor("demo", eventKey);

    // An operator replays it; the replay runs (a duplicate: nothing applied) and the receipt settles again.
    expect((await replayReceipt(env, reconciled!.receiptId)).kind).toBe("replayed");
    await settle();
    expect(await provenanceOf(reconciled!.receiptId)).toEqual({
      provenance: "reconciled",
      replayCount: 1,
      status: "processed",
    });

    // The live delivery arrives late at a shard that never saw the key: only D1 can tell, by the stored provenance.
    const live = await (await deliverResharded(eventKey, credit("acct_replayed_reconciled", 80))).json<Answer>();
    expect(live.status).toBe("accepted");
    await eventually(async () => ((await shardClaim("demo", eventKey, resharded))?.relayed ? true : undefined));
    await settle();
    expect(await quarantineFor("demo", eventKey)).toEqual([]);
    expect(await receiptsFor("demo", eventKey)).toEqual([
      expect.objectContaining({ receiptId: reconciled!.receiptId, status: "processed" }),
    ]);
    expect((await account("acct_replayed_reconciled"))?.credits).toBe(80);
  });
});

describe("after the shard has forgotten a key", () => {
  it("still applies nothing twice: D1's unique key stands behind the shard, and a changed payload is quarantined", async () => {
    const original = await (await deliverDemo("msg_forgotten", credit("acct_forgotten", 60))).json<Answer>();
    await waitForStatus("demo", "msg_forgotten");
    await settle();
    // Retention as the cron applies it: keys older than the cutoff leave the shard.
    const shard = shardFor(env, "demo", "msg_forgotten");
    expect(await shard.pruneKeys(Date.now() + 1)).toBeGreaterThan(0);
    expect(await shardClaim("demo", "msg_forgotten")).toBeNull();

    const resent = await (await deliverDemo("msg_forgotten", credit("acct_forgotten", 60))).json<Answer>();
    expect(resent.status).toBe("accepted");
    expect(resent.receipt).not.toBe(original.receipt);
    await settle();
    const changed = await (await deliverDemo("msg_forgotten", credit("acct_forgotten", 6000))).json<Answer>();
    expect(changed.status).toBe("quarantined");
    await settle();

    expect(await receiptsFor("demo", "msg_forgotten")).toEqual([
      expect.objectContaining({ receiptId: original.receipt, status: "processed" }),
    ]);
    expect(await processedCount("demo", "msg_forgotten")).toBe(1);
    expect((await account("acct_forgotten"))?.credits).toBe(60);
    // The resent copy matched the stored bytes (dropped); the changed one did not (quarantined by the shard,
    // which had re-learned the key from the resend).
    expect(await quarantineFor("demo", "msg_forgotten")).toEqual([
      expect.objectContaining({ reason: "payload-mismatch" }),
    ]);
  });
});

describe("when the claim cannot be stored", () => {
  const failingNamespace = (failure: () => never): DurableObjectNamespace => {
    const real = env.CLAIM_SHARDS;
    return {
      idFromName: (name: string) => real.idFromName(name),
      idFromString: (text: string) => real.idFromString(text),
      newUniqueId: () => real.newUniqueId(),
      jurisdiction: () => failingNamespace(failure),
      getByName: () => failure(),
      get: () =>
        new Proxy({} as DurableObjectStub, {
          get: (_target, property) => (property === "then" ? undefined : () => Promise.resolve().then(failure)),
        }),
    } as unknown as DurableObjectNamespace;
  };

  for (const [label, failure] of [
    [
      "the shard is overloaded",
      () => {
        throw new Error("Durable Object is overloaded. Requests queued for too long.");
      },
    ],
    [
      "the shard was reset mid-request",
      () => {
        throw new Error("Durable Object reset because its code was updated.");
      },
    ],
  ] as const) {
    it(`answers 503 with Retry-After and writes nothing when ${label}`, async () => {
      const before = await snapshot();
      const body = JSON.stringify(credit("acct_no_claim", 1));
      const response = await app.fetch(
        new Request("https://receiver.test/webhooks/demo", {
          method: "POST",
          body,
          headers: signDemo("msg_no_claim", body),
        }),
        { ...env, CLAIM_SHARDS: failingNamespace(failure) },
      );
      expect(response.status).toBe(503);
      expect(response.headers.get("retry-after")).toBe("5");
      expect((await response.json<{ error: { code: string } }>()).error.code).toBe("claim_unavailable");
      await new Promise((resolve) => setTimeout(resolve, 200));
      await expectUnchanged(before);
      expect(await shardClaim("demo", "msg_no_claim")).toBeNull();
    });
  }

  it("stores exactly one receipt when the shard commits the claim but its answer is lost and the sender retries", async () => {
    const body = JSON.stringify(credit("acct_answer_lost", 9));
    const headers = signDemo("msg_answer_lost", body);
    // The real shard stores the claim; the answer then never reaches the Worker (the connection drops on the way back).
    const committed: ClaimResult[] = [];
    const real = env.CLAIM_SHARDS;
    const answerLost = {
      idFromName: (name: string) => real.idFromName(name),
      get: (id: DurableObjectId, options?: DurableObjectNamespaceGetDurableObjectOptions) => {
        const stub = real.get(id, options) as unknown as DurableObjectStub<ClaimShard>;
        return {
          claim: async (input: Parameters<ClaimShard["claim"]>[0]) => {
            committed.push(await stub.claim(input));
            throw new Error("Network connection lost.");
          },
        };
      },
    } as unknown as DurableObjectNamespace;

    const refused = await app.fetch(
      new Request("https://receiver.test/webhooks/demo", { method: "POST", body, headers }),
      { ...env, CLAIM_SHARDS: answerLost },
    );
    expect(refused.status).toBe(503);
    expect(committed).toEqual([expect.objectContaining({ disposition: "accepted" })]);
    expect(await shardClaim("demo", "msg_answer_lost")).toMatchObject({ receiptId: committed[0]!.receiptId });

    // The sender retries the same delivery: the shard knows it, and answers with the receipt it already stored.
    const retried = await post("/webhooks/demo", body, headers);
    expect(retried.status).toBe(200);
    expect(await retried.json()).toEqual({ status: "duplicate", receipt: committed[0]!.receiptId });
    await settle();
    expect(await receiptsFor("demo", "msg_answer_lost")).toEqual([
      expect.objectContaining({ receiptId: committed[0]!.receiptId, status: "processed" }),
    ]);
    expect(await processedCount("demo", "msg_answer_lost")).toBe(1);
    expect((await account("acct_answer_lost"))?.credits).toBe(9);
  });

  it("answers 503 when the namespace itself throws, and the sender's retry is then accepted once", async () => {
    const body = JSON.stringify(credit("acct_no_claim_retry", 6));
    const headers = signDemo("msg_no_claim_retry", body);
    const broken = {
      ...env,
      CLAIM_SHARDS: {
        idFromName: () => {
          throw new Error("binding unavailable");
        },
      } as unknown as DurableObjectNamespace,
    };
    const refused = await app.fetch(
      new Request("https://receiver.test/webhooks/demo", { method: "POST", body, headers }),
      broken,
    );
    expect(refused.status).toBe(503);
    expect(await shardClaim("demo", "msg_no_claim_retry")).toBeNull();

    const retried = await post("/webhooks/demo", body, headers);
    expect((await retried.json<Answer>()).status).toBe("accepted");
    await waitForStatus("demo", "msg_no_claim_retry");
    expect((await account("acct_no_claim_retry"))?.credits).toBe(6);
  });
});

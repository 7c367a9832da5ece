import { env, exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { processReceipt } from "../../src/consumers/receipts/process";
import { standinRequests } from "../consumers/support/processing";
import { send, storedReceipt, uniqueKey } from "./support/contract";
import { sha256Hex } from "./support/signers";

/**
 * Microsoft Graph proves a notification with `clientState`, which is the source's secret itself, carried in the
 * body. Through the real route: after an accepted notification, neither the stored receipt, the admin API, nor the
 * forward to the destination carries that value; what is kept (and hashed, and keyed) is the body with it redacted.
 */
const source = "pv-graph-forwarded";
const clientState = (env as unknown as Record<string, string>).PV_GRAPH_FORWARDED_STATE!;

const notification = (marker: string) =>
  JSON.stringify({
    value: [
      { subscriptionId: "sub-1", clientState, changeType: "created", resource: `Users/${marker}`, tenantId: "t" },
      { subscriptionId: "sub-1", clientState, changeType: "updated", resource: `Users/${marker}`, tenantId: "t" },
    ],
  });

describe("microsoft-graph: clientState never leaves the route", () => {
  it("the receipt, the admin API and the forward carry the notification with clientState redacted", async () => {
    const marker = uniqueKey("graph_redacted");
    const response = await send(source, {
      body: notification(marker),
      headers: { "content-type": "application/json" },
    });
    expect(response.status).toBe(202);
    const receiptId = response.headers.get("x-webhook-receipt")!;

    const redacted = JSON.stringify(
      JSON.parse(notification(marker), (name, value) => (name === "clientState" ? "[redacted]" : value)),
    );
    const receipt = await storedReceipt(source, receiptId);
    expect(receipt).toMatchObject({
      eventKey: sha256Hex(redacted),
      eventType: "created",
      subjectId: `Users/${marker}`,
    });
    const row = await env.DB.prepare("SELECT body, payload_sha256 AS payloadSha256 FROM receipts WHERE id = ?")
      .bind(receiptId)
      .first<{ body: number[]; payloadSha256: string }>();
    expect(new TextDecoder().decode(new Uint8Array(row!.body))).toBe(redacted);
    expect(row!.payloadSha256).toBe(sha256Hex(redacted));

    const admin = await exports.default.fetch(
      new Request(`https://receiver.test/admin/api/receipts/${receiptId}`, {
        headers: { authorization: `Bearer ${env.ADMIN_TOKEN}` },
      }),
    );
    expect(admin.status).toBe(200);
    const shown = await admin.text();
    expect(shown).toContain(`Users/${marker}`);
    expect(shown).not.toContain(clientState);

    await processReceipt(env, receiptId);
    const forwarded = await standinRequests(receiptId);
    expect(forwarded.length).toBeGreaterThan(0);
    for (const request of forwarded) {
      expect(request.body).toBe(redacted);
      expect(JSON.stringify(request.headers)).not.toContain(clientState);
    }

    // Graph's retry (the same bytes) is still the one event.
    const retry = await send(source, { body: notification(marker), headers: { "content-type": "application/json" } });
    expect({
      disposition: retry.headers.get("x-webhook-disposition"),
      receipt: retry.headers.get("x-webhook-receipt"),
    }).toEqual({ disposition: "duplicate", receipt: receiptId });
  });
});

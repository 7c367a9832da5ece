import { describe, it } from "vitest";
import {
  expectAccepted,
  expectRejectedAndNothingWritten,
  nowSeconds,
  secretValue,
  uniqueKey,
} from "./support/contract";
import { hmac } from "./support/signers";

/**
 * Standard Webhooks signs `id.timestamp.body`. An id holding `.` and then a time inside the tolerance signs the same
 * bytes as a shorter id with that time and the rest moved into the body: one captured delivery would be two keys.
 * Both readings are refused (src/providers/standard-webhooks.ts); an id with other dots is not.
 */
const SOURCE = "pv-standard";

function signed(webhookId: string, timestamp: string, body: string) {
  const key = Buffer.from(secretValue("standard", "CURRENT").replace(/^whsec_/, ""), "base64");
  return {
    body,
    headers: {
      "content-type": "application/json",
      "webhook-id": webhookId,
      "webhook-timestamp": timestamp,
      "webhook-signature": `v1,${hmac("sha256", key, `${webhookId}.${timestamp}.`, body).toString("base64")}`,
    },
  };
}

describe("standard-webhooks: the signed string names one id", () => {
  it("refuses an id holding a current time after a dot, and the copy that reads the same bytes as a shorter id", async () => {
    const prefix = uniqueKey("evt");
    const idTime = String(nowSeconds() - 5);
    const t = String(nowSeconds());
    const body = JSON.stringify({ type: "invoice.paid", data: { marker: prefix } });
    await expectRejectedAndNothingWritten(SOURCE, signed(`${prefix}.${idTime}`, t, body));
    // The same signed bytes, split after `prefix`: id `prefix`, timestamp `idTime`, body `t.{…}`.
    const moved = signed(prefix, idTime, `${t}.${body}`);
    await expectRejectedAndNothingWritten(SOURCE, moved);
  });

  it("accepts ids with dots that cannot be read as a time in the tolerance", async () => {
    const body = JSON.stringify({ type: "invoice.paid", data: { marker: uniqueKey("dots") } });
    await expectAccepted(SOURCE, signed(`${uniqueKey("evt")}.v2.42`, String(nowSeconds()), body));
  });
});

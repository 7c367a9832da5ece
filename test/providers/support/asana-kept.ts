import { env } from "cloudflare:workers";
import { send, uniqueKey } from "./contract";
import { hmac } from "./signers";

/** An Asana source's handshake and deliveries, as the kept-secret tests send them. */

export const ASANA_TOKEN = (env as unknown as Record<string, string>).KS_ASANA_VERIFY_TOKEN!;

export const asanaHandshake = (source: string, hookSecret: string, client: Record<string, string> = {}) =>
  send(source, {
    url: `https://receiver.test/webhooks/${source}?verify_token=${ASANA_TOKEN}`,
    body: "",
    headers: { "x-hook-secret": hookSecret, ...client },
  });

/** A delivery of one task change, signed with `secret` as Asana signs with the hook's secret. */
export function asanaDelivery(secret: string) {
  const body = JSON.stringify({
    events: [
      {
        action: "changed",
        resource: { gid: uniqueKey("task"), resource_type: "task" },
        created_at: "2026-11-30T08:00:00.000Z",
      },
    ],
  });
  return { body, headers: { "x-hook-signature": hmac("sha256", secret, body).toString("hex") } };
}

import { utf8Bytes } from "../crypto/encoding";
import { parseJsonBody } from "./json";
import {
  describePayload,
  event,
  eventKeyOf,
  headerTypeUnlessConfigured,
  readHeader,
  signedAdapter,
  utf8Key,
} from "./signed";

/**
 * GitLab: `X-Gitlab-Token` carries the webhook's secret token itself (no signature, no timestamp); it is compared
 * with each listed secret in constant time (SHA-256 digests through timingSafeEqual). The key is `Idempotency-Key`,
 * which GitLab keeps across retries of one delivery, else `X-Gitlab-Event-UUID`. The type is `X-Gitlab-Event`.
 */
export const gitlab = signedAdapter({
  provider: "gitlab",
  keptHeaders: [
    "x-gitlab-event",
    "x-gitlab-event-uuid",
    "x-gitlab-webhook-uuid",
    "x-gitlab-instance",
    "idempotency-key",
    "user-agent",
  ],

  read({ headers }) {
    const token = readHeader(headers, "x-gitlab-token");
    if (!token) return "missing-signature";
    return { signatures: [{ algorithm: "token", bytes: utf8Bytes(token) }], signedContent: new Uint8Array(0) };
  },

  keyFor: utf8Key("token"),

  async identify({ input }) {
    const headers = input.headers;
    const described = describePayload(parseJsonBody(input.rawBody), input.options, { subject: "object_attributes.id" });
    return event({
      ...(await eventKeyOf(
        readHeader(headers, "idempotency-key") ?? readHeader(headers, "x-gitlab-event-uuid"),
        input.rawBody,
        { signed: false },
      )),
      ...described,
      eventType: headerTypeUnlessConfigured(input.options, described.eventType, readHeader(headers, "x-gitlab-event")),
    });
  },
});

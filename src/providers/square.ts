import { concatBytes, utf8Bytes } from "../crypto/encoding";
import { parseJsonBody, stringAtPath } from "./json";
import {
  describePayload,
  event,
  eventKeyOf,
  optionString,
  presentedSignatures,
  readHeader,
  signedAdapter,
  utf8Key,
} from "./signed";

/**
 * Square: `x-square-hmacsha256-signature: <base64>`, HMAC-SHA256 over the subscription's notification URL followed
 * by the body, keyed by the subscription's signature key. The URL is the source's `notification_url`, required:
 * URL and body are signed back to back, so were the URL read from the request, bytes could move between its query
 * and the body under one signature; a URL fixed by the configuration leaves them nowhere to go. The key is the
 * payload's `event_id`. The signature has no timestamp.
 */
export const square = signedAdapter({
  provider: "square",
  keptHeaders: ["square-version", "square-retry-number", "square-retry-reason", "user-agent"],

  read({ headers, rawBody, options }) {
    const signature = readHeader(headers, "x-square-hmacsha256-signature");
    if (!signature) return "missing-signature";
    const notificationUrl = optionString(options, "notification_url");
    // validateOptions takes a source without it out of service (503); an adapter called without it verifies nothing.
    if (!notificationUrl) return "ambiguous-signed-url";
    return {
      signatures: presentedSignatures([signature], "base64", "hmac-sha256"),
      signedContent: concatBytes(utf8Bytes(notificationUrl), rawBody),
    };
  },

  keyFor: utf8Key("hmac-sha256"),

  async identify({ input }) {
    const payload = parseJsonBody(input.rawBody);
    return event({
      ...(await eventKeyOf(stringAtPath(payload, "event_id"), input.rawBody, { signed: true })),
      ...describePayload(payload, input.options, { type: "type", subject: "data.id", occurredAt: "created_at" }),
    });
  },

  validateOptions(options) {
    const url = options.notification_url;
    if (url === undefined)
      return ["notification_url is required: the http(s) URL registered with Square, exactly as registered"];
    return typeof url === "string" && /^https?:\/\/[^\s]+$/.test(url)
      ? []
      : ["notification_url must be the http(s) URL registered with Square"];
  },
});

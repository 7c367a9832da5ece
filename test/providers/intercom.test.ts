import { adapterContract, header, withHeader } from "./support/contract";
import { hmac } from "./support/signers";

// Intercom publishes no signer; node:crypto signs with its documented recipe (sha1= hex HMAC-SHA1 of the body).
adapterContract({
  name: "intercom",
  sign({ secret, eventKey }) {
    const body = JSON.stringify({
      type: "notification_event",
      id: eventKey,
      topic: "conversation.user.created",
      created_at: 1_700_000_000,
      data: { type: "notification_event_data", item: { type: "conversation", id: `conv_${eventKey}` } },
    });
    return {
      body,
      headers: {
        "x-hub-signature": `sha1=${hmac("sha1", secret, body).toString("hex")}`,
        "content-type": "application/json",
      },
    };
  },
  expected: ({ eventKey }) => ({
    eventKey,
    eventType: "conversation.user.created",
    subjectId: `conv_${eventKey}`,
    occurredAt: 1_700_000_000_000,
  }),
  signatureHeaders: ["x-hub-signature"],
  malformEncoding: (request) => withHeader(request, "x-hub-signature", "sha1=0123456789abcdef0123456789abcdef0123456"),
  junkSignature: (request) =>
    withHeader(request, "x-hub-signature", `sha256=${header(request, "x-hub-signature").slice(5)}`),
  timestamped: false,
});

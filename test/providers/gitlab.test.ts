import { describe, expect, it } from "vitest";
import {
  adapterContract,
  expectAccepted,
  header,
  secretValue,
  storedReceipt,
  uniqueKey,
  withHeader,
} from "./support/contract";

/**
 * GitLab sends its secret token itself, not a signature: nothing binds it to the body, so "one changed byte" here
 * is one changed byte of the token (a changed body with the right token is, by GitLab's design, still GitLab's).
 */
const gitlabRequest = (token: string, eventKey: string, extraHeaders: Record<string, string> = {}) => ({
  body: JSON.stringify({ object_kind: "merge_request", object_attributes: { id: 99, iid: 3 }, marker: eventKey }),
  headers: {
    "x-gitlab-token": token,
    "idempotency-key": eventKey,
    "x-gitlab-event-uuid": `uuid-${eventKey}`,
    "x-gitlab-event": "Merge Request Hook",
    "content-type": "application/json",
    ...extraHeaders,
  },
});

adapterContract({
  name: "gitlab",
  sign: ({ secret, eventKey }) => gitlabRequest(secret, eventKey),
  expected: ({ eventKey }) => ({ eventKey, eventType: "Merge Request Hook", subjectId: "99" }),
  signatureHeaders: ["x-gitlab-token"],
  // A prefix of the right token, and the token with a trailing space: a startsWith or trimmed compare would pass.
  malformEncoding: (request) => withHeader(request, "x-gitlab-token", header(request, "x-gitlab-token").slice(0, -1)),
  junkSignature: (request) => withHeader(request, "x-gitlab-token", `${header(request, "x-gitlab-token")},junk`),
  timestamped: false,
  tamper: (request) => {
    const token = header(request, "x-gitlab-token");
    const last = token.at(-1) === "a" ? "b" : "a";
    return withHeader(request, "x-gitlab-token", token.slice(0, -1) + last);
  },
});

describe("gitlab: event identity", () => {
  it("falls back to X-Gitlab-Event-UUID when a delivery carries no Idempotency-Key", async () => {
    const eventKey = uniqueKey("gl_uuid");
    const request = withHeader(gitlabRequest(secretValue("gitlab", "CURRENT"), eventKey), "idempotency-key", null);
    const receiptId = await expectAccepted("pv-gitlab", request);
    expect((await storedReceipt("pv-gitlab", receiptId)).eventKey).toBe(`uuid-${eventKey}`);
  });
});

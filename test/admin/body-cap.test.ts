import { env, exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { ADMIN_MAX_BODY_BYTES, ADMIN_OVER_CAP_DRAIN_BYTES } from "../../src/admin/guards/body-cap";
import { ADMIN } from "./support";

/**
 * Every admin POST has its body capped before anything parses it (or, for the login form, before the token in it
 * is compared): an oversized body, declared or streamed without a Content-Length, is a 413 and does nothing.
 */

const ORIGIN = "https://receiver.test";
const padding = (bytes: number) => "a".repeat(bytes);

/** A body that trickles in `chunkBytes` at a time with no Content-Length, counting how much of it was pulled. */
function unsizedStream(text: string, chunkBytes = 1024) {
  const bytes = new TextEncoder().encode(text);
  const seen = { pulled: 0 };
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (seen.pulled >= bytes.byteLength) return controller.close();
      const chunk = bytes.slice(seen.pulled, seen.pulled + chunkBytes);
      seen.pulled += chunk.byteLength;
      controller.enqueue(chunk);
    },
  });
  return { stream, seen };
}

async function expectTooLarge(response: Response) {
  expect(response.status).toBe(413);
  expect(response.headers.get("set-cookie")).toBeNull();
  expect(await response.json()).toEqual({
    error: { code: "payload_too_large", message: `Admin request bodies are limited to ${ADMIN_MAX_BODY_BYTES} bytes.` },
  });
}

const loginForm = (extra: string) => `token=${encodeURIComponent(env.ADMIN_TOKEN)}&pad=${extra}`;

describe("admin request bodies are capped before parsing", () => {
  it("refuses an oversized login form with 413 even when it carries the right token, and signs nobody in", async () => {
    const response = await exports.default.fetch(
      new Request(`${ORIGIN}/admin/login`, {
        method: "POST",
        body: loginForm(padding(ADMIN_MAX_BODY_BYTES)),
        headers: { "content-type": "application/x-www-form-urlencoded", origin: ORIGIN },
        redirect: "manual",
      }),
    );
    await expectTooLarge(response);
  });

  it("refuses an oversized login form sent chunked, with no Content-Length, without reading it all", async () => {
    const { stream, seen } = unsizedStream(loginForm(padding(4 * 1024 * 1024)));
    const request = new Request(`${ORIGIN}/admin/login`, {
      method: "POST",
      body: stream,
      headers: { "content-type": "application/x-www-form-urlencoded", origin: ORIGIN },
      redirect: "manual",
    });
    expect(request.headers.get("content-length")).toBeNull();
    await expectTooLarge(await exports.default.fetch(request));
    // Past the cap only the drain allowance is read (and none of it kept), never the whole 4 MiB a parser would buffer.
    expect(seen.pulled).toBeLessThan(ADMIN_MAX_BODY_BYTES + ADMIN_OVER_CAP_DRAIN_BYTES + 64 * 1024);
  });

  it("refuses an oversized body on an API POST with 413 before the JSON is parsed", async () => {
    const body = JSON.stringify({ receiptIds: ["01JCQ0000000000000000000AA"], pad: padding(ADMIN_MAX_BODY_BYTES) });
    const response = await exports.default.fetch(
      new Request(`${ORIGIN}/admin/api/dead/dismiss`, {
        method: "POST",
        body,
        headers: { ...ADMIN, "content-type": "application/json" },
      }),
    );
    await expectTooLarge(response);
  });

  it("refuses an unsized oversized API body too, and still takes a body under the cap", async () => {
    const { stream } = unsizedStream(
      JSON.stringify({ receiptIds: ["01JCQ0000000000000000000AA"], pad: padding(2 * ADMIN_MAX_BODY_BYTES) }),
    );
    const refused = await exports.default.fetch(
      new Request(`${ORIGIN}/admin/api/dead/dismiss`, {
        method: "POST",
        body: stream,
        headers: { ...ADMIN, "content-type": "application/json" },
      }),
    );
    await expectTooLarge(refused);

    const { stream: small } = unsizedStream(JSON.stringify({ receiptIds: ["01JCQ0000000000000000000AA"] }), 8);
    const accepted = await exports.default.fetch(
      new Request(`${ORIGIN}/admin/api/dead/dismiss`, {
        method: "POST",
        body: small,
        headers: { ...ADMIN, "content-type": "application/json" },
      }),
    );
    expect(accepted.status).toBe(200);
  });
});

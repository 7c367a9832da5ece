import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { app } from "../../src/app";
import { OVER_CAP_DRAIN_BYTES, readBodyWithCap } from "../../src/ingest/read-body";
import { credit, signDemo } from "../support/deliveries";
import { expectUnchanged, settleEachTest, shardClaim, snapshot } from "../support/storage";

/**
 * Reading the request body: a stream that breaks part-way is the sender's problem (400, nothing written, no
 * error line), and a body over the cap is read to its end (up to a bound) before the 413, so the answer is not
 * lost to a reset while the sender is still writing. The same 413 under real concurrency through wrangler dev is
 * test/http/request-bodies.http.ts.
 */

/** A body delivered `chunkBytes` at a time, counting how much of it the receiver pulled and whether it cancelled. */
function countedStream(totalBytes: number, chunkBytes: number) {
  const seen = { pulled: 0, cancelled: false };
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (seen.pulled >= totalBytes) return controller.close();
      const size = Math.min(chunkBytes, totalBytes - seen.pulled);
      seen.pulled += size;
      controller.enqueue(new Uint8Array(size).fill(0x61));
    },
    cancel() {
      seen.cancelled = true;
    },
  });
  return { stream, seen };
}

function postStream(
  path: string,
  body: ReadableStream<Uint8Array>,
  headers: Record<string, string>,
): Promise<Response> {
  return Promise.resolve(
    app.fetch(new Request(`https://receiver.test${path}`, { method: "POST", body, headers }), env),
  );
}

afterEach(() => {
  vi.restoreAllMocks();
});

settleEachTest();

describe("a body stream that fails mid-read", () => {
  it("answers 400 body_unreadable, writes nothing and logs no error line", async () => {
    const errors: string[] = [];
    vi.spyOn(console, "error").mockImplementation((...args: unknown[]) => void errors.push(args.map(String).join(" ")));
    const lines: string[] = [];
    vi.spyOn(console, "log").mockImplementation((...args: unknown[]) => void lines.push(args.map(String).join(" ")));

    const body = JSON.stringify(credit("acct_broken_stream", 1));
    const bytes = new TextEncoder().encode(body);
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(bytes.slice(0, 10));
        controller.error(new TypeError("Network connection lost."));
      },
    });
    const before = await snapshot();
    const response = await postStream("/webhooks/demo", stream, signDemo("msg_broken_stream", body));

    expect(response.status).toBe(400);
    expect((await response.json<{ error: { code: string } }>()).error.code).toBe("body_unreadable");
    await new Promise((resolve) => setTimeout(resolve, 200));
    await expectUnchanged(before);
    expect(await shardClaim("demo", "msg_broken_stream")).toBeNull();
    expect(errors).toEqual([]);
    const rejected = lines
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .filter((line) => line.event === "delivery.rejected");
    expect(rejected).toEqual([expect.objectContaining({ source: "demo", disposition: "body_unreadable" })]);
  });
});

describe("a body with a declared Content-Length within the cap (read whole)", () => {
  it("is unreadable, not an error, when its stream breaks part-way", async () => {
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new Uint8Array(10));
        controller.error(new TypeError("Network connection lost."));
      },
    });
    const request = new Request("https://receiver.test/", {
      method: "POST",
      body: stream,
      headers: { "content-length": "100" },
    });
    expect(await readBodyWithCap(request, 1024)).toBe("unreadable");
  });

  it("is still refused over the cap when the stream outruns the length it declared", async () => {
    const { stream } = countedStream(3000, 100);
    const request = new Request("https://receiver.test/", {
      method: "POST",
      body: stream,
      headers: { "content-length": "100" },
    });
    expect(await readBodyWithCap(request, 1024)).toBe("too-large");
  });
});

describe("a body over the cap", () => {
  it("is read to its end before the 413 when the rest fits the drain bound, and nothing of it is kept", async () => {
    const { stream, seen } = countedStream(3000, 100);
    const response = await postStream("/webhooks/capped", stream, signDemo("msg_drained", "{}"));
    expect(response.status).toBe(413);
    expect(seen.pulled).toBe(3000);
    expect(seen.cancelled).toBe(false);
  });

  it("stops reading at the drain bound and cancels the rest", async () => {
    const cap = 1024;
    expect(OVER_CAP_DRAIN_BYTES).toBeGreaterThan(0);
    const { stream, seen } = countedStream(cap + OVER_CAP_DRAIN_BYTES + 64 * 1024, 16 * 1024);
    expect(await readBodyWithCap(new Request("https://receiver.test/", { method: "POST", body: stream }), cap)).toBe(
      "too-large",
    );
    expect(seen.pulled).toBeLessThanOrEqual(cap + OVER_CAP_DRAIN_BYTES + 16 * 1024);
    expect(seen.cancelled).toBe(true);
  });

  it("with a declared Content-Length over the cap, drains a body within the bound and keeps none of it", async () => {
    const body = JSON.stringify({ ...credit("acct_declared_over", 1), padding: "x".repeat(2000) });
    const headers = { ...signDemo("msg_declared_over", body), "content-length": String(body.length) };
    const request = new Request("https://receiver.test/webhooks/capped", { method: "POST", body, headers });
    expect(await readBodyWithCap(request, 1024)).toBe("too-large");
    expect(request.bodyUsed).toBe(true);
  });

  it("a stream that fails while being drained is still answered 413", async () => {
    let sent = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent >= 2048) return controller.error(new TypeError("Network connection lost."));
        sent += 512;
        controller.enqueue(new Uint8Array(512));
      },
    });
    expect(await readBodyWithCap(new Request("https://receiver.test/", { method: "POST", body: stream }), 1024)).toBe(
      "too-large",
    );
  });
});

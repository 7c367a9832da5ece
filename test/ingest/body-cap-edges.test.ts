import { describe, expect, it } from "vitest";
import { readBodyWithCap } from "../../src/ingest/read-body";

/**
 * The body cap to the byte (src/ingest/read-body.ts): a body of exactly the cap is read whole, one byte more is
 * refused, whether its length is declared or it arrives chunked with none. The 413 through the route is
 * test/ingest/body-read.test.ts.
 */

const CAP = 1000;

function chunked(totalBytes: number, chunkBytes: number): ReadableStream<Uint8Array> {
  let sent = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (sent >= totalBytes) return controller.close();
      const size = Math.min(chunkBytes, totalBytes - sent);
      sent += size;
      controller.enqueue(new Uint8Array(size).fill(0x61));
    },
  });
}

const request = (body: BodyInit, headers: Record<string, string> = {}) =>
  new Request("https://receiver.test/", { method: "POST", body, headers });

describe("a body at the cap", () => {
  it("with its length declared, is read whole at exactly the cap and refused one byte over", async () => {
    const atTheCap = await readBodyWithCap(request("a".repeat(CAP), { "content-length": String(CAP) }), CAP);
    expect(atTheCap).toBeInstanceOf(Uint8Array);
    expect((atTheCap as Uint8Array).byteLength).toBe(CAP);
    expect(await readBodyWithCap(request("a".repeat(CAP + 1), { "content-length": String(CAP + 1) }), CAP)).toBe(
      "too-large",
    );
  });

  it("arriving chunked with no length, is read whole at exactly the cap and refused one byte over", async () => {
    const atTheCap = await readBodyWithCap(request(chunked(CAP, 300)), CAP);
    expect(atTheCap).toBeInstanceOf(Uint8Array);
    expect((atTheCap as Uint8Array).byteLength).toBe(CAP);
    expect(await readBodyWithCap(request(chunked(CAP + 1, 300)), CAP)).toBe("too-large");
  });
});

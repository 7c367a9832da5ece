/**
 * Past the cap, how much more of a body we read and throw away before answering 413. Answering while the sender
 * is still writing makes the HTTP stack in front of the Worker (wrangler dev's proxy, and senders' clients) see a
 * reset instead of our answer; reading the rest first makes the 413 arrive. Beyond this we stop reading and
 * answer anyway: the bound keeps a sender from holding the request open by streaming forever.
 */
export const OVER_CAP_DRAIN_BYTES = 8 * 1024 * 1024;

/** The sender's body stream failed part-way (dropped connection, broken chunked framing): a client error. */
export type UnreadableBody = "unreadable";
export type TooLarge = "too-large";

/**
 * Reads the exact request bytes, refusing anything over the cap without buffering it: a declared Content-Length
 * over the cap is refused without keeping any of it, and a chunked body stops being kept as soon as it passes.
 * Either way the rest is drained (up to OVER_CAP_DRAIN_BYTES) so the refusal reaches the sender.
 */
export async function readBodyWithCap(
  request: Request,
  maxBytes: number,
  drainBytes: number = OVER_CAP_DRAIN_BYTES,
): Promise<Uint8Array | TooLarge | UnreadableBody> {
  if (!request.body) return new Uint8Array(0);
  const declared = Number(request.headers.get("content-length") ?? NaN);
  if (Number.isFinite(declared) && declared <= maxBytes) return readDeclared(request, maxBytes);
  const reader = request.body.getReader();
  if (Number.isFinite(declared)) {
    await discardRest(reader, declared <= maxBytes + drainBytes ? drainBytes + maxBytes : 0);
    return "too-large";
  }
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    let next: ReadableStreamReadResult<Uint8Array>;
    try {
      next = await reader.read();
    } catch {
      return "unreadable";
    }
    if (next.done) break;
    total += next.value.byteLength;
    if (total > maxBytes) {
      await discardRest(reader, drainBytes - (total - maxBytes));
      return "too-large";
    }
    chunks.push(next.value);
  }
  if (chunks.length === 1) return chunks[0]!;
  const body = new Uint8Array(total);
  let offset = 0;
  for (const chunk of chunks) {
    body.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return body;
}

/**
 * A body whose declared length is within the cap, read whole in one call rather than chunk by chunk (the
 * acknowledgement path's common case, and measurably cheaper): the HTTP layer frames a body by its declared length,
 * so it cannot be longer. Only a Request built in-process could carry a length its stream does not keep to; such a
 * body is still refused once read.
 */
async function readDeclared(request: Request, maxBytes: number): Promise<Uint8Array | TooLarge | UnreadableBody> {
  let whole: ArrayBuffer;
  try {
    whole = await request.arrayBuffer();
  } catch {
    return "unreadable";
  }
  return whole.byteLength > maxBytes ? "too-large" : new Uint8Array(whole);
}

/** Reads and drops up to `budget` more bytes, then cancels whatever is left. Never throws: the answer is 413 anyway. */
async function discardRest(reader: ReadableStreamDefaultReader<Uint8Array>, budget: number): Promise<void> {
  let remaining = budget;
  try {
    while (remaining > 0) {
      const { done, value } = await reader.read();
      if (done) return;
      remaining -= value.byteLength;
    }
    await reader.cancel();
  } catch {
    // The sender went away while we discarded; there is nobody left to answer, and nothing was kept.
  }
}

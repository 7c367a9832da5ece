import { concatBytes, utf8Bytes } from "../crypto/encoding";
import { parseJsonBody } from "./json";
import { documentSpan, elementSpans, memberSpan } from "./json-spans";

/**
 * The body each item of an Adyen batch is kept, shown and forwarded with: the delivery exactly as received, with its
 * `notificationItems` array cut down to that one item's element, itself exactly as received. So every stored Adyen
 * body has Adyen's own shape with one item (a destination parses one shape), every byte the item arrived with is
 * kept (`live`, the envelope's spelling, the item's unsigned fields), and the batch costs about its own size in
 * storage, not its size once per item. A compact batch's item body is byte for byte what Adyen sends for that item
 * alone, so the same item delivered alone and in a batch has one payload hash.
 *
 * Null when the byte scan and the parser disagree on what the items are: never for text JSON.parse accepted, but
 * checked rather than assumed, since the kept bytes must be the item that was verified.
 */
export function itemBodies(rawBody: Uint8Array, elements: readonly unknown[]): Uint8Array[] | null {
  const array = memberSpan(rawBody, documentSpan(rawBody), "notificationItems");
  if (!array) return null;
  const spans = elementSpans(rawBody, array);
  if (spans.length !== elements.length) return null;
  const before = rawBody.subarray(0, array.start);
  const after = rawBody.subarray(array.end);
  const bodies: Uint8Array[] = [];
  for (const [index, span] of spans.entries()) {
    const element = rawBody.subarray(span.start, span.end);
    if (JSON.stringify(parseJsonBody(element)) !== JSON.stringify(elements[index])) return null;
    bodies.push(concatBytes(before, utf8Bytes("["), element, utf8Bytes("]"), after));
  }
  return bodies;
}

// A sample payload and where the signer writes the event key into it.

/** The sample as the bytes to send; a string (a file that is not JSON) goes out untouched. */
export function bodyOf(/** @type {unknown} */ payload) {
  return typeof payload === "string" ? payload : JSON.stringify(payload, null, 2);
}

/**
 * A copy of a JSON sample with `value` written at a dotted path, e.g. `event-data.id` or `0.eventId` in a batch;
 * a string (a file that is not JSON) stays as it is.
 */
export function withValueAt(/** @type {unknown} */ payload, /** @type {string} */ path, /** @type {unknown} */ value) {
  if (typeof payload !== "object" || payload === null) return payload;
  const copy = structuredClone(payload);
  const keys = path.split(".");
  let node = /** @type {Record<string, unknown>} */ (copy);
  for (const key of keys.slice(0, -1)) {
    if (typeof node[key] !== "object" || node[key] === null) node[key] = {};
    node = /** @type {Record<string, unknown>} */ (node[key]);
  }
  node[keys.at(-1) ?? ""] = value;
  return copy;
}

export function valueAt(/** @type {unknown} */ payload, /** @type {string} */ path) {
  let node = payload;
  for (const key of path.split("."))
    node = typeof node === "object" && node !== null ? /** @type {Record<string, unknown>} */ (node)[key] : undefined;
  return node;
}

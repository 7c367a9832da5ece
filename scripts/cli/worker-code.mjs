// The Worker's own TypeScript, bundled on the fly for the CLI, so a command can never disagree with what the
// deployed Worker would decide (check's config verdict, route test's filter, schema and transform).
import { timingSafeEqual } from "node:crypto";
import { join } from "node:path";

const ROOT = join(import.meta.dirname, "..", "..");

/**
 * @param {string} contents an entry module, with paths from the project root (`export * from "./src/…"`)
 * @returns {Promise<any>} the bundled module's exports
 */
export async function importWorkerCode(contents) {
  // workerd's constant-time compare (a Workers extension of WebCrypto), which the providers' verifiers use.
  if (!("timingSafeEqual" in crypto.subtle)) {
    Object.defineProperty(crypto.subtle, "timingSafeEqual", {
      value: (/** @type {ArrayBufferView | ArrayBuffer} */ a, /** @type {ArrayBufferView | ArrayBuffer} */ b) =>
        timingSafeEqual(asBytes(a), asBytes(b)),
    });
  }
  const { build } = await import("esbuild");
  const result = await build({
    stdin: { contents, resolveDir: ROOT, loader: "ts" },
    bundle: true,
    write: false,
    format: "esm",
    platform: "node",
    logLevel: "silent",
  });
  return import(`data:text/javascript;base64,${Buffer.from(result.outputFiles[0].text).toString("base64")}`);
}

/** Stand-ins for the D1 bindings the deployed Worker will have (the registry checks a source's database is one). */
export function d1BindingStandIns(/** @type {string[]} */ bindings) {
  class D1Database {
    prepare() {}
    batch() {}
  }
  return Object.fromEntries(bindings.map((binding) => [binding, new D1Database()]));
}

function asBytes(/** @type {ArrayBufferView | ArrayBuffer} */ data) {
  return ArrayBuffer.isView(data)
    ? new Uint8Array(data.buffer, data.byteOffset, data.byteLength)
    : new Uint8Array(data);
}

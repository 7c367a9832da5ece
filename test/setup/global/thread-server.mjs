// The protocol a stand-in served from a worker thread keeps with the thread that started it (forward-standin.ts,
// key-standin.ts): it posts the port it listens on once, and closes (ending the thread) when sent "close".
import { parentPort } from "node:worker_threads";

/** Tells the parent which port `server` listens on, and closes it when the parent says "close". */
export function servedFromThread(/** @type {import("node:http").Server} */ server) {
  const address = server.address();
  parentPort?.postMessage({ port: typeof address === "object" && address ? address.port : 0 });
  parentPort?.on("message", (message) => {
    if (message !== "close") return;
    server.closeAllConnections();
    server.close(() => process.exit(0));
  });
}

// `listen <source> [--route R] --forward URL`: a deployed (or local) receiver's deliveries on this machine. It holds a
// WebSocket to the route's listen:<name> hub (src/listen/hub.ts), posts each delivery, signed as a forward is, to
// the local server, and answers the hub with that server's status and latency: the receiver records the outcome and
// retries by the route's rules. The connection's state is always printed; a dropped one is reconnected with backoff.
import { CliError, EXIT, ReceiverUnreachable } from "../errors.mjs";
import { clock, dim, duration, printable } from "../format.mjs";
import { adminAuthHeaders, adminRequest } from "../http.mjs";
import { receiverUrl } from "../project.mjs";
import { deliverLocally, eventLine, waitingLines } from "./listen-delivery.mjs";

/** Backoff between reconnects: doubled from the first to the last, reset once a connection is confirmed. */
const RECONNECT_MS = { first: 500, last: 10_000 };
/** A keep-alive every this often; a connection with no pong for two of them is taken as dropped. */
const PING_EVERY_MS = 15_000;

/**
 * @param {string} source
 * @param {{ route?: string, forward?: string } & import("../project.mjs").ProjectOptions} options
 */
export async function listen(source, options) {
  if (!options.forward)
    throw new CliError("--forward <url> is required: where your local server takes deliveries", EXIT.usage);
  const target = localTarget(options.forward);
  const query = options.route ? `?route=${encodeURIComponent(options.route)}` : "";
  const path = `/listen/${encodeURIComponent(source)}${query}`;
  // Asked first over plain HTTP: a refused token, an unknown source or a route that is not listen: ends here, in one line.
  /** @type {{ source: string, route: string, listen: string }} */
  const described = await adminRequest(options, path);
  const socketUrl = `${receiverUrl(options).replace(/^http/, "ws")}/admin/api${path}`;
  const headers = adminAuthHeaders(options);
  console.log(
    `listen:${printable(described.listen)} (source ${printable(described.source)}, route ${printable(described.route)}) → ${target}`,
  );

  let stopping = false;
  /** @type {WebSocket | null} */
  let socket = null;
  const stop = () => {
    stopping = true;
    socket?.close(1000, "stopped");
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);

  let backoff = RECONNECT_MS.first;
  while (!stopping) {
    console.log(`${clock(Date.now())}  connecting to ${receiverUrl(options)} …`);
    // Node's WebSocket (undici) takes request headers as a second-argument option, which the DOM types do not know.
    socket = new WebSocket(socketUrl, /** @type {any} */ ({ headers }));
    const ended = await connection(socket, target, () => {
      backoff = RECONNECT_MS.first;
    });
    socket = null;
    if (stopping) break;
    console.log(`${clock(Date.now())}  disconnected (${ended}); reconnecting in ${duration(backoff)}`);
    await new Promise((done) => setTimeout(done, backoff));
    backoff = Math.min(backoff * 2, RECONNECT_MS.last);
    // A connection refused at the door (the token rotated, the route changed) is said, not retried for ever; a
    // receiver out of reach is waited for.
    if (!stopping) await adminRequest(options, path).catch(unlessUnreachable);
  }
  console.log(`${clock(Date.now())}  stopped`);
  return 0;
}

/**
 * One connection's life: "connected" once the hub confirms, each delivery posted and answered, a keep-alive.
 * Resolves with why it ended.
 * @param {WebSocket} socket
 * @param {string} target
 * @param {() => void} onConfirmed
 */
function connection(socket, target, onConfirmed) {
  let lastPong = Date.now();
  /** @type {(reason: string) => void} */
  let finish = () => {};
  const ended = new Promise((resolve) => (finish = resolve));
  const keepAlive = setInterval(() => {
    if (Date.now() - lastPong > 2 * PING_EVERY_MS) {
      // A dead link may never complete a close handshake: the connection is over now, whatever the socket says.
      clearInterval(keepAlive);
      socket.close(4000, "no pong");
      return finish(`no answer to the keep-alive for ${duration(2 * PING_EVERY_MS)}`);
    }
    if (socket.readyState === WebSocket.OPEN) socket.send("ping");
  }, PING_EVERY_MS);
  socket.addEventListener("message", async (event) => {
    if (event.data === "pong") {
      lastPong = Date.now();
      return;
    }
    /** @type {any} */
    let message;
    try {
      message = JSON.parse(String(event.data));
    } catch {
      return;
    }
    if (message.type === "connected") {
      lastPong = Date.now();
      onConfirmed();
      console.log(`${clock(Date.now())}  connected: listening on listen:${printable(message.listen)}`);
      for (const line of waitingLines(message)) console.log(dim(line));
    } else if (message.type === "delivery") {
      const result = await deliverLocally(target, message);
      console.log(eventLine(message, result));
      if (socket.readyState === WebSocket.OPEN)
        socket.send(JSON.stringify({ type: "result", attempt: message.attempt, ...result }));
    }
  });
  socket.addEventListener("close", (event) => {
    clearInterval(keepAlive);
    // 1006 is the WebSocket's word for a connection that ended without a close frame: the link dropped.
    finish(event.code === 1006 ? "connection lost" : `${event.code}${event.reason ? ` ${event.reason}` : ""}`);
  });
  socket.addEventListener("error", () => {});
  return ended;
}

function unlessUnreachable(/** @type {unknown} */ error) {
  if (!(error instanceof ReceiverUnreachable)) throw error;
}

/** The local server's URL, checked once: a listener posts to this machine's own server, over http or https. */
function localTarget(/** @type {string} */ value) {
  let url;
  try {
    url = new URL(value);
  } catch {
    throw new CliError(`--forward ${JSON.stringify(value)} is not a URL: e.g. http://127.0.0.1:3000/hooks`, EXIT.usage);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:")
    throw new CliError(`--forward must be an http or https URL, not ${url.protocol}`, EXIT.usage);
  return url.href;
}

// `echo [--port P]`: a stand-in backend for a forward destination. It prints each delivery the receiver forwards
// (this is the user's own local tool, so the body is shown) and checks its gateway signature, answering 401 when
// it does not verify so the receiver's retry path can be watched too.
import { createServer } from "node:http";
import { Webhook } from "standardwebhooks";
import { CliError, EXIT } from "../errors.mjs";
import { clock, dim, printable, status } from "../format.mjs";
import { devVarsPath, readDevVars } from "../project.mjs";

/**
 * @param {{ port?: string, host?: string, status?: string } & import("../project.mjs").ProjectOptions} options
 */
export async function echo(options) {
  const secret = process.env.GATEWAY_SIGNING_SECRET || readDevVars(options).GATEWAY_SIGNING_SECRET;
  if (!secret)
    throw new CliError(
      `no GATEWAY_SIGNING_SECRET in ${devVarsPath(options)}: add one (npm run -s cli -- secret gateway makes it) and restart npm start`,
      EXIT.setup,
    );
  let verifier;
  try {
    verifier = new Webhook(secret);
  } catch {
    throw new CliError(
      `GATEWAY_SIGNING_SECRET in ${devVarsPath(options)} is not a whsec_<base64> secret: npm run -s cli -- secret gateway makes one`,
      EXIT.setup,
    );
  }
  const forcedStatus = options.status === undefined ? undefined : Number(options.status);
  if (forcedStatus !== undefined && !(forcedStatus >= 200 && forcedStatus <= 599))
    throw new CliError("--status must be an HTTP status, 200 to 599", EXIT.usage);
  const port = Number(options.port ?? 8789);
  const host = options.host ?? "127.0.0.1";

  const server = createServer((request, response) => {
    const chunks = /** @type {Buffer[]} */ ([]);
    request.on("data", (chunk) => chunks.push(chunk));
    request.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      const header = (/** @type {string} */ name) => String(request.headers[name] ?? "");
      let verdict = "signature ok";
      let answer = 200;
      try {
        verifier.verify(body, {
          "webhook-id": header("webhook-id"),
          "webhook-timestamp": header("webhook-timestamp"),
          "webhook-signature": header("webhook-signature"),
        });
      } catch (error) {
        verdict = `signature REJECTED (${/** @type {Error} */ (error).message})`;
        answer = 401;
      }
      if (forcedStatus !== undefined) answer = forcedStatus;
      // A forwarded key or type that is no plain header value arrives percent-encoded under "<name>-encoded".
      const eventHeader = (/** @type {string} */ name) => {
        const encoded = header(`${name}-encoded`);
        if (!encoded) return header(name);
        try {
          return decodeURIComponent(encoded);
        } catch {
          return encoded;
        }
      };
      console.log(
        `── ${clock(Date.now())}  ${request.method} ${printable(request.url)}  ${answer === 401 && verdict.startsWith("signature REJECTED") ? status("failed") : ""}${verdict} → ${answer}`,
      );
      console.log(
        `   receipt ${printable(header("webhook-id")) || "—"}  source ${printable(header("x-webhook-source")) || "—"}  event ${printable(eventHeader("x-webhook-event-key")) || "—"}${eventHeader("x-webhook-event-type") ? `  type ${printable(eventHeader("x-webhook-event-type"))}` : ""}`,
      );
      console.log(
        dim(
          `   idempotency-key ${printable(header("idempotency-key")) || "—"}  content-type ${printable(header("content-type")) || "—"}`,
        ),
      );
      console.log(indent(pretty(body)));
      response.writeHead(answer, { "content-type": "application/json" });
      response.end(JSON.stringify({ received: answer < 300 }));
    });
  });
  await new Promise((resolve, reject) => {
    server.once("error", (error) => {
      const code = /** @type {{ code?: string }} */ (error).code;
      reject(
        new CliError(
          code === "EADDRINUSE"
            ? `port ${port} is in use: pass --port <another>`
            : `cannot listen on ${host}:${port} (${code ?? error.message})`,
          EXIT.setup,
        ),
      );
    });
    server.listen(port, host, () => resolve(undefined));
  });
  console.log(`echo backend on http://${host}:${port}/ — verifying with GATEWAY_SIGNING_SECRET; point a source at it:`);
  console.log(
    dim(
      `  destination = "http://${host}:${port}/hooks"   (in its [vars.SOURCES.<name>] table, then restart npm start)`,
    ),
  );
  await new Promise((resolve) => {
    const stop = () => server.close(() => resolve(undefined));
    process.once("SIGINT", stop);
    process.once("SIGTERM", stop);
  });
  return 0;
}

function pretty(/** @type {string} */ body) {
  try {
    return printable(JSON.stringify(JSON.parse(body), null, 2), { multiline: true });
  } catch {
    return printable(body, { multiline: true });
  }
}

const indent = (/** @type {string} */ text) =>
  text
    .split("\n")
    .map((line) => `   ${line}`)
    .join("\n");

import http from "node:http";
import { standardWebhookHeaders } from "../../scripts/lib/signed-delivery.mjs";

/**
 * The provider side: every delivery is signed by the maintained `standardwebhooks` library (never by our own
 * code), with a fresh timestamp and signature per attempt, as real senders do on a retry.
 */

export type SendOutcome = { status: number; millis: number } | { status: "error"; millis: number; error: string };

export class Sender {
  private readonly secret: string;
  private readonly agent: http.Agent;
  private readonly port: number;
  private readonly path: string;
  private readonly timeoutMs: number;

  constructor(options: { origin: string; path: string; secret: string; maxSockets: number; timeoutMs?: number }) {
    this.secret = options.secret;
    this.agent = new http.Agent({ keepAlive: true, maxSockets: options.maxSockets });
    this.port = Number(new URL(options.origin).port);
    this.path = options.path;
    this.timeoutMs = options.timeoutMs ?? 30_000;
  }

  signedHeaders(webhookId: string, body: string, at = new Date()): Record<string, string> {
    return standardWebhookHeaders(this.secret, webhookId, body, at);
  }

  deliver(webhookId: string, body: string): Promise<SendOutcome> {
    return this.post(body, this.signedHeaders(webhookId, body));
  }

  /** Sends pre-built bytes; latency is measured from the write to the end of the response. */
  post(body: string, headers: Record<string, string>): Promise<SendOutcome> {
    return new Promise((resolve) => {
      const startedAt = performance.now();
      const request = http.request(
        {
          host: "127.0.0.1",
          port: this.port,
          path: this.path,
          method: "POST",
          agent: this.agent,
          headers: { ...headers, "content-length": Buffer.byteLength(body) },
          timeout: this.timeoutMs,
        },
        (response) => {
          response.resume();
          response.on("end", () =>
            resolve({ status: response.statusCode ?? 0, millis: performance.now() - startedAt }),
          );
          response.on("error", (error) =>
            resolve({ status: "error", millis: performance.now() - startedAt, error: error.message }),
          );
        },
      );
      request.on("timeout", () => request.destroy(new Error("timed out")));
      request.on("error", (error) =>
        resolve({ status: "error", millis: performance.now() - startedAt, error: error.message }),
      );
      request.end(body);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}
